package attestation_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// BenchmarkSign: one statement signed into a bundle (JSON). The reference
// is the bare ECDSA P-256 signature the bundle carries.
func BenchmarkSign(b *testing.B) {
	_, stmt := baseline(b, "before.json")
	key := newKey(b)
	ctx := context.Background()
	b.Run("reference-ecdsa-p256", func(b *testing.B) {
		for b.Loop() {
			sum := sha256.Sum256(stmt)
			if _, err := ecdsa.SignASN1(rand.Reader, key, sum[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("key", func(b *testing.B) {
		s, err := attestation.NewKeySigner(key)
		require.NoError(b, err)
		for b.Loop() {
			if _, err := s.Sign(ctx, stmt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("keyless-fulcio-tsa-loopback", func(b *testing.B) {
		// An ephemeral key, a Fulcio certificate and an RFC 3161
		// timestamp over HTTP on loopback.
		srv := attestationtest.NewServers(b)
		s, err := attestation.NewKeylessSigner(attestation.KeylessConfig{FulcioURL: srv.FulcioURL, TSAURL: srv.TSAURL},
			attestation.StaticToken(attestationtest.Token(identity, issuer)))
		require.NoError(b, err)
		for b.Loop() {
			if _, err := s.Sign(ctx, stmt); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkVerify: one attestation verified from its bytes (bundle parse,
// signature, signer, statement shape and baseline binding). The reference
// is the bare ECDSA P-256 verification.
func BenchmarkVerify(b *testing.B) {
	digest, stmt := baseline(b, "before.json")
	key := newKey(b)
	b.Run("reference-ecdsa-p256", func(b *testing.B) {
		sum := sha256.Sum256(stmt)
		sig, err := ecdsa.SignASN1(rand.Reader, key, sum[:])
		require.NoError(b, err)
		for b.Loop() {
			s := sha256.Sum256(stmt)
			if !ecdsa.VerifyASN1(&key.PublicKey, s[:], sig) {
				b.Fatal("no")
			}
		}
	})
	run := func(b *testing.B, v *attestation.Verifier, bundle []byte) {
		b.Helper()
		b.ReportMetric(float64(len(bundle)), "bundle-bytes")
		for b.Loop() {
			if _, err := v.Verify(digest, 1, stmt, bundle); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("key-dsse", func(b *testing.B) {
		run(b, keyVerifier(b, &key.PublicKey), attestationtest.SignKey(b, key, stmt))
	})
	b.Run("key-sign-blob", func(b *testing.B) {
		run(b, keyVerifier(b, &key.PublicKey), attestationtest.SignBlobKey(b, key, stmt))
	})
	b.Run("keyless-dsse-tsa", func(b *testing.B) {
		vs := attestationtest.NewVirtual(b)
		run(b, keylessVerifier(b, vs, identity, issuer), vs.Sign(b, identity, issuer, stmt))
	})
	b.Run("keyless-sign-blob-tsa", func(b *testing.B) {
		vs := attestationtest.NewVirtual(b)
		run(b, keylessVerifier(b, vs, identity, issuer), vs.SignBlob(b, identity, issuer, stmt))
	})
}

// BenchmarkChecker: the verifier's check of a baseline that requires an
// identity, per verdict. "cached" answers from the digest-keyed cache;
// "stored-cached" adds the read of the record from the key-value bucket (a
// NATS round trip on loopback), which is what a verdict costs.
func BenchmarkChecker(b *testing.B) {
	digest, stmt := baseline(b, "before.json")
	vs := attestationtest.NewVirtual(b)
	bundle := vs.Sign(b, identity, issuer, stmt)
	target := events.Target{Kind: "systemd.unit", Identifier: "agent-worker.service"}
	rec := &attestation.Record{Target: target, BaselineDigest: digest, Statement: string(stmt), Bundle: bundle, SignedAt: time.Now()}
	bl := attestation.Baseline{Target: target, Digest: digest, Identity: identity, Issuer: issuer}
	b.Run("reference-uncached", func(b *testing.B) {
		for b.Loop() {
			c := attestation.NewChecker(vs.TrustedRoot(b), attestation.CheckerOptions{})
			if _, err := c.Check(bl, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c := attestation.NewChecker(vs.TrustedRoot(b), attestation.CheckerOptions{})
		for b.Loop() {
			if _, err := c.Check(bl, rec); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stored-cached", func(b *testing.B) {
		ctx := context.Background()
		_, url := natstest.RunJetStream(b)
		_, js := natstest.Connect(b, url)
		require.NoError(b, topology.Ensure(ctx, js, 1))
		kv, err := js.KeyValue(ctx, topology.BucketBaselines)
		require.NoError(b, err)
		_, err = attestation.PutRecord(ctx, kv, *rec)
		require.NoError(b, err)
		c := attestation.NewChecker(vs.TrustedRoot(b), attestation.CheckerOptions{})
		for b.Loop() {
			if _, err := c.CheckStored(ctx, kv, bl); err != nil {
				b.Fatal(err)
			}
		}
	})
}
