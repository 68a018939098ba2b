package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
)

const (
	attestIdentity = "attestor@example.com"
	attestIssuer   = "https://issuer.example.com"
)

type attestResult struct {
	code           int
	stdout, stderr string
}

// runAttest runs the command line as Run does, with attest and
// verify-attestation registered whether or not the root registers them.
func runAttest(t *testing.T, args ...string) attestResult {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot(IO{In: strings.NewReader(""), Out: &out, Err: &errb}, "test")
	for _, cmd := range []func() *cobra.Command{newAttestCmd, newVerifyAttestationCmd} {
		c := cmd()
		if found, _, err := root.Find([]string{c.Name()}); err != nil || found == root {
			root.AddCommand(c)
		}
	}
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	code := ExitPass
	switch {
	case err == nil:
	case errors.Is(err, errDrift):
		code = ExitDrift
	default:
		fmt.Fprintf(&errb, "runtimetruth: error: %v\n", err)
		code = ExitError
	}
	return attestResult{code: code, stdout: out.String(), stderr: errb.String()}
}

func attestFixture(name string) string {
	return filepath.Join("..", "..", "..", "..", "pkg", "evidence", "testdata", "snapshots", name)
}

func fixtureDigest(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(attestFixture(name))
	require.NoError(t, err)
	s, err := snapshot.Parse(data)
	require.NoError(t, err)
	d, err := s.Digest()
	require.NoError(t, err)
	return d
}

func fixtureStatement(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(attestFixture(name))
	require.NoError(t, err)
	s, err := snapshot.Parse(data)
	require.NoError(t, err)
	stmt, err := statement.Build(s)
	require.NoError(t, err)
	return stmt
}

