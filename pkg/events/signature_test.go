package events_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
)

// testSigner is a signer with a fresh key and a counter from 1.
func testSigner(t testing.TB) (*dsse.Signer, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	var seq atomic.Uint64
	return dsse.NewSigner(priv, func() (uint64, error) { return seq.Add(1), nil }), pub
}

// signedEvidence is the golden evidence.collected payload signed by a
// fresh testSigner: the signer and its key, the payload, and the message
// and event NewMsg made of it.
func signedEvidence(tb testing.TB) (*dsse.Signer, ed25519.PublicKey, events.EvidenceCollected, *nats.Msg, event.Event) {
	tb.Helper()
	signer, pub := testSigner(tb)
	ev := fixtures(tb)["evidence.collected.v1.golden.json"].(events.EvidenceCollected)
	m, e, err := binding.NewMsg(events.Source("collector", ev.Host), ev, binding.WithSigner(signer))
	require.NoError(tb, err)
	return signer, pub, ev, m, e
}

// keys looks keys up by id, as a host registry does: a key not among
// pubs is errUnknownKey.
func keys(pubs ...ed25519.PublicKey) func(string) (ed25519.PublicKey, error) {
	return func(id string) (ed25519.PublicKey, error) {
		for _, p := range pubs {
			if dsse.KeyID(p) == id {
				return p, nil
			}
		}
		return nil, errUnknownKey
	}
}

// errUnknownKey is the error of a key lookup that finds no key.
var errUnknownKey = errors.New("unknown key")

// header and setHeader read and write the envelope's header, which the
// codec percent-encodes ('"' as %22; the envelope holds no other such
// byte).
func header(m *nats.Msg) string {
	return strings.ReplaceAll(m.Header.Get("ce-"+dsse.ExtSignature), "%22", `"`)
}

func setHeader(m *nats.Msg, v string) {
	m.Header.Set("ce-"+dsse.ExtSignature, strings.ReplaceAll(v, `"`, "%22"))
}

// openByHand reads the DSSE envelope env as another implementation would,
// with encoding/json, encoding/base64 and crypto/ed25519 alone: its one
// signature must verify by pub over the PAE of the payload as carried.
// It returns the envelope's payload type, key id and payload.
func openByHand(t *testing.T, env []byte, pub ed25519.PublicKey) (payloadType, keyID string, payload []byte) {
	t.Helper()
	var raw struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
		Signatures  []struct {
			KeyID string `json:"keyid"`
			Sig   string `json:"sig"`
		} `json:"signatures"`
	}
	require.NoError(t, json.Unmarshal(env, &raw))
	require.Len(t, raw.Signatures, 1)
	payload, err := base64.StdEncoding.DecodeString(raw.Payload)
	require.NoError(t, err)
	sig, err := base64.StdEncoding.DecodeString(raw.Signatures[0].Sig)
	require.NoError(t, err)
	pae := fmt.Sprintf("DSSEv1 %d %s %d %s", len(raw.PayloadType), raw.PayloadType, len(payload), payload)
	assert.True(t, ed25519.Verify(pub, []byte(pae), sig))
	return raw.PayloadType, raw.Signatures[0].KeyID, payload
}

// readSigned decodes a message and verifies its signature.
func readSigned(t *testing.T, m *nats.Msg, key func(string) (ed25519.PublicKey, error)) (dsse.Signature, error) {
	t.Helper()
	e, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(t, err)
	p, err := binding.Decode[events.Payload](e)
	require.NoError(t, err)
	return dsse.VerifySignature(e, p, key)
}

// TestPAE is DSSE's own example of the pre-authentication encoding.
func TestPAE(t *testing.T) {
	assert.Equal(t, "DSSEv1 29 http://example.com/HelloWorld 11 hello world",
		string(dsse.PAE("http://example.com/HelloWorld", []byte("hello world"))))
	assert.Equal(t, "DSSEv1 0  0 ", string(dsse.PAE("", nil)))
}

