package attestation_test

// Interoperability with the real cosign CLI (scripts/install-cosign.sh
// builds the pinned version into ~/.cache/runtimetruth/bin; make test runs it first). These
// tests fail, never skip, when cosign is missing. Every cosign command runs
// offline: key signatures without a transparency log, keyless ones checked
// against an exported trusted root with signed timestamps or with the test
// Rekor's log entries.

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
)

// cosignBin returns $RUNTIMETRUTH_COSIGN_BIN or where
// scripts/install-cosign.sh puts it (~/.cache/runtimetruth/bin/cosign).
func cosignBin(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv("RUNTIMETRUTH_COSIGN_BIN")
	if bin == "" {
		cache, err := os.UserCacheDir()
		require.NoError(tb, err)
		bin = filepath.Join(cache, "runtimetruth", "bin", "cosign")
	}
	if _, err := os.Stat(bin); err != nil {
		tb.Fatalf("cosign not found at %s (%v): run scripts/install-cosign.sh, or set RUNTIMETRUTH_COSIGN_BIN", bin, err)
	}
	return bin
}

type cosign struct {
	bin, dir string
}

func newCosign(t *testing.T) *cosign {
	t.Helper()
	return &cosign{bin: cosignBin(t), dir: t.TempDir()}
}

// run runs cosign in c.dir with an empty key password and a private home
// (no TUF cache or configuration of the user's).
func (c *cosign) run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "COSIGN_PASSWORD=", "HOME="+c.dir, "TUF_ROOT="+filepath.Join(c.dir, ".sigstore"), "COSIGN_EXPERIMENTAL=")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *cosign) mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.run(t, args...)
	require.NoError(t, err, "cosign %s:\n%s", strings.Join(args, " "), out)
	return out
}

func (c *cosign) file(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(c.dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

func (c *cosign) read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, name))
	require.NoError(t, err)
	return b
}

// emptyRoot is the minimal trusted root cosign v2 needs for a new-format
// bundle verified with a key.
const emptyRoot = `{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}`

// canonical returns the canonical bytes of a fixture: the artifact the
// statement's subject digests.
func canonical(t *testing.T, name string) []byte {
	t.Helper()
	b, err := fixture(t, name).Canonical()
	require.NoError(t, err)
	return b
}

// generateKeyPair makes a cosign key pair (empty password) and returns our
// reading of it.
func (c *cosign) generateKeyPair(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	c.mustRun(t, "generate-key-pair")
	key, err := attestation.LoadPrivateKey(c.read(t, "cosign.key"), []byte{})
	require.NoError(t, err, "our loader reads cosign's key")
	pub, err := attestation.LoadPublicKey(c.read(t, "cosign.pub"))
	require.NoError(t, err)
	require.True(t, pub.Equal(key.Public()))
	return key
}

func TestCosignVerifiesOurKeyBundle(t *testing.T) {
	c := newCosign(t)
	key := c.generateKeyPair(t)
	_, stmt := baseline(t, "before.json")
	s, err := attestation.NewKeySigner(key)
	require.NoError(t, err)
	signed, err := s.Sign(context.Background(), stmt)
	require.NoError(t, err)
	c.file(t, "bundle.json", signed.Bundle)
	c.file(t, "artifact.json", canonical(t, "before.json"))
	c.file(t, "after.json", canonical(t, "after.json"))
	c.file(t, "root.json", []byte(emptyRoot))
	verify := func(artifact string) (string, error) {
		return c.run(t, "verify-blob-attestation", "--key", "cosign.pub", "--bundle", "bundle.json", "--new-bundle-format",
			"--trusted-root", "root.json", "--insecure-ignore-tlog=true", "--type", statement.PredicateType, artifact)
	}
	out, err := verify("artifact.json")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Verified OK")

	out, err = verify("after.json")
	require.Error(t, err, "cosign rejects another baseline: %s", out)

	// A key of ours in cosign's encrypted format signs with cosign.
	own, err := attestation.GenerateKey()
	require.NoError(t, err)
	ownPEM, err := attestation.MarshalPrivateKey(own, []byte{})
	require.NoError(t, err)
	c.file(t, "own.key", ownPEM)
	c.file(t, "stmt.json", stmt)
	c.mustRun(t, "sign-blob", "--key", "own.key", "--new-bundle-format", "--tlog-upload=false", "--bundle", "own.sigstore.json", "--yes", "stmt.json")
	digest, _ := baseline(t, "before.json")
	_, err = keyVerifier(t, &own.PublicKey).Verify(digest, 1, stmt, c.read(t, "own.sigstore.json"))
	require.NoError(t, err)
}