func put(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// keyFiles writes a private key (cosign format, password "pw") and its
// public key.
func keyFiles(t *testing.T, dir string) (priv, pub string) {
	t.Helper()
	key := attestationtest.WriteCosignKey(t, dir, "pw")
	return key.KeyFile, key.PublicKeyFile
}

// signedKeyless writes the statement of before.json, a bundle signed by
// identity on vs, and vs's trusted root.
func signedKeyless(t *testing.T, dir string, vs *attestationtest.Virtual, identity string) (stmt, bundle, trusted string) {
	t.Helper()
	s := fixtureStatement(t, "before.json")
	return put(t, dir, "baseline.intoto.json", s),
		put(t, dir, "baseline.sigstore.json", vs.Sign(t, identity, attestIssuer, s)),
		put(t, dir, "trusted_root.json", vs.TrustedRootJSON(t))
}

// keylessAttestation is what attestKeyless made: the statement, bundle
// and trusted root files, and the identity token it signed with.
type keylessAttestation struct{ stmt, bundle, trusted, token string }

// attestKeyless runs attest on before.json keylessly against srv's Fulcio,
// the identity token in a file, urls the --rekor-url and
// --timestamp-server-url flags, and checks it succeeds without printing
// the token. trustedRoot, the trusted root attest verifies the new bundle
// against, is written to dir with the statement and bundle.
func attestKeyless(t *testing.T, dir string, srv *attestationtest.Servers, trustedRoot []byte, urls ...string) keylessAttestation {
	t.Helper()
	a := keylessAttestation{
		stmt:    filepath.Join(dir, "baseline.intoto.json"),
		bundle:  filepath.Join(dir, "baseline.sigstore.json"),
		trusted: put(t, dir, "trusted_root.json", trustedRoot),
		token:   attestationtest.Token(attestIdentity, attestIssuer),
	}
	tokenFile := put(t, dir, "token", []byte(a.token+"\n"))
	args := append([]string{"attest", attestFixture("before.json"), "--statement", a.stmt, "--bundle", a.bundle,
		"--identity-token-file", tokenFile, "--fulcio-url", srv.FulcioURL, "--trusted-root", a.trusted}, urls...)
	r := runAttest(t, args...)
	require.Equal(t, ExitPass, r.code, r.stderr)
	assert.NotContains(t, r.stdout+r.stderr, a.token)
	return a
}

// requireKeylessVerified checks that verify-attestation of before.json
// against a passes and prints the signer's identity, the baseline's
// digest and the runtime's verdict.
func requireKeylessVerified(t *testing.T, a keylessAttestation) {
	t.Helper()
	r := runAttest(t, keylessArgs("before.json", "before.json", a.stmt, a.bundle, a.trusted)...)
	require.Equal(t, ExitPass, r.code, r.stderr)
	sum := strings.TrimPrefix(fixtureDigest(t, "before.json"), "sha256:")
	assert.Equal(t, "IDENTITY: VERIFIED\n  certificate_identity: "+attestIdentity+"\n  oidc_issuer: "+attestIssuer+
		"\nBASELINE: VERIFIED\n  sha256: "+sum+"\nRUNTIME: PASS\n", r.stdout)
}

func keylessArgs(baseline, current, stmt, bundle, trusted string, extra ...string) []string {
	args := []string{"verify-attestation", attestFixture(baseline)}
	if current != "" {
		args = append(args, attestFixture(current))
	}
	args = append(args, "--statement", stmt, "--bundle", bundle, "--trusted-root", trusted,
		"--certificate-identity", attestIdentity, "--certificate-oidc-issuer", attestIssuer)
	return append(args, extra...)
}

func TestAttestWithKeyWritesStatementAndBundle(t *testing.T) {
	dir := t.TempDir()
	priv, pub := keyFiles(t, dir)
	t.Setenv(envKeyPassword, "pw")
	stmt, bundle := filepath.Join(dir, "baseline.intoto.json"), filepath.Join(dir, "baseline.sigstore.json")
	r := runAttest(t, "attest", attestFixture("before.json"), "--statement", stmt, "--bundle", bundle, "--key", priv)
	require.Equal(t, ExitPass, r.code, r.stderr)
	assert.Equal(t, fmt.Sprintf("BASELINE: %s\nSTATEMENT: %s\nBUNDLE: %s\n", fixtureDigest(t, "before.json"), stmt, bundle), r.stdout)
	assert.Empty(t, r.stderr)
	got, err := os.ReadFile(stmt)
	require.NoError(t, err)
	assert.Equal(t, fixtureStatement(t, "before.json"), got)

	r = runAttest(t, "verify-attestation", attestFixture("before.json"), attestFixture("before.json"),
		"--statement", stmt, "--bundle", bundle, "--key", pub)
	require.Equal(t, ExitPass, r.code, r.stderr)
	assert.Regexp(t, `^IDENTITY: VERIFIED\n  public_key: sha256:[0-9a-f]{64}\nBASELINE: VERIFIED\n  sha256: [0-9a-f]{64}\nRUNTIME: PASS\n$`, r.stdout)
}

func TestAttestKeylessThenVerify(t *testing.T) {
	dir := t.TempDir()
	srv := attestationtest.NewServers(t)
	a := attestKeyless(t, dir, srv, srv.TrustedRootJSON(t), "--rekor-url", "", "--timestamp-server-url", srv.TSAURL)
	requireKeylessVerified(t, a)

	// The token from the environment works the same.
	t.Setenv(envIDToken, a.token)
	r := runAttest(t, "attest", attestFixture("after.json"), "--statement", filepath.Join(dir, "s2.json"), "--bundle", filepath.Join(dir, "b2.json"),
		"--fulcio-url", srv.FulcioURL, "--rekor-url", "", "--timestamp-server-url", srv.TSAURL)
	require.Equal(t, ExitPass, r.code, r.stderr)
}

// test_write_statement_refuses_overwrite, at the command.
func TestAttestRefusesToOverwrite(t *testing.T) {
	dir := t.TempDir()
	priv, _ := keyFiles(t, dir)
	t.Setenv(envKeyPassword, "pw")
	for _, existing := range []string{"statement", "bundle"} {
		t.Run(existing, func(t *testing.T) {
			sub := t.TempDir()
			stmt, bundle := filepath.Join(sub, "s.json"), filepath.Join(sub, "b.json")
			other := bundle
			if existing == "statement" {
				put(t, sub, "s.json", []byte("keep"))
			} else {
				put(t, sub, "b.json", []byte("keep"))
				other = stmt
			}
			r := runAttest(t, "attest", attestFixture("before.json"), "--statement", stmt, "--bundle", bundle, "--key", priv)
			require.Equal(t, ExitError, r.code)
			assert.Contains(t, r.stderr, "refusing to overwrite existing file")
			assert.Empty(t, r.stdout)
			assert.NoFileExists(t, other)
			kept, err := os.ReadFile(filepath.Join(sub, map[string]string{"statement": "s.json", "bundle": "b.json"}[existing]))
			require.NoError(t, err)
			assert.Equal(t, "keep", string(kept))
		})
	}
	r := runAttest(t, "attest", attestFixture("before.json"), "--statement", filepath.Join(dir, "x"), "--bundle", filepath.Join(dir, "x"), "--key", priv)
	require.Equal(t, ExitError, r.code)
	assert.Contains(t, r.stderr, "different files")
}

// test_create_signed_attestation_removes_partial_outputs_on_failure
func TestAttestLeavesNothingBehindOnFailure(t *testing.T) {
	dir := t.TempDir()
	priv, _ := keyFiles(t, dir)
	srv := attestationtest.NewServers(t)
	stmt, bundle := filepath.Join(dir, "s.json"), filepath.Join(dir, "b.json")
	for name, args := range map[string][]string{
		"wrong key password": {"--key", priv},
		"no token":           {"--fulcio-url", srv.FulcioURL, "--timestamp-server-url", srv.TSAURL},
		"fulcio refuses":     {"--fulcio-url", srv.FulcioURL + "/nowhere", "--timestamp-server-url", srv.TSAURL},
		"bundle dir missing": {"--key", priv, "--bundle", filepath.Join(dir, "missing", "b.json")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv(envKeyPassword, "wrong")
			t.Setenv(envIDToken, "")
			if name == "fulcio refuses" {
				t.Setenv(envIDToken, attestationtest.Token(attestIdentity, attestIssuer))
			}
			if name == "bundle dir missing" {
				t.Setenv(envKeyPassword, "pw")
			}
			full := append([]string{"attest", attestFixture("before.json"), "--statement", stmt, "--bundle", bundle}, args...)
			r := runAttest(t, full...)
			require.Equal(t, ExitError, r.code, r.stdout)
			assert.Empty(t, r.stdout)
			assert.NoFileExists(t, stmt)
			assert.NoFileExists(t, bundle)
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Len(t, entries, 2, "only the key files remain") // cosign.key, cosign.pub
		})
	}
}

