package verifier_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// pendingOf reads the signature of an evidence message, up to its
// Ed25519 check.
func pendingOf(t *testing.T, m *nats.Msg) *dsse.PendingSignature {
	t.Helper()
	e, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(t, err)
	p, err := binding.Decode[events.Payload](e)
	require.NoError(t, err)
	s, err := dsse.ReadSignature(e, p, dsse.ParseKeyID)
	require.NoError(t, err)
	return s
}

// badSignature changes one bit of the message's signature, leaving its
// envelope well formed.
func badSignature(t *testing.T, m *nats.Msg) {
	t.Helper()
	h := "ce-" + dsse.ExtSignature
	var env map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(m.Header.Get(h), "%22", `"`)), &env))
	sig := env["signatures"].([]any)[0].(map[string]any)
	raw, err := base64.StdEncoding.DecodeString(sig["sig"].(string))
	require.NoError(t, err)
	raw[7] ^= 1
	sig["sig"] = base64.StdEncoding.EncodeToString(raw)
	b, err := json.Marshal(env)
	require.NoError(t, err)
	m.Header.Set(h, strings.ReplaceAll(string(b), `"`, "%22"))
}

// TestVerifyAll: signatures checked together hold exactly as each does
// alone (crypto/ed25519): a batch of good ones, a batch with bad ones
// among them (found one by one), a single one, none; each with the keys
// used as they are, all expanded, and some expanded.
func TestVerifyAll(t *testing.T) {
	var good []*dsse.PendingSignature
	for i := range 12 {
		host := fmt.Sprintf("batch-%02d", i%4)
		m, _ := evidenceMsg(t, host, snap(unit(int64(i))))
		good = append(good, pendingOf(t, m))
	}
	m, _ := evidenceMsg(t, "batch-00", snap(unit(99)))
	badSignature(t, m)
	flipped := pendingOf(t, m)
	wrongKey := *good[1]
	wrongKey.PublicKey = good[2].PublicKey // batch-02's key for batch-01's signature

	for _, tc := range []struct {
		name  string
		batch []*dsse.PendingSignature
	}{
		{"all good", good},
		{"bad ones among them", append(append([]*dsse.PendingSignature{flipped}, good[:6]...), &wrongKey, nil)},
		{"one good", good[:1]},
		{"one bad", []*dsse.PendingSignature{flipped}},
		{"none", nil},
	} {
		var some []*dsse.PendingSignature
		for i, s := range tc.batch {
			if s != nil && i%2 == 0 {
				some = append(some, s)
			}
		}
		for keys, expand := range map[string][]*dsse.PendingSignature{
			"keys as they are": nil,
			"keys expanded":    slices.DeleteFunc(slices.Clone(tc.batch), func(s *dsse.PendingSignature) bool { return s == nil }),
			"some expanded":    some,
		} {
			got := verifier.VerifyAll(tc.batch, expand...)
			require.Len(t, got, len(tc.batch), tc.name)
			for i, s := range tc.batch {
				want := s != nil && ed25519.Verify(s.PublicKey, s.Message, s.Sig)
				assert.Equal(t, want, got[i], "%s, %s: signature %d", tc.name, keys, i)
			}
		}
	}
}

// TestBadSignatureInABatch: evidence with a bad signature, published
// among authentic evidence, is refused as such while the rest gets its
// verdicts.
func TestBadSignatureInABatch(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, nil)
	// The hosts' keys pinned first, so that the batch below is verified
	// against the registry's view.
	for i := range 4 {
		verdictOf(ctx, t, js, publishSnapshot(ctx, t, js, fmt.Sprintf("batch-%02d", i), snap(unit(1))))
	}
	var msgs []*nats.Msg
	var good []string
	var bad string
	for i := range 24 {
		m, id := evidenceMsg(t, fmt.Sprintf("batch-%02d", i%4), snap(unit(int64(10+i))))
		if i == 13 {
			badSignature(t, m)
			bad = id
		} else {
			good = append(good, id)
		}
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		_, err := js.PublishMsgAsync(m)
		require.NoError(t, err)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publish: not acknowledged")
	}
	assert.Contains(t, rejections(ctx, t, js, 1)[bad], "rejected evidence (bad_signature)")
	settled(ctx, t, js, topology.ConsumerVerifier)
	all, _ := verdicts(ctx, t, js)
	for _, id := range good {
		assert.Len(t, all[id], 1, "a verdict for %s", id)
	}
	assert.Empty(t, all[bad])
}
