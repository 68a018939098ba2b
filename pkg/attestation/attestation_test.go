package attestation_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement/statementtest"
)

const (
	identity = "attestor@example.com"
	issuer   = "https://issuer.example.com"
)

func fixture(tb testing.TB, name string) *snapshot.Snapshot {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "evidence", "testdata", "snapshots", name))
	require.NoError(tb, err)
	s, err := snapshot.Parse(data)
	require.NoError(tb, err)
	return s
}

// baseline returns a fixture's digest and statement.
func baseline(tb testing.TB, name string) (digest string, stmt []byte) {
	tb.Helper()
	s := fixture(tb, name)
	digest, err := s.Digest()
	require.NoError(tb, err)
	stmt, err = statement.Build(s)
	require.NoError(tb, err)
	return digest, stmt
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := attestation.GenerateKey()
	require.NoError(tb, err)
	return k
}

func keyVerifier(tb testing.TB, pub *ecdsa.PublicKey) *attestation.Verifier {
	tb.Helper()
	v, err := attestation.NewVerifier(attestation.Policy{PublicKey: pub})
	require.NoError(tb, err)
	return v
}

func keylessVerifier(tb testing.TB, v *attestationtest.Virtual, id, iss string) *attestation.Verifier {
	tb.Helper()
	ver, err := attestation.NewVerifier(attestation.Policy{Identity: id, Issuer: iss, TrustedMaterial: v.TrustedRoot(tb)})
	require.NoError(tb, err)
	return ver
}

func requireStep(t *testing.T, err error, step attestation.Step, cause error) {
	t.Helper()
	require.Error(t, err)
	assert.Equal(t, step, attestation.StepOf(err), "%v", err)
	assert.ErrorIs(t, err, cause)
}

func TestKeySignedAttestationVerifies(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	key := newKey(t)
	s, err := attestation.NewKeySigner(key)
	require.NoError(t, err)
	signed, err := s.Sign(context.Background(), stmt)
	require.NoError(t, err)
	assert.Empty(t, signed.Identity)
	hint, err := attestation.KeyHint(key.Public())
	require.NoError(t, err)
	assert.Equal(t, hint, signed.KeyHint)

	var shape map[string]any
	require.NoError(t, json.Unmarshal(signed.Bundle, &shape))
	assert.Equal(t, "application/vnd.dev.sigstore.bundle.v0.3+json", shape["mediaType"])
	assert.Contains(t, shape, "dsseEnvelope")

	res, err := keyVerifier(t, &key.PublicKey).Verify(digest, 1, stmt, signed.Bundle)
	require.NoError(t, err)
	assert.True(t, res.Envelope)
	assert.Equal(t, hint, res.KeyHint)
	assert.Equal(t, digest, res.BaselineDigest)
	assert.Equal(t, statement.Digest(stmt), res.StatementDigest)
}

