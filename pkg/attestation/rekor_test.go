package attestation_test

import (
	"context"
	"testing"

	protorekor "github.com/sigstore/protobuf-specs/gen/pb-go/rekor/v1"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
)

// rekorSigner signs keylessly through the test Fulcio and Rekor (tsa adds
// the timestamp authority), checking each bundle against the trusted root
// with the log before it returns it.
func rekorSigner(t *testing.T, srv *attestationtest.Servers, tsa bool) *attestation.KeylessSigner {
	t.Helper()
	cfg := attestation.KeylessConfig{
		FulcioURL: srv.FulcioURL, RekorURL: srv.RekorURL,
		TrustedRoot: srv.TrustedRoot(t, attestationtest.WithRekor()),
	}
	if tsa {
		cfg.TSAURL = srv.TSAURL
	}
	s, err := attestation.NewKeylessSigner(cfg, attestation.StaticToken(attestationtest.Token(identity, issuer)))
	require.NoError(t, err)
	return s
}

func rekorVerifier(t *testing.T, tm root.TrustedMaterial, id, iss string) *attestation.Verifier {
	t.Helper()
	v, err := attestation.NewVerifier(attestation.Policy{Identity: id, Issuer: iss, TrustedMaterial: tm})
	require.NoError(t, err)
	return v
}

func parseBundle(t *testing.T, data []byte) *bundle.Bundle {
	t.Helper()
	var b bundle.Bundle
	require.NoError(t, b.UnmarshalJSON(data))
	return &b
}

func marshalBundle(t *testing.T, b *bundle.Bundle) []byte {
	t.Helper()
	out, err := b.MarshalJSON()
	require.NoError(t, err)
	return out
}