func TestCosignVerifiesOurKeylessBundle(t *testing.T) {
	c := newCosign(t)
	_, stmt := baseline(t, "before.json")
	srv := attestationtest.NewServers(t)
	s, err := attestation.NewKeylessSigner(attestation.KeylessConfig{FulcioURL: srv.FulcioURL, TSAURL: srv.TSAURL},
		attestation.StaticToken(attestationtest.Token(identity, issuer)))
	require.NoError(t, err)
	signed, err := s.Sign(context.Background(), stmt)
	require.NoError(t, err)
	c.file(t, "bundle.json", signed.Bundle)
	c.file(t, "root.json", srv.TrustedRootJSON(t))
	c.file(t, "artifact.json", canonical(t, "before.json"))
	verify := func(id, iss string) (string, error) {
		return c.run(t, "verify-blob-attestation", "--bundle", "bundle.json", "--new-bundle-format", "--trusted-root", "root.json",
			"--certificate-identity", id, "--certificate-oidc-issuer", iss,
			"--insecure-ignore-tlog=true", "--insecure-ignore-sct=true", "--use-signed-timestamps=true",
			"--type", statement.PredicateType, "artifact.json")
	}
	out, err := verify(identity, issuer)
	require.NoError(t, err, out)
	assert.Contains(t, out, "Verified OK")
	out, err = verify("mallory@example.com", issuer)
	require.Error(t, err, "wrong identity: %s", out)
	out, err = verify(identity, "https://other.example.com")
	require.Error(t, err, "wrong issuer: %s", out)
}