// TestSignatureRoundTrip: a signed event carries its DSSE envelope through
// NATS and verifies; the claim names the event, its host and target, the
// sequence and the data's SHA-256; the bytes signed are the PAE of the
// claim as carried, checked here with crypto/ed25519 alone, as another
// implementation would.
func TestSignatureRoundTrip(t *testing.T) {
	signer, pub := testSigner(t)
	ev := fixtures(t)["evidence.collected.v1.golden.json"].(events.EvidenceCollected)
	failed := events.CollectionFailed{Host: "web-01", Collector: "git", Reason: "timeout", Message: "timed out",
		Target: &events.Target{Kind: "git.repository", Identifier: "/srv/app"}}
	for i, p := range []events.Payload{ev, failed} {
		m, e, err := binding.NewMsg(events.Source("collector", "web-01"), p, binding.WithSigner(signer))
		require.NoError(t, err)
		sig, err := readSigned(t, m, keys(pub))
		require.NoError(t, err, p.Type())
		assert.Equal(t, signer.KeyID(), sig.KeyID)
		assert.Equal(t, uint64(i+1), sig.Claim.Seq)
		assert.Equal(t, e.ID(), sig.Claim.ID)
		assert.Equal(t, p.Type(), sig.Claim.Type)

		// By hand, from the header: the documented bytes.
		payloadType, _, claim := openByHand(t, []byte(header(m)), pub)
		assert.Equal(t, "application/vnd.runtimetruth.claim.v1+json", payloadType)
		assert.Contains(t, string(claim), `"host":"`)
		assert.Contains(t, string(claim), fmt.Sprintf(`"seq":%d`, i+1))
	}
}

// TestSignatureRefusals: each change an attacker holding a message (or
// another key) could make is refused with its reason.
func TestSignatureRefusals(t *testing.T) {
	signer, pub := testSigner(t)
	other, otherPub := testSigner(t)
	ev := fixtures(t)["evidence.collected.v1.golden.json"].(events.EvidenceCollected)
	src := events.Source("collector", ev.Host)
	signed := func(t *testing.T, s *dsse.Signer, p events.Payload, opts ...binding.Option) *nats.Msg {
		t.Helper()
		m, _, err := binding.NewMsg(src, p, append(opts, binding.WithSigner(s))...)
		require.NoError(t, err)
		return m
	}
	for _, tc := range []struct {
		name string
		msg  func(t *testing.T) *nats.Msg
		keys func(string) (ed25519.PublicKey, error)
		want error
		says string
	}{
		{name: "unsigned", keys: keys(pub), want: dsse.ErrUnsigned, msg: func(t *testing.T) *nats.Msg {
			m, _, err := binding.NewMsg(src, ev)
			require.NoError(t, err)
			return m
		}},
		{name: "a flipped bit of the data", keys: keys(pub), want: dsse.ErrClaim, says: "payload_sha256", msg: func(t *testing.T) *nats.Msg {
			m := signed(t, signer, ev)
			m.Data = []byte(strings.Replace(string(m.Data), `"interval_seconds":60`, `"interval_seconds":61`, 1))
			return m
		}},
		{name: "replayed with a new id", keys: keys(pub), want: dsse.ErrClaim, says: "id", msg: func(t *testing.T) *nats.Msg {
			m := signed(t, signer, ev)
			m.Header.Set("ce-id", "0190f0c2-0000-7000-8000-000000000001")
			m.Header.Set(nats.MsgIdHdr, "0190f0c2-0000-7000-8000-000000000001")
			return m
		}},
		{name: "replayed with a new time", keys: keys(pub), want: dsse.ErrClaim, says: "time", msg: func(t *testing.T) *nats.Msg {
			m := signed(t, signer, ev)
			m.Header.Set("ce-time", time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano))
			return m
		}},
		{name: "another host's name", keys: keys(pub), want: dsse.ErrClaim, msg: func(t *testing.T) *nats.Msg {
			m := signed(t, signer, ev)
			forged := ev
			forged.Host = "db-01"
			fm, _, err := binding.NewMsg(src, forged)
			require.NoError(t, err)
			fm.Header.Set("ce-"+dsse.ExtSignature, m.Header.Get("ce-"+dsse.ExtSignature))
			fm.Header.Set("ce-id", m.Header.Get("ce-id"))
			fm.Header.Set(nats.MsgIdHdr, m.Header.Get("ce-id"))
			fm.Header.Set("ce-time", m.Header.Get("ce-time"))
			return fm
		}},
		{name: "signed by another key", keys: keys(pub), want: errUnknownKey, msg: func(t *testing.T) *nats.Msg {
			return signed(t, other, ev)
		}},
		{name: "another key's id on this key's signature", keys: keys(pub, otherPub), want: dsse.ErrBadSignature, msg: func(t *testing.T) *nats.Msg {
			m := signed(t, signer, ev)
			setHeader(m, strings.Replace(header(m), signer.KeyID(), other.KeyID(), 1))
			return m
		}},
		{name: "a key that is not the key it names", keys: func(string) (ed25519.PublicKey, error) { return otherPub, nil }, want: dsse.ErrBadSignature, msg: func(t *testing.T) *nats.Msg {
			return signed(t, signer, ev)
		}},
		{name: "not an envelope", keys: keys(pub), want: dsse.ErrBadSignature, msg: func(t *testing.T) *nats.Msg {
			m := signed(t, signer, ev)
			setHeader(m, `{"payloadType":"x"}`)
			return m
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readSigned(t, tc.msg(t), tc.keys)
			require.ErrorIs(t, err, tc.want)
			if tc.says != "" {
				assert.Contains(t, err.Error(), tc.says+" differs")
			}
		})
	}
}

