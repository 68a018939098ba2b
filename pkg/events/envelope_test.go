package events_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
)

const testPayloadType = "application/vnd.runtimetruth.test.v1+json"

// TestEnvelopeRoundTrip: SignEnvelope's envelope opens with the signer's
// key, and its signature is Ed25519 over the PAE of the payload as
// carried, checked here with crypto/ed25519 alone, as another
// implementation would.
func TestEnvelopeRoundTrip(t *testing.T) {
	signer, pub := testSigner(t)
	payload := []byte(`{"host":"web-01","nonce":"n1"}`)
	env, err := signer.SignEnvelope(testPayloadType, payload)
	require.NoError(t, err)

	id, got, err := dsse.OpenEnvelope(env, testPayloadType, keys(pub))
	require.NoError(t, err)
	assert.Equal(t, signer.KeyID(), id)
	assert.Equal(t, payload, got)

	payloadType, keyID, _ := openByHand(t, env, pub)
	assert.Equal(t, testPayloadType, payloadType)
	assert.Equal(t, dsse.KeyID(pub), keyID)
}

// TestSignEnvelopeRefusesClaims: the generic signer never signs the event
// claim's payload type, so nothing it signs verifies as an event's
// signature.
func TestSignEnvelopeRefusesClaims(t *testing.T) {
	signer, _ := testSigner(t)
	for _, pt := range []string{dsse.ClaimPayloadType, ""} {
		_, err := signer.SignEnvelope(pt, []byte(`{}`))
		require.ErrorIs(t, err, dsse.ErrPayloadType, pt)
	}
}

func TestOpenEnvelopeRefusals(t *testing.T) {
	signer, pub := testSigner(t)
	other, otherPub := testSigner(t)
	good, err := signer.SignEnvelope(testPayloadType, []byte(`{"a":1}`))
	require.NoError(t, err)
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(good, &m))
		f(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	byOther, err := other.SignEnvelope(testPayloadType, []byte(`{"a":1}`))
	require.NoError(t, err)
	otherType, err := signer.SignEnvelope(testPayloadType+"x", []byte(`{"a":1}`))
	require.NoError(t, err)
	sigs := func(m map[string]any) []any { return m["signatures"].([]any) }
	for _, tc := range []struct {
		name string
		data []byte
		keys func(string) (ed25519.PublicKey, error)
		want error
		says string
	}{
		{name: "empty", data: nil, keys: keys(pub), want: dsse.ErrUnsigned},
		{name: "plain JSON", data: []byte(`{"host":"web-01","results":[]}`), keys: keys(pub), want: dsse.ErrUnsigned, says: "not a DSSE envelope"},
		{name: "two values", data: append(append([]byte{}, good...), good...), keys: keys(pub), want: dsse.ErrUnsigned},
		{name: "no signatures", data: edit(func(m map[string]any) { m["signatures"] = []any{} }), keys: keys(pub), want: dsse.ErrUnsigned},
		{name: "null", data: []byte(`null`), keys: keys(pub), want: dsse.ErrUnsigned},
		{name: "another payload type", data: otherType, keys: keys(pub), want: dsse.ErrBadSignature, says: "payload type"},
		{name: "two signatures", data: edit(func(m map[string]any) { m["signatures"] = append(sigs(m), sigs(m)[0]) }), keys: keys(pub), want: dsse.ErrBadSignature, says: "2 signatures"},
		{name: "a short signature", data: edit(func(m map[string]any) { sigs(m)[0].(map[string]any)["sig"] = "AAAA" }), keys: keys(pub), want: dsse.ErrBadSignature},
		{name: "a flipped payload", data: edit(func(m map[string]any) { m["payload"] = base64.StdEncoding.EncodeToString([]byte(`{"a":2}`)) }), keys: keys(pub), want: dsse.ErrBadSignature, says: "by key"},
		{name: "an untrusted key", data: byOther, keys: keys(pub), want: errUnknownKey},
		{name: "another key's id", data: edit(func(m map[string]any) { sigs(m)[0].(map[string]any)["keyid"] = other.KeyID() }), keys: keys(pub, otherPub), want: dsse.ErrBadSignature},
		{name: "a key that is not the key it names", data: good, keys: func(string) (ed25519.PublicKey, error) { return otherPub, nil }, want: dsse.ErrBadSignature, says: "not the key it names"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := dsse.OpenEnvelope(tc.data, testPayloadType, tc.keys)
			require.ErrorIs(t, err, tc.want)
			if tc.says != "" {
				assert.Contains(t, err.Error(), tc.says)
			}
		})
	}
}

// TestEnvelopeTypesDoNotCross: an event's signature does not open as
// another payload type, nor another type's envelope as an event's
// signature.
func TestEnvelopeTypesDoNotCross(t *testing.T) {
	signer, pub, ev, _, e := signedEvidence(t)
	claim := e.Extensions()[dsse.ExtSignature].(string)
	_, _, err := dsse.OpenEnvelope([]byte(claim), testPayloadType, keys(pub))
	require.ErrorIs(t, err, dsse.ErrBadSignature)

	env, err := signer.SignEnvelope(testPayloadType, []byte(`{}`))
	require.NoError(t, err)
	c := e.Clone()
	c.SetExtension(dsse.ExtSignature, string(env))
	_, err = dsse.VerifySignature(c, ev, keys(pub))
	require.ErrorIs(t, err, dsse.ErrBadSignature)
	assert.Contains(t, err.Error(), "payload type")
}

// FuzzOpenEnvelope: whatever the bytes, OpenEnvelope returns an error or
// the payload the key signed, never panics.
func FuzzOpenEnvelope(f *testing.F) {
	signer, pub := testSigner(f)
	payload := []byte(`{"host":"web-01"}`)
	good, err := signer.SignEnvelope(testPayloadType, payload)
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte(`{"payloadType":"` + testPayloadType + `","payload":"e30=","signatures":[{"keyid":"k","sig":""}]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"host":"web-01"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, got, err := dsse.OpenEnvelope(data, testPayloadType, keys(pub))
		if err != nil {
			return
		}
		assert.Equal(t, signer.KeyID(), id)
		assert.Equal(t, payload, got, "a payload the key did not sign opened")
	})
}