// Keyless signing with a transparency log entry (Fulcio + Rekor, no
// timestamp authority): the entry carries a signed entry timestamp and an
// inclusion proof against a checkpoint signed by the log's key, and the
// verifier requires it because the trusted root lists the log.
func TestKeylessSignerWithRekor(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	otherDigest, _ := baseline(t, "after.json")
	srv := attestationtest.NewServers(t)
	trusted := srv.TrustedRoot(t, attestationtest.WithRekor())
	signed, err := rekorSigner(t, srv, false).Sign(context.Background(), stmt)
	require.NoError(t, err)
	assert.Equal(t, identity, signed.Identity)
	assert.Equal(t, 1, srv.Rekor.Size())

	b := parseBundle(t, signed.Bundle)
	entries := b.GetVerificationMaterial().GetTlogEntries()
	require.Len(t, entries, 1)
	e := entries[0]
	assert.Equal(t, "dsse", e.GetKindVersion().GetKind())
	assert.NotEmpty(t, e.GetInclusionPromise().GetSignedEntryTimestamp())
	require.NotNil(t, e.GetInclusionProof())
	assert.Contains(t, e.GetInclusionProof().GetCheckpoint().GetEnvelope(), "rekor.runtimetruth.test - ")
	assert.Empty(t, b.GetVerificationMaterial().GetTimestampVerificationData().GetRfc3161Timestamps(), "no timestamp authority")

	t.Run("right identity passes", func(t *testing.T) {
		res, err := rekorVerifier(t, trusted, identity, issuer).Verify(digest, 1, stmt, signed.Bundle)
		require.NoError(t, err)
		assert.Equal(t, identity, res.Identity)
		assert.Equal(t, issuer, res.Issuer)
		require.Len(t, res.Timestamps, 1, "the entry's integrated time")
		assert.Equal(t, e.GetIntegratedTime(), res.Timestamps[0].Unix())
		assert.False(t, res.CurrentTime)
	})
	t.Run("trusted root file round trip", func(t *testing.T) {
		tr, err := root.NewTrustedRootFromJSON(srv.TrustedRootJSON(t, attestationtest.WithRekor()))
		require.NoError(t, err)
		_, err = rekorVerifier(t, tr, identity, issuer).Verify(digest, 1, stmt, signed.Bundle)
		require.NoError(t, err)
	})
	t.Run("wrong identity", func(t *testing.T) {
		_, err := rekorVerifier(t, trusted, "mallory@example.com", issuer).Verify(digest, 1, stmt, signed.Bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
	})
	t.Run("wrong issuer", func(t *testing.T) {
		_, err := rekorVerifier(t, trusted, identity, "https://other.example.com").Verify(digest, 1, stmt, signed.Bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
	})
	t.Run("another CA and log", func(t *testing.T) {
		other := attestationtest.NewServers(t)
		_, err := rekorVerifier(t, other.TrustedRoot(t, attestationtest.WithRekor()), identity, issuer).Verify(digest, 1, stmt, signed.Bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
	})
	t.Run("another CA, the right log", func(t *testing.T) {
		other := attestationtest.NewServers(t).TrustedRoot(t)
		tm, err := root.NewTrustedRoot(root.TrustedRootMediaType01, other.FulcioCertificateAuthorities(), nil,
			other.TimestampingAuthorities(), srv.Rekor.Logs())
		require.NoError(t, err)
		_, err = rekorVerifier(t, tm, identity, issuer).Verify(digest, 1, stmt, signed.Bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
		assert.Contains(t, err.Error(), "certificate")
	})
	t.Run("the right CA but another log", func(t *testing.T) {
		other := attestationtest.NewRekor(t)
		tm, err := root.NewTrustedRoot(root.TrustedRootMediaType01, trusted.FulcioCertificateAuthorities(), nil,
			trusted.TimestampingAuthorities(), other.Logs())
		require.NoError(t, err)
		_, err = rekorVerifier(t, tm, identity, issuer).Verify(digest, 1, stmt, signed.Bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
		assert.Contains(t, err.Error(), "not enough verified log entries")
	})
	t.Run("changed baseline", func(t *testing.T) {
		_, err := rekorVerifier(t, trusted, identity, issuer).Verify(otherDigest, 1, stmt, signed.Bundle)
		requireStep(t, err, attestation.StepStatement, statement.ErrDigestMismatch)
	})
	t.Run("signature before baseline binding", func(t *testing.T) {
		_, err := rekorVerifier(t, trusted, "mallory@example.com", issuer).Verify(otherDigest, 1, stmt, signed.Bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
		assert.NotErrorIs(t, err, statement.ErrDigestMismatch)
	})
	tamper := func(f func(e *protorekor.TransparencyLogEntry)) []byte {
		tb := parseBundle(t, signed.Bundle)
		f(tb.GetVerificationMaterial().GetTlogEntries()[0])
		return marshalBundle(t, tb)
	}
	t.Run("tampered integrated time", func(t *testing.T) {
		// The signed entry timestamp no longer verifies: the entry does
		// not count.
		bad := tamper(func(e *protorekor.TransparencyLogEntry) { e.IntegratedTime -= 60 })
		_, err := rekorVerifier(t, trusted, identity, issuer).Verify(digest, 1, stmt, bad)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
		assert.Contains(t, err.Error(), "not enough verified log entries")
	})
	t.Run("tampered inclusion proof", func(t *testing.T) {
		bad := tamper(func(e *protorekor.TransparencyLogEntry) { e.GetInclusionProof().RootHash[0] ^= 1 })
		_, err := rekorVerifier(t, trusted, identity, issuer).Verify(digest, 1, stmt, bad)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
		assert.Contains(t, err.Error(), "log inclusion")
	})
	t.Run("no entry", func(t *testing.T) {
		bad := tamper(func(*protorekor.TransparencyLogEntry) {})
		nb := parseBundle(t, bad)
		nb.VerificationMaterial.TlogEntries = nil
		_, err := rekorVerifier(t, trusted, identity, issuer).Verify(digest, 1, stmt, marshalBundle(t, nb))
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
	})
}

// The log grows: every entry's inclusion proof (against the tree as it
// was when the entry was logged, sizes 1 to 5: left and right leaves,
// complete and incomplete trees) verifies.
func TestRekorInclusionProofsAsTheLogGrows(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	srv := attestationtest.NewServers(t)
	s := rekorSigner(t, srv, false)
	v := rekorVerifier(t, srv.TrustedRoot(t, attestationtest.WithRekor()), identity, issuer)
	for i := range 5 {
		signed, err := s.Sign(context.Background(), stmt)
		require.NoError(t, err)
		e := parseBundle(t, signed.Bundle).GetVerificationMaterial().GetTlogEntries()[0]
		assert.Equal(t, int64(i), e.GetLogIndex())
		assert.Equal(t, int64(i+1), e.GetInclusionProof().GetTreeSize())
		_, err = v.Verify(digest, 1, stmt, signed.Bundle)
		require.NoError(t, err, "entry %d", i)
	}
	assert.Equal(t, 5, srv.Rekor.Size())
}

// With a timestamp authority and a log, both signed times verify.
func TestKeylessSignerWithRekorAndTimestampAuthority(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	srv := attestationtest.NewServers(t)
	signed, err := rekorSigner(t, srv, true).Sign(context.Background(), stmt)
	require.NoError(t, err)
	res, err := rekorVerifier(t, srv.TrustedRoot(t, attestationtest.WithRekor()), identity, issuer).Verify(digest, 1, stmt, signed.Bundle)
	require.NoError(t, err)
	assert.Len(t, res.Timestamps, 2)

	// A trusted root without the log checks the timestamp only.
	res, err = rekorVerifier(t, srv.TrustedRoot(t), identity, issuer).Verify(digest, 1, stmt, signed.Bundle)
	require.NoError(t, err)
	assert.Len(t, res.Timestamps, 1)
}

// An entry logged again is answered from the log: 409 Conflict, then the
// client reads the existing entry by its UUID.
func TestRekorAnswersAResubmittedEntry(t *testing.T) {
	_, stmt := baseline(t, "before.json")
	srv := attestationtest.NewServers(t)
	signed, err := rekorSigner(t, srv, false).Sign(context.Background(), stmt)
	require.NoError(t, err)
	b := parseBundle(t, signed.Bundle)
	first := b.GetVerificationMaterial().GetTlogEntries()[0]
	b.VerificationMaterial.TlogEntries = nil
	vc, err := b.VerificationContent()
	require.NoError(t, err)
	certPEM, err := cryptoutils.MarshalCertificateToPEM(vc.Certificate())
	require.NoError(t, err)

	requests := srv.Rekor.Requests.Load()
	rekor := sign.NewRekor(&sign.RekorOptions{BaseURL: srv.RekorURL})
	require.NoError(t, rekor.GetTransparencyLogEntry(context.Background(), certPEM, b.Bundle))
	again := b.GetVerificationMaterial().GetTlogEntries()[0]
	assert.Equal(t, first.GetLogIndex(), again.GetLogIndex())
	assert.Equal(t, first.GetCanonicalizedBody(), again.GetCanonicalizedBody())
	assert.Equal(t, requests+2, srv.Rekor.Requests.Load(), "a POST answered 409, then a GET")
	assert.Equal(t, 1, srv.Rekor.Size())
}
