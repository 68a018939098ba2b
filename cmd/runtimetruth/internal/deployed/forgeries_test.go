package deployed_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// forgeries: what web's own credential and key (a compromised web, or a
// copy of its key file) still cannot do to web's verdict: each event below
// is dead-lettered with its reason, and web's verdict
// stays on its collector's own evidence. An old signature sequence on a new
// event (replayed), a time two hours off (clock_skew, both ways), data
// other than the signed data (claim_mismatch), a signature that is not one
// (bad_signature), no signature (unsigned).
func (p *pipeline) forgeries() {
	t := p.t
	ctx := t.Context()
	key := readKey(t, filepath.Join(p.dir, "collector", "identity", "ed25519.key"))
	target, err := events.ParseTarget(p.target)
	require.NoError(t, err)
	nc := p.dial(idHost(web))
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	build := func(opts ...binding.Option) *nats.Msg {
		t.Helper()
		s := snapshot.New(snapshot.Target{Kind: target.Kind, Identifier: target.Identifier}, snapshot.Record{
			Plane: snapshot.Live, Kind: target.Kind,
			Source: snapshot.Source{Collector: "git", Method: "forged"},
			Data:   snapshot.Data{"dirty": snapshot.Bool(false)},
		})
		s.CapturedAt = snapshot.FormatTime(time.Now().UTC())
		ev, err := events.NewEvidenceCollected(web, s, time.Second)
		require.NoError(t, err)
		m, _, err := binding.NewMsg(events.Source("collector", web), ev, opts...)
		require.NoError(t, err)
		return m
	}
	signedAt := func(seq uint64) binding.Option {
		return binding.WithSigner(dsse.NewSigner(key, func() (uint64, error) { return seq, nil }))
	}
	// A sequence far above the collector's: the signature is web's, only
	// the thing named by each case is wrong.
	const ahead = 1 << 40
	forgeries := []struct {
		name, reason string
		msg          func() *nats.Msg
	}{
		{"an old sequence on a new event", "replayed", func() *nats.Msg { return build(signedAt(1)) }},
		{"a time two hours ago", "clock_skew", func() *nats.Msg {
			return build(signedAt(ahead), binding.WithTime(time.Now().Add(-2*time.Hour)))
		}},
		{"a time two hours ahead", "clock_skew", func() *nats.Msg {
			return build(signedAt(ahead+1), binding.WithTime(time.Now().Add(2*time.Hour)))
		}},
		{"other data than the signed data", "claim_mismatch", func() *nats.Msg {
			m := build(signedAt(ahead + 2))
			field := []byte(`"interval_seconds":1`)
			i := bytes.Index(m.Data, field)
			require.GreaterOrEqual(t, i, 0, "the interval in %s", m.Data)
			m.Data = append([]byte(nil), m.Data...)
			m.Data[i+len(field)-1] = '2' // a valid event, not the one signed
			return m
		}},
		{"a signature that is not one", "bad_signature", func() *nats.Msg {
			m := build(signedAt(ahead + 3))
			m.Header.Set(binding.HeaderPrefix+dsse.ExtSignature, "not a DSSE envelope")
			return m
		}},
		{"no signature", "unsigned", func() *nats.Msg { return build() }},
	}
	for _, f := range forgeries {
		m := f.msg()
		id := m.Header.Get(binding.HeaderPrefix + "id")
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err, f.name)
		natstest.CheckFor(t, deadline, poll, func() error {
			for _, l := range p.deadLetters(web, "") {
				if l.id == id {
					if l.reason != f.reason {
						return fmt.Errorf("%s: dead-lettered as %q (%s), want %s", f.name, l.reason, l.err, f.reason)
					}
					return nil
				}
			}
			return fmt.Errorf("%s: no dead letter of %s", f.name, id)
		})
		rec := p.records(web)
		require.Len(t, rec, 1)
		assert.Equal(t, p.key, rec[0].SignedBy, "%s: web's verdict stays on its collector's evidence", f.name)
		assert.NotEqual(t, id, rec[0].EvidenceID, f.name)
	}
}

// readKey reads a collector's key file (PEM PKCS #8 Ed25519).
func readKey(t require.TestingT, path string) ed25519.PrivateKey {
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	block, _ := pem.Decode(raw)
	require.NotNil(t, block, "a PEM block in %s", path)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	key, ok := k.(ed25519.PrivateKey)
	require.True(t, ok, "an Ed25519 key in %s", path)
	return key
}