func TestVerifyAttestationDriftAndJSON(t *testing.T) {
	dir := t.TempDir()
	vs := attestationtest.NewVirtual(t)
	stmt, bundle, trusted := signedKeyless(t, dir, vs, attestIdentity)
	sum := strings.TrimPrefix(fixtureDigest(t, "before.json"), "sha256:")

	r := runAttest(t, keylessArgs("before.json", "after.json", stmt, bundle, trusted)...)
	require.Equal(t, ExitDrift, r.code, r.stderr)
	head := "IDENTITY: VERIFIED\n  certificate_identity: " + attestIdentity + "\n  oidc_issuer: " + attestIssuer +
		"\nBASELINE: VERIFIED\n  sha256: " + sum + "\nRUNTIME: DRIFT\n\n"
	require.True(t, strings.HasPrefix(r.stdout, head), r.stdout)
	assert.Contains(t, r.stdout, "head_commit:")

	r = runAttest(t, keylessArgs("before.json", "after.json", stmt, bundle, trusted, "--json")...)
	require.Equal(t, ExitDrift, r.code, r.stderr)
	validReport(t, r.stdout)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Equal(t, map[string]any{"verified": true, "certificate_identity": attestIdentity, "oidc_issuer": attestIssuer}, doc["identity"])
	assert.Equal(t, map[string]any{"verified": true, "sha256": sum}, doc["baseline"])
	assert.Equal(t, "drift", doc["status"])
	assert.True(t, strings.HasPrefix(r.stdout, `{"baseline":{"sha256":"`), "keys sorted, compact: %s", r.stdout)

	r = runAttest(t, keylessArgs("before.json", "before.json", stmt, bundle, trusted, "--json")...)
	require.Equal(t, ExitPass, r.code, r.stderr)
	validReport(t, r.stdout)
	// Byte for byte RuntimeTruth's: json.dumps(report, separators=(",", ":"), sort_keys=True).
	assert.Equal(t, `{"baseline":{"sha256":"`+sum+`","verified":true},"changes":[],`+
		`"identity":{"certificate_identity":"`+attestIdentity+`","oidc_issuer":"`+attestIssuer+`","verified":true},`+
		`"protected":[],"report_schema_version":1,"status":"pass","target":{"identifier":"agent-worker.service","kind":"systemd.unit"}}`+"\n", r.stdout)
}