// TestSignatureHeaderIsChecked: the codec carries the envelope as printable
// ASCII of at most MaxSignatureSize bytes, on both of its read paths.
func TestSignatureHeaderIsChecked(t *testing.T) {
	_, _, _, m, want := signedEvidence(t)
	got, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(t, err)
	assert.Equal(t, want.Extensions()[dsse.ExtSignature], got.Extensions()[dsse.ExtSignature])
	assert.Equal(t, want.Extensions()[dsse.ExtSignature], binding.AttributesOf(got).Signature)

	for _, bad := range []string{strings.Repeat("a", dsse.MaxSignatureSize+1), "tab%09here"} {
		h := cloneHeader(m.Header)
		h.Set("ce-"+dsse.ExtSignature, bad)
		_, err := binding.FromNATS(h, m.Data)
		requireReason(t, err, events.ReasonInvalidAttribute, dsse.ExtSignature)
	}
}

// FuzzVerifySignature: whatever the envelope, verification returns an
// error or a signature, never panics, and accepts nothing but what the
// key signed.
func FuzzVerifySignature(f *testing.F) {
	signer, pub, ev, _, e := signedEvidence(f)
	good := e.Extensions()[dsse.ExtSignature].(string)
	f.Add(good)
	f.Add(`{"payloadType":"application/vnd.runtimetruth.claim.v1+json","payload":"e30=","signatures":[{"keyid":"k","sig":""}]}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, v string) {
		c := e.Clone()
		c.SetExtension(dsse.ExtSignature, v)
		sig, err := dsse.VerifySignature(c, ev, keys(pub))
		if err == nil && v != good {
			// Only a re-encoding of the same envelope can verify.
			var a, b map[string]any
			require.NoError(t, json.Unmarshal([]byte(v), &a))
			require.NoError(t, json.Unmarshal([]byte(good), &b))
			assert.Equal(t, b["payload"], a["payload"], "a claim the key did not sign verified")
		}
		if err == nil {
			assert.Equal(t, signer.KeyID(), sig.KeyID)
		}
	})
}

func TestKeyID(t *testing.T) {
	_, pub := testSigner(t)
	id := dsse.KeyID(pub)
	assert.Regexp(t, `^ed25519:[A-Za-z0-9+/]{43}=$`, id)
	back, err := dsse.ParseKeyID(id)
	require.NoError(t, err)
	assert.True(t, pub.Equal(back))
	for _, bad := range []string{"", "ed25519:", "rsa:" + id[8:], id[:len(id)-2], id + "AA", "ed25519:" + strings.Repeat("A", 44)} {
		_, err := dsse.ParseKeyID(bad)
		assert.Error(t, err, bad)
	}
}
