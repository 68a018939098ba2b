package events_test

import (
	"crypto/ed25519"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// TestReadSignature: ReadSignature hands out what to check (the key, the
// PAE of the claim as carried, the signature) and Verified finishes the
// check as VerifySignature does: a signature the caller found invalid is
// a bad one, a claim that does not say what the event says is refused
// even with a valid signature, and anything else is VerifySignature's
// result.
func TestReadSignature(t *testing.T) {
	signer, pub, ev, m, _ := signedEvidence(t)
	e, err := events.FromNATS(m.Header, m.Data)
	require.NoError(t, err)

	s, err := events.ReadSignature(e, ev, keys(pub))
	require.NoError(t, err)
	assert.Equal(t, signer.KeyID(), s.KeyID)
	assert.Equal(t, pub, s.PublicKey)
	assert.True(t, strings.HasPrefix(string(s.Message), fmt.Sprintf("DSSEv1 %d %s ", len(events.ClaimPayloadType), events.ClaimPayloadType)))
	require.True(t, ed25519.Verify(s.PublicKey, s.Message, s.Sig))
	got, err := s.Verified(true)
	require.NoError(t, err)
	want, err := events.VerifySignature(e, ev, keys(pub))
	require.NoError(t, err)
	assert.Equal(t, want, got)

	_, err = s.Verified(false)
	require.ErrorIs(t, err, events.ErrBadSignature)

	other := ev
	other.Host = "db-01" // the claim names web-01's host, not this payload's
	s, err = events.ReadSignature(e, other, keys(pub))
	require.NoError(t, err, "the claim is not read before the signature is checked")
	_, err = s.Verified(true)
	require.ErrorIs(t, err, events.ErrClaim)

	_, err = events.ReadSignature(e, ev, keys())
	require.ErrorContains(t, err, "unknown key")
	e.SetExtension(events.ExtSignature, nil)
	_, err = events.ReadSignature(e, ev, keys(pub))
	require.ErrorIs(t, err, events.ErrUnsigned)
}