// An attestation binds the baseline as written: a captured_at RuntimeTruth
// would keep as it is (+00:00 here) is digested verbatim, so a baseline
// another tool wrote is signed and verified under RuntimeTruth's digest.
func TestAttestBindsCapturedAtAsWritten(t *testing.T) {
	dir := t.TempDir()
	priv, pub := keyFiles(t, dir)
	t.Setenv(envKeyPassword, "pw")
	raw, err := os.ReadFile(attestFixture("before.json"))
	require.NoError(t, err)
	require.Contains(t, string(raw), `"2026-10-06T03:09:40Z"`)
	baseline := put(t, dir, "baseline.json", []byte(strings.Replace(string(raw), `"2026-10-06T03:09:40Z"`, `"2026-10-06T03:09:40+00:00"`, 1)))
	// sha256 of json.dumps(snapshot, sort_keys=True, separators=(",", ":"), ensure_ascii=False), which is
	// RFC 8785 for this ASCII, integer-only document (as pkg/evidence/snapshot's TestCapturedAtIsKeptVerbatim).
	const want = "sha256:4183adb3b84506977dd5fa9651efdb7688e4c82ba7c6090b806ca4ee4824a826"
	stmt, bundle := filepath.Join(dir, "baseline.intoto.json"), filepath.Join(dir, "baseline.sigstore.json")
	r := runAttest(t, "attest", baseline, "--statement", stmt, "--bundle", bundle, "--key", priv)
	require.Equal(t, ExitPass, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "BASELINE: "+want+"\n"), r.stdout)
	got, err := os.ReadFile(stmt)
	require.NoError(t, err)
	assert.Contains(t, string(got), `"sha256":"`+strings.TrimPrefix(want, "sha256:")+`"`)
	r = runAttest(t, "verify-attestation", baseline, baseline, "--statement", stmt, "--bundle", bundle, "--key", pub)
	require.Equal(t, ExitPass, r.code, r.stderr)
	assert.Contains(t, r.stdout, "  sha256: "+strings.TrimPrefix(want, "sha256:")+"\n")
}

func validReport(t *testing.T, out string) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(report.Schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("report.schema.json", doc))
	schema := c.MustCompile("report.schema.json")
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	require.NoError(t, err)
	require.NoError(t, schema.Validate(v))
}

func TestVerifyAttestationFailsClosed(t *testing.T) {
	dir := t.TempDir()
	vs := attestationtest.NewVirtual(t)
	stmt, bundle, trusted := signedKeyless(t, dir, vs, attestIdentity)
	badPolicy := put(t, dir, "policy.toml", []byte("version = 1\nprotect = []\n"))
	otherRoot := put(t, dir, "other_root.json", attestationtest.NewVirtual(t).TrustedRootJSON(t))
	mallory := put(t, dir, "mallory.sigstore.json", vs.Sign(t, "mallory@example.com", attestIssuer, fixtureStatement(t, "before.json")))

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"wrong identity", keylessArgs("before.json", "before.json", stmt, mallory, trusted), "attestation signature: signer identity not verified"},
		{"wrong issuer", append(keylessArgs("before.json", "before.json", stmt, bundle, trusted)[:0:0],
			"verify-attestation", attestFixture("before.json"), attestFixture("before.json"), "--statement", stmt, "--bundle", bundle,
			"--trusted-root", trusted, "--certificate-identity", attestIdentity, "--certificate-oidc-issuer", "https://other.example.com"),
			"signer identity not verified"},
		{"another CA", keylessArgs("before.json", "before.json", stmt, bundle, otherRoot), "attestation signature: signature verification failed"},
		{"changed baseline", keylessArgs("after.json", "after.json", stmt, bundle, trusted), "attestation statement: statement does not match the baseline"},
		// test_attestation_trust_failure_precedes_invalid_policy
		{"trust failure precedes invalid policy", keylessArgs("before.json", "before.json", stmt, mallory, trusted, "--policy", badPolicy), "signer identity not verified"},
		// test_verify_signed_attestation_checks_signature_before_baseline
		{"signature before baseline", keylessArgs("after.json", "after.json", stmt, mallory, trusted), "signer identity not verified"},
		{"missing statement", keylessArgs("before.json", "before.json", filepath.Join(dir, "nope.json"), bundle, trusted), "could not read statement"},
		{"missing bundle", keylessArgs("before.json", "before.json", stmt, filepath.Join(dir, "nope.json"), trusted), "could not read bundle"},
		{"statement from stdin", keylessArgs("before.json", "before.json", "-", bundle, trusted), "standard input is not accepted"},
		{"no identity", []string{"verify-attestation", attestFixture("before.json"), attestFixture("before.json"), "--statement", stmt, "--bundle", bundle}, "requires --certificate-identity"},
		{"identity without issuer", []string{"verify-attestation", attestFixture("before.json"), attestFixture("before.json"), "--statement", stmt, "--bundle", bundle, "--certificate-identity", attestIdentity}, "requires both"},
		{"identity and key", keylessArgs("before.json", "before.json", stmt, bundle, trusted, "--key", stmt), "not both"},
		{"no current", keylessArgs("before.json", "", stmt, bundle, trusted), "requires a current snapshot"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runAttest(t, tc.args...)
			require.Equal(t, ExitError, r.code, r.stdout)
			assert.Empty(t, r.stdout, "nothing is reported verified")
			assert.Contains(t, r.stderr, tc.want)
			assert.Equal(t, 1, strings.Count(r.stderr, "runtimetruth: error:"))
			if tc.name == "trust failure precedes invalid policy" {
				assert.NotContains(t, r.stderr, "policy")
			}
		})
	}

	// The invalid policy is reported once the attestation verifies.
	r := runAttest(t, keylessArgs("before.json", "before.json", stmt, bundle, trusted, "--policy", badPolicy)...)
	require.Equal(t, ExitError, r.code)
	assert.Contains(t, r.stderr, "policy protect must be a non-empty array")
}