func TestKeySignedFailures(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	otherDigest, otherStmt := baseline(t, "after.json")
	key := newKey(t)
	bundle := attestationtest.SignKey(t, key, stmt)
	v := keyVerifier(t, &key.PublicKey)

	t.Run("another key", func(t *testing.T) {
		_, err := keyVerifier(t, &newKey(t).PublicKey).Verify(digest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
	})
	t.Run("changed baseline", func(t *testing.T) {
		_, err := v.Verify(otherDigest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepStatement, statement.ErrDigestMismatch)
	})
	t.Run("statement file is not the signed payload", func(t *testing.T) {
		_, err := v.Verify(otherDigest, 1, otherStmt, bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
		assert.Contains(t, err.Error(), "different statement")
	})
	t.Run("not a bundle", func(t *testing.T) {
		_, err := v.Verify(digest, 1, stmt, []byte(`{"mediaType":"nope"}`))
		requireStep(t, err, attestation.StepSignature, attestation.ErrBundle)
		_, err = v.Verify(digest, 1, stmt, []byte(strings.Repeat(" ", attestation.MaxBundleSize+1)))
		requireStep(t, err, attestation.StepSignature, attestation.ErrBundle)
	})
	t.Run("certificate bundle under a key policy", func(t *testing.T) {
		vs := attestationtest.NewVirtual(t)
		_, err := v.Verify(digest, 1, stmt, vs.Sign(t, identity, issuer, stmt))
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
	})
}

// A bundle cosign sign-blob makes: a message signature over the statement
// file's bytes.
func TestMessageSignatureBundlesVerify(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	_, otherStmt := baseline(t, "after.json")
	key := newKey(t)
	bundle := attestationtest.SignBlobKey(t, key, stmt)
	res, err := keyVerifier(t, &key.PublicKey).Verify(digest, 1, stmt, bundle)
	require.NoError(t, err)
	assert.False(t, res.Envelope)

	_, err = keyVerifier(t, &key.PublicKey).Verify(digest, 1, otherStmt, bundle)
	requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)

	vs := attestationtest.NewVirtual(t)
	res, err = keylessVerifier(t, vs, identity, issuer).Verify(digest, 1, stmt, vs.SignBlob(t, identity, issuer, stmt))
	require.NoError(t, err)
	assert.False(t, res.Envelope)
	assert.Equal(t, identity, res.Identity)
}

func TestKeylessAttestation(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	otherDigest, _ := baseline(t, "after.json")
	vs := attestationtest.NewVirtual(t)
	bundle := vs.Sign(t, identity, issuer, stmt)

	t.Run("right identity passes", func(t *testing.T) {
		res, err := keylessVerifier(t, vs, identity, issuer).Verify(digest, 1, stmt, bundle)
		require.NoError(t, err)
		assert.Equal(t, identity, res.Identity)
		assert.Equal(t, issuer, res.Issuer)
		assert.Len(t, res.Timestamps, 1)
		assert.False(t, res.CurrentTime)
		assert.True(t, res.Envelope)
	})
	t.Run("wrong identity", func(t *testing.T) {
		_, err := keylessVerifier(t, vs, "mallory@example.com", issuer).Verify(digest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
		assert.Contains(t, err.Error(), "mallory@example.com")
	})
	t.Run("identity is exact, not a pattern", func(t *testing.T) {
		_, err := keylessVerifier(t, vs, "attestor@example.co", issuer).Verify(digest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
		_, err = keylessVerifier(t, vs, ".*", issuer).Verify(digest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
	})
	t.Run("wrong issuer", func(t *testing.T) {
		_, err := keylessVerifier(t, vs, identity, "https://other.example.com").Verify(digest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
	})
	t.Run("another CA", func(t *testing.T) {
		other := attestationtest.NewVirtual(t)
		_, err := keylessVerifier(t, other, identity, issuer).Verify(digest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
	})
	t.Run("changed baseline", func(t *testing.T) {
		_, err := keylessVerifier(t, vs, identity, issuer).Verify(otherDigest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepStatement, statement.ErrDigestMismatch)
	})
	t.Run("signature before baseline binding", func(t *testing.T) {
		// Wrong identity and a changed baseline: the identity is reported.
		_, err := keylessVerifier(t, vs, "mallory@example.com", issuer).Verify(otherDigest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
		assert.NotErrorIs(t, err, statement.ErrDigestMismatch)
	})
	t.Run("key bundle under an identity policy", func(t *testing.T) {
		_, err := keylessVerifier(t, vs, identity, issuer).Verify(digest, 1, stmt, attestationtest.SignKey(t, newKey(t), stmt))
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
	})
	t.Run("trusted root with a Rekor log requires an entry", func(t *testing.T) {
		v, err := attestation.NewVerifier(attestation.Policy{Identity: identity, Issuer: issuer, TrustedMaterial: vs.VS})
		require.NoError(t, err)
		_, err = v.Verify(digest, 1, stmt, bundle)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
	})
	t.Run("trusted root file round trip", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "trusted_root.json")
		require.NoError(t, os.WriteFile(path, vs.TrustedRootJSON(t), 0o600))
		tr, err := attestation.LoadTrustedRoot(path)
		require.NoError(t, err)
		v, err := attestation.NewVerifier(attestation.Policy{Identity: identity, Issuer: issuer, TrustedMaterial: tr})
		require.NoError(t, err)
		_, err = v.Verify(digest, 1, stmt, bundle)
		require.NoError(t, err)
		_, err = attestation.LoadTrustedRoot(filepath.Join(t.TempDir(), "missing.json"))
		require.Error(t, err)
	})
}

// Every statement mutation of RuntimeTruth's test list, signed by the
// right identity: the signature passes, the statement step fails.
func TestKeylessStatementMutationsFailAfterTheSignature(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	vs := attestationtest.NewVirtual(t)
	v := keylessVerifier(t, vs, identity, issuer)
	edit := func(f func(m map[string]any)) []byte { return statementtest.Mutate(t, stmt, f) }
	pred := func(m map[string]any) map[string]any { return m["predicate"].(map[string]any) }
	subj := func(m map[string]any) map[string]any { return m["subject"].([]any)[0].(map[string]any) }
	cases := map[string][]byte{
		"extra root key":         edit(func(m map[string]any) { m["extra"] = 1 }),
		"extra predicate key":    edit(func(m map[string]any) { pred(m)["extra"] = 1 }),
		"wrong _type":            edit(func(m map[string]any) { m["_type"] = "https://in-toto.io/Statement/v0.1" }),
		"wrong predicateType":    edit(func(m map[string]any) { m["predicateType"] = "https://example.com/other" }),
		"wrong subject name":     edit(func(m map[string]any) { subj(m)["name"] = "other" }),
		"extra digest algorithm": edit(func(m map[string]any) { subj(m)["digest"].(map[string]any)["sha512"] = strings.Repeat("0", 128) }),
		"wrong canonicalization": edit(func(m map[string]any) { pred(m)["canonicalization"] = "JCS" }),
	}
	for name, mutated := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := v.Verify(digest, 1, mutated, vs.Sign(t, identity, issuer, mutated))
			requireStep(t, err, attestation.StepStatement, statement.ErrInvalid)
		})
	}
	t.Run("non-canonical", func(t *testing.T) {
		mutated := append(append([]byte(nil), stmt...), '\n')
		_, err := v.Verify(digest, 1, mutated, vs.SignBlob(t, identity, issuer, mutated))
		requireStep(t, err, attestation.StepStatement, statement.ErrNotCanonical)
	})
	t.Run("duplicate keys", func(t *testing.T) {
		mutated := []byte(strings.Replace(string(stmt), `"_type":`, `"_type":"x","_type":`, 1))
		_, err := v.Verify(digest, 1, mutated, vs.SignBlob(t, identity, issuer, mutated))
		requireStep(t, err, attestation.StepStatement, statement.ErrInvalid)
	})
}

func TestKeylessSignerOverHTTP(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	srv := attestationtest.NewServers(t)
	token := attestationtest.Token(identity, issuer)
	s, err := attestation.NewKeylessSigner(attestation.KeylessConfig{
		FulcioURL: srv.FulcioURL, TSAURL: srv.TSAURL, TrustedRoot: srv.TrustedRoot(t),
	}, attestation.StaticToken(token))
	require.NoError(t, err)
	signed, err := s.Sign(context.Background(), stmt)
	require.NoError(t, err)
	assert.Equal(t, identity, signed.Identity)
	assert.Equal(t, issuer, signed.Issuer)
	assert.Equal(t, token, <-srv.Tokens)
	assert.NotContains(t, string(signed.Bundle), token)

	v, err := attestation.NewVerifier(attestation.Policy{Identity: identity, Issuer: issuer, TrustedMaterial: srv.TrustedRoot(t)})
	require.NoError(t, err)
	res, err := v.Verify(digest, 1, stmt, signed.Bundle)
	require.NoError(t, err)
	assert.Len(t, res.Timestamps, 1)

	// A URI identity, as a CI workflow has.
	const workflow = "https://github.com/example/agent/.github/workflows/release.yml@refs/heads/main"
	s2, err := attestation.NewKeylessSigner(attestation.KeylessConfig{FulcioURL: srv.FulcioURL, TSAURL: srv.TSAURL},
		attestation.StaticToken(attestationtest.Token(workflow, "https://token.actions.githubusercontent.com")))
	require.NoError(t, err)
	signed, err = s2.Sign(context.Background(), stmt)
	require.NoError(t, err)
	assert.Equal(t, workflow, signed.Identity)
	v2, err := attestation.NewVerifier(attestation.Policy{Identity: workflow, Issuer: "https://token.actions.githubusercontent.com", TrustedMaterial: srv.TrustedRoot(t)})
	require.NoError(t, err)
	_, err = v2.Verify(digest, 1, stmt, signed.Bundle)
	require.NoError(t, err)
}

func TestKeylessSignerNeverShowsTheToken(t *testing.T) {
	_, stmt := baseline(t, "before.json")
	token := attestationtest.Token(identity, issuer)
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "rejected "+r.Header.Get("Authorization"), http.StatusUnauthorized)
	}))
	defer echo.Close()
	s, err := attestation.NewKeylessSigner(attestation.KeylessConfig{FulcioURL: echo.URL, TSAURL: echo.URL}, attestation.StaticToken(token))
	require.NoError(t, err)
	_, err = s.Sign(context.Background(), stmt)
	require.ErrorIs(t, err, attestation.ErrSign)
	assert.Contains(t, err.Error(), "401")
	assert.NotContains(t, err.Error(), token)
	for part := range strings.SplitSeq(token, ".") {
		assert.NotContains(t, err.Error(), part)
	}
}

