package events_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
)

// TestReadSignature: ReadSignature hands out what to check (the key, the
// PAE of the claim as carried, the signature) and Verified finishes the
// check as VerifySignature does: a signature the caller found invalid is
// a bad one, a claim that does not say what the event says is refused
// even with a valid signature, and anything else is VerifySignature's
// result.
func TestReadSignature(t *testing.T) {
	signer, pub, ev, m, _ := signedEvidence(t)
	e, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(t, err)

	s, err := dsse.ReadSignature(e, ev, keys(pub))
	require.NoError(t, err)
	assert.Equal(t, signer.KeyID(), s.KeyID)
	assert.Equal(t, pub, s.PublicKey)
	assert.True(t, strings.HasPrefix(string(s.Message), fmt.Sprintf("DSSEv1 %d %s ", len(dsse.ClaimPayloadType), dsse.ClaimPayloadType)))
	require.True(t, ed25519.Verify(s.PublicKey, s.Message, s.Sig))
	got, err := s.Verified(true)
	require.NoError(t, err)
	want, err := dsse.VerifySignature(e, ev, keys(pub))
	require.NoError(t, err)
	assert.Equal(t, want, got)

	_, err = s.Verified(false)
	require.ErrorIs(t, err, dsse.ErrBadSignature)

	other := ev
	other.Host = "db-01" // the claim names web-01's host, not this payload's
	s, err = dsse.ReadSignature(e, other, keys(pub))
	require.NoError(t, err, "the claim is not read before the signature is checked")
	_, err = s.Verified(true)
	require.ErrorIs(t, err, dsse.ErrClaim)

	_, err = dsse.ReadSignature(e, ev, keys())
	require.ErrorContains(t, err, "unknown key")
	e.SetExtension(dsse.ExtSignature, nil)
	_, err = dsse.ReadSignature(e, ev, keys(pub))
	require.ErrorIs(t, err, dsse.ErrUnsigned)
}

// TestCheckClaim: CheckClaim passes a signed event as it came, and
// refuses, without a key, the same headers on other data (the payload
// digest differs), with another id or time, and a damaged envelope; the
// signature itself is not checked.
func TestCheckClaim(t *testing.T) {
	_, _, _, m, _ := signedEvidence(t)
	digest := func(b []byte) string {
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	e, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(t, err)
	c, err := dsse.CheckClaim(e, digest(m.Data))
	require.NoError(t, err)
	assert.Equal(t, e.ID(), c.ID)
	assert.NotEmpty(t, c.Host, "the claim, for the caller to compare host and target")

	_, err = dsse.CheckClaim(e, digest([]byte(`{"host":"web-01"}`)))
	require.ErrorIs(t, err, dsse.ErrClaim)
	assert.ErrorContains(t, err, "payload_sha256 differs")

	other := e.Clone()
	other.SetID("01930000-0000-7000-8000-00000000dead")
	_, err = dsse.CheckClaim(other, digest(m.Data))
	require.ErrorContains(t, err, "id differs")
	other = e.Clone()
	other.SetTime(e.Time().Add(time.Second))
	_, err = dsse.CheckClaim(other, digest(m.Data))
	require.ErrorContains(t, err, "time differs")

	// A signature of the right size but wrong bytes passes: CheckClaim
	// leaves the signature to a verifier holding the registry.
	var env map[string]any
	require.NoError(t, json.Unmarshal([]byte(e.Extensions()[dsse.ExtSignature].(string)), &env))
	env["signatures"].([]any)[0].(map[string]any)["sig"] = base64.StdEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))
	forged, err := json.Marshal(env)
	require.NoError(t, err)
	other = e.Clone()
	other.SetExtension(dsse.ExtSignature, string(forged))
	_, err = dsse.CheckClaim(other, digest(m.Data))
	require.NoError(t, err)

	other.SetExtension(dsse.ExtSignature, `{"payloadType":"x"}`)
	_, err = dsse.CheckClaim(other, digest(m.Data))
	require.ErrorIs(t, err, dsse.ErrBadSignature)
	other.SetExtension(dsse.ExtSignature, nil)
	_, err = dsse.CheckClaim(other, digest(m.Data))
	require.ErrorIs(t, err, dsse.ErrUnsigned)
}