func TestOurVerifierAcceptsCosignBundles(t *testing.T) {
	c := newCosign(t)
	key := c.generateKeyPair(t)
	digest, stmt := baseline(t, "before.json")
	otherDigest, _ := baseline(t, "after.json")
	c.file(t, "stmt.json", stmt)
	v := keyVerifier(t, &key.PublicKey)

	t.Run("attest-blob --statement", func(t *testing.T) {
		c.mustRun(t, "attest-blob", "--key", "cosign.key", "--new-bundle-format", "--tlog-upload=false",
			"--bundle", "attest.sigstore.json", "--statement", "stmt.json", "--yes")
		b := c.read(t, "attest.sigstore.json")
		res, err := v.Verify(digest, 1, stmt, b)
		require.NoError(t, err)
		assert.True(t, res.Envelope)
		_, err = v.Verify(otherDigest, 1, stmt, b)
		requireStep(t, err, attestation.StepStatement, statement.ErrDigestMismatch)
	})
	t.Run("sign-blob over the statement", func(t *testing.T) {
		c.mustRun(t, "sign-blob", "--key", "cosign.key", "--new-bundle-format", "--tlog-upload=false",
			"--bundle", "sign.sigstore.json", "--yes", "stmt.json")
		b := c.read(t, "sign.sigstore.json")
		res, err := v.Verify(digest, 1, stmt, b)
		require.NoError(t, err)
		assert.False(t, res.Envelope)
		_, err = keyVerifier(t, &newKey(t).PublicKey).Verify(digest, 1, stmt, b)
		requireStep(t, err, attestation.StepSignature, attestation.ErrSignature)
	})
	t.Run("attest-blob --predicate", func(t *testing.T) {
		// cosign builds its own statement (in-toto v0.1, the artifact's
		// file name as subject): the signature verifies, RuntimeTruth's
		// exact statement shape does not.
		c.file(t, "baseline.json", canonical(t, "before.json"))
		c.file(t, "predicate.json", []byte(`{"attestation_schema_version":1,"canonicalization":"RFC8785","snapshot_schema_version":1}`))
		c.mustRun(t, "attest-blob", "--key", "cosign.key", "--new-bundle-format", "--tlog-upload=false",
			"--bundle", "pred.sigstore.json", "--predicate", "predicate.json", "--type", statement.PredicateType, "--yes", "baseline.json")
		b := c.read(t, "pred.sigstore.json")
		var env struct {
			DSSE struct {
				Payload []byte `json:"payload"`
			} `json:"dsseEnvelope"`
		}
		require.NoError(t, json.Unmarshal(b, &env))
		_, err := v.VerifySignature(env.DSSE.Payload, b)
		require.NoError(t, err)
		_, err = v.Verify(digest, 1, env.DSSE.Payload, b)
		requireStep(t, err, attestation.StepStatement, statement.ErrNotCanonical)
	})
	t.Run("attest-blob with a certificate", func(t *testing.T) {
		vs := attestationtest.NewVirtual(t)
		leaf, priv, err := vs.VS.GenerateLeafCert(identity, issuer)
		require.NoError(t, err)
		leafKey, err := attestation.MarshalPrivateKey(priv.(*ecdsa.PrivateKey), nil)
		require.NoError(t, err)
		c.file(t, "leaf.key", leafKey)
		c.file(t, "leaf.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}))
		c.mustRun(t, "import-key-pair", "--key", "leaf.key", "--output-key-prefix", "leaf-imported")
		c.mustRun(t, "attest-blob", "--key", "leaf-imported.key", "--certificate", "leaf.crt", "--new-bundle-format", "--tlog-upload=false",
			"--bundle", "cert.sigstore.json", "--statement", "stmt.json", "--yes")
		b := c.read(t, "cert.sigstore.json")
		res, err := keylessVerifier(t, vs, identity, issuer).Verify(digest, 1, stmt, b)
		require.NoError(t, err)
		assert.True(t, res.CurrentTime, "no signed time: checked at the current time")
		assert.Equal(t, leaf.NotAfter.Unix(), res.NotAfter.Unix())
		_, err = keylessVerifier(t, vs, "mallory@example.com", issuer).Verify(digest, 1, stmt, b)
		requireStep(t, err, attestation.StepSignature, attestation.ErrIdentity)
	})
}

// A keyless bundle with a transparency log entry (test Fulcio and Rekor, no
// timestamp authority): cosign verifies the entry — its signed entry
// timestamp, inclusion proof and checkpoint — against the trusted root that
// lists the log, offline, and checks the certificate at the entry's
// integrated time. Only the SCT check is skipped: the test Fulcio embeds
// none.
func TestCosignVerifiesOurRekorBundle(t *testing.T) {
	c := newCosign(t)
	_, stmt := baseline(t, "before.json")
	srv := attestationtest.NewServers(t)
	signed, err := rekorSigner(t, srv, false).Sign(context.Background(), stmt)
	require.NoError(t, err)
	c.file(t, "bundle.json", signed.Bundle)
	c.file(t, "root.json", srv.TrustedRootJSON(t, attestationtest.WithRekor()))
	c.file(t, "root-without-log.json", srv.TrustedRootJSON(t))
	c.file(t, "artifact.json", canonical(t, "before.json"))
	c.file(t, "after.json", canonical(t, "after.json"))
	verify := func(root, id, iss, artifact string) (string, error) {
		return c.run(t, "verify-blob-attestation", "--bundle", "bundle.json", "--new-bundle-format", "--trusted-root", root,
			"--certificate-identity", id, "--certificate-oidc-issuer", iss, "--insecure-ignore-sct=true",
			"--type", statement.PredicateType, artifact)
	}
	out, err := verify("root.json", identity, issuer, "artifact.json")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Verified OK")
	out, err = verify("root.json", "mallory@example.com", issuer, "artifact.json")
	require.Error(t, err, "wrong identity: %s", out)
	out, err = verify("root.json", identity, "https://other.example.com", "artifact.json")
	require.Error(t, err, "wrong issuer: %s", out)
	out, err = verify("root.json", identity, issuer, "after.json")
	require.Error(t, err, "another baseline: %s", out)
	out, err = verify("root-without-log.json", identity, issuer, "artifact.json")
	require.Error(t, err, "a trusted root without the log: %s", out)
	assert.Contains(t, out, "not enough verified log entries")
}