func TestKeylessConfigValidate(t *testing.T) {
	for name, cfg := range map[string]attestation.KeylessConfig{
		"no fulcio":        {TSAURL: "https://tsa"},
		"no time source":   {FulcioURL: "https://fulcio"},
		"bad scheme":       {FulcioURL: "ftp://fulcio", TSAURL: "https://tsa"},
		"user information": {FulcioURL: "https://u:p@fulcio", TSAURL: "https://tsa"},
	} {
		assert.Error(t, cfg.Validate(), name)
	}
	require.NoError(t, attestation.KeylessConfig{FulcioURL: "https://fulcio.sigstore.dev", RekorURL: "https://rekor.sigstore.dev"}.Validate())
	_, err := attestation.NewKeylessSigner(attestation.KeylessConfig{FulcioURL: "https://f", TSAURL: "https://t"}, nil)
	require.Error(t, err)
}

func TestPolicyValidate(t *testing.T) {
	vs := attestationtest.NewVirtual(t)
	key := newKey(t)
	for name, p := range map[string]attestation.Policy{
		"nothing":         {},
		"both":            {PublicKey: &key.PublicKey, Identity: identity, Issuer: issuer, TrustedMaterial: vs.TrustedRoot(t)},
		"identity only":   {Identity: identity, TrustedMaterial: vs.TrustedRoot(t)},
		"issuer only":     {Issuer: issuer, TrustedMaterial: vs.TrustedRoot(t)},
		"no trusted root": {Identity: identity, Issuer: issuer},
		"blank identity":  {Identity: " ", Issuer: issuer, TrustedMaterial: vs.TrustedRoot(t)},
	} {
		_, err := attestation.NewVerifier(p)
		assert.Error(t, err, name)
	}
}

