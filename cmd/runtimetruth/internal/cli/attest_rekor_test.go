package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
)

// Keyless attest against the test Fulcio and Rekor (no timestamp
// authority): the bundle carries a transparency log entry, which
// verify-attestation requires and verifies under the trusted root listing
// the log, and which cosign verify-blob-attestation accepts with the same
// trusted root.
func TestAttestKeylessWithRekorThenVerify(t *testing.T) {
	dir := t.TempDir()
	srv := attestationtest.NewServers(t)
	a := attestKeyless(t, dir, srv, srv.TrustedRootJSON(t, attestationtest.WithRekor()), "--rekor-url", srv.RekorURL)
	stmt, bundle, trusted := a.stmt, a.bundle, a.trusted
	assert.Equal(t, 1, srv.Rekor.Size())

	var b struct {
		VerificationMaterial struct {
			TlogEntries []struct {
				LogIndex         string          `json:"logIndex"`
				InclusionPromise json.RawMessage `json:"inclusionPromise"`
				InclusionProof   json.RawMessage `json:"inclusionProof"`
			} `json:"tlogEntries"`
			TimestampVerificationData json.RawMessage `json:"timestampVerificationData"`
		} `json:"verificationMaterial"`
	}
	data, err := os.ReadFile(bundle)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &b))
	require.Len(t, b.VerificationMaterial.TlogEntries, 1)
	e := b.VerificationMaterial.TlogEntries[0]
	assert.NotEmpty(t, e.InclusionPromise, "signed entry timestamp")
	assert.NotEmpty(t, e.InclusionProof)

	requireKeylessVerified(t, a)

	t.Run("wrong identity", func(t *testing.T) {
		r := runAttest(t, "verify-attestation", attestFixture("before.json"), attestFixture("before.json"),
			"--statement", stmt, "--bundle", bundle, "--trusted-root", trusted,
			"--certificate-identity", "mallory@example.com", "--certificate-oidc-issuer", attestIssuer)
		assert.Equal(t, ExitError, r.code)
		assert.Contains(t, r.stderr, "signer identity not verified")
		assert.Empty(t, r.stdout)
	})
	t.Run("another CA and log", func(t *testing.T) {
		other := put(t, t.TempDir(), "other_root.json", attestationtest.NewServers(t).TrustedRootJSON(t, attestationtest.WithRekor()))
		r := runAttest(t, keylessArgs("before.json", "before.json", stmt, bundle, other)...)
		assert.Equal(t, ExitError, r.code)
		assert.Contains(t, r.stderr, "signature verification failed")
	})
	t.Run("changed baseline", func(t *testing.T) {
		r := runAttest(t, keylessArgs("after.json", "after.json", stmt, bundle, trusted)...)
		assert.Equal(t, ExitError, r.code)
		assert.Contains(t, r.stderr, "attestation statement")
	})
	t.Run("cosign verify-blob-attestation", func(t *testing.T) {
		artifact := filepath.Join(dir, "baseline.canonical.json")
		s, err := readSnapshot(attestFixture("before.json"), "baseline", nil)
		require.NoError(t, err)
		canon, err := s.Canonical()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(artifact, canon, 0o600))
		verify := func(identity string) (string, error) {
			return runCosign(t, dir, "verify-blob-attestation", "--bundle", bundle, "--new-bundle-format", "--trusted-root", trusted,
				"--certificate-identity", identity, "--certificate-oidc-issuer", attestIssuer,
				"--insecure-ignore-sct=true", "--type", statement.PredicateType, artifact)
		}
		out, err := verify(attestIdentity)
		require.NoError(t, err, out)
		assert.Contains(t, out, "Verified OK")
		out, err = verify("mallory@example.com")
		require.Error(t, err, "cosign rejects another identity: %s", out)
	})
}

// runCosign runs the pinned cosign ($RUNTIMETRUTH_COSIGN_BIN, else where
// scripts/install-cosign.sh puts it) in dir with a private home; a missing
// cosign fails the test.
func runCosign(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	bin := os.Getenv("RUNTIMETRUTH_COSIGN_BIN")
	if bin == "" {
		cache, err := os.UserCacheDir()
		require.NoError(t, err)
		bin = filepath.Join(cache, "runtimetruth", "bin", "cosign")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("cosign not found at %s (%v): run scripts/install-cosign.sh, or set RUNTIMETRUTH_COSIGN_BIN", bin, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "TUF_ROOT="+filepath.Join(dir, ".sigstore"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}