// test_attestation_policy_controls_only_runtime_gate and
// test_attestation_policy_and_cli_protect_are_additive.
func TestVerifyAttestationPolicyNarrowsOnlyTheRuntime(t *testing.T) {
	dir := t.TempDir()
	vs := attestationtest.NewVirtual(t)
	stmt, bundle, trusted := signedKeyless(t, dir, vs, attestIdentity)
	policy := put(t, dir, "policy.toml", []byte("version = 1\nprotect = [\"git.repository.branch\"]\n"))

	r := runAttest(t, keylessArgs("before.json", "after.json", stmt, bundle, trusted, "--policy", policy)...)
	require.Equal(t, ExitPass, r.code, r.stderr)
	assert.True(t, strings.HasSuffix(r.stdout, "RUNTIME: PASS\n"))

	r = runAttest(t, keylessArgs("before.json", "after.json", stmt, bundle, trusted, "--policy", policy, "--protect", "git.repository.head_commit", "--json")...)
	require.Equal(t, ExitDrift, r.code, r.stderr)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Equal(t, []any{"git.repository.branch", "git.repository.head_commit"}, doc["protected"])

	// A selector cannot rescue a baseline that is not the signed one.
	r = runAttest(t, keylessArgs("after.json", "after.json", stmt, bundle, trusted, "--protect", "git.repository.branch")...)
	require.Equal(t, ExitError, r.code)
	assert.Contains(t, r.stderr, "does not match the baseline")
}

// A bundle cosign sign-blob writes over the statement file verifies too.
func TestVerifyAttestationAcceptsSignBlobBundles(t *testing.T) {
	dir := t.TempDir()
	vs := attestationtest.NewVirtual(t)
	s := fixtureStatement(t, "before.json")
	stmt := put(t, dir, "baseline.intoto.json", s)
	bundle := put(t, dir, "baseline.sigstore.json", vs.SignBlob(t, attestIdentity, attestIssuer, s))
	trusted := put(t, dir, "trusted_root.json", vs.TrustedRootJSON(t))
	r := runAttest(t, keylessArgs("before.json", "before.json", stmt, bundle, trusted)...)
	require.Equal(t, ExitPass, r.code, r.stderr)

	// Statement mutations signed by the right identity fail at the
	// statement step.
	mutated := put(t, dir, "mutated.intoto.json", []byte(strings.Replace(string(s), "runtimetruth-baseline", "other", 1)))
	mb := put(t, dir, "mutated.sigstore.json", vs.SignBlob(t, attestIdentity, attestIssuer, []byte(strings.Replace(string(s), "runtimetruth-baseline", "other", 1))))
	r = runAttest(t, keylessArgs("before.json", "before.json", mutated, mb, trusted)...)
	require.Equal(t, ExitError, r.code)
	assert.Contains(t, r.stderr, "attestation statement: invalid statement: subject[0].name")
}