func TestLoadKeys(t *testing.T) {
	key := newKey(t)
	pkcs8, err := attestation.MarshalPrivateKey(key, nil)
	require.NoError(t, err)
	sec1DER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	sec1 := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1DER})
	enc, err := attestation.MarshalPrivateKey(key, []byte("s3cret"))
	require.NoError(t, err)
	encEmpty, err := attestation.MarshalPrivateKey(key, []byte{})
	require.NoError(t, err)
	assert.Contains(t, string(enc), "ENCRYPTED SIGSTORE PRIVATE KEY")

	for name, tc := range map[string]struct {
		pem, password []byte
	}{
		"pkcs8":              {pkcs8, nil},
		"sec1":               {sec1, nil},
		"cosign":             {enc, []byte("s3cret")},
		"cosign, empty":      {encEmpty, []byte{}},
		"cosign, older name": {[]byte(strings.ReplaceAll(string(enc), "SIGSTORE", "COSIGN")), []byte("s3cret")},
	} {
		got, err := attestation.LoadPrivateKey(tc.pem, tc.password)
		require.NoError(t, err, name)
		assert.True(t, got.Equal(key), name)
	}

	_, err = attestation.LoadPrivateKey(enc, []byte("wrong"))
	require.ErrorIs(t, err, attestation.ErrKey)
	assert.NotContains(t, err.Error(), "wrong")
	_, err = attestation.LoadPrivateKey([]byte("not pem"), nil)
	require.ErrorIs(t, err, attestation.ErrKey)

	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(p384)
	require.NoError(t, err)
	_, err = attestation.LoadPrivateKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil)
	require.ErrorIs(t, err, attestation.ErrKey)
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err = x509.MarshalPKCS8PrivateKey(rk)
	require.NoError(t, err)
	_, err = attestation.LoadPrivateKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil)
	require.ErrorIs(t, err, attestation.ErrKey)

	pubPEM, err := attestation.MarshalPublicKey(key.Public())
	require.NoError(t, err)
	pub, err := attestation.LoadPublicKey(pubPEM)
	require.NoError(t, err)
	assert.True(t, pub.Equal(key.Public()))
	_, err = attestation.LoadPublicKey(pkcs8)
	require.ErrorIs(t, err, attestation.ErrKey)
}
