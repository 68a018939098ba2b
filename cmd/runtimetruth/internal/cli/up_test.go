package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// upWorkdir makes a git repository (gitRepo) the working directory, the
// target up collects, outside any Python virtual environment, and returns
// its path.
func upWorkdir(t *testing.T) string {
	t.Helper()
	repo := gitRepo(t)
	t.Chdir(repo)
	t.Setenv("VIRTUAL_ENV", "")
	return repo
}

func TestUpOnceApprovesThenDetectsDrift(t *testing.T) {
	repo := upWorkdir(t)
	data := t.TempDir()
	args := []string{"up", "--data-dir", data, "--interval", "1s", "--no-codex", "--once"}

	r := run(t, append(args, "--approve")...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "watching git     "+repo)
	assert.Contains(t, r.stdout, "APPROVED  git.repository:"+repo)
	assert.Contains(t, r.stdout, "PASS   git.repository:"+repo)
	assert.NoFileExists(t, filepath.Join(data, "nats.url"), "the URL file goes with the server")
	auditLog := filepath.Join(data, "auditor", "audit.jsonl")
	checkpoints := filepath.Join(data, "auditor", "checkpoints.jsonl")
	assert.Contains(t, r.stdout, "audit log        "+auditLog)
	first := verifyAuditLog(t, auditLog, checkpoints)

	// The baseline persists in the data directory's JetStream store.
	require.NoError(t, os.WriteFile(filepath.Join(repo, "new.txt"), []byte("x"), 0o600))
	r = run(t, args...)
	assert.Equal(t, 2, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "DRIFT  git.repository:"+repo)
	assert.Contains(t, r.stdout, "git.repository.dirty: false -> true")

	// The second run continued the chains of the first, the drift
	// verdict included.
	second := verifyAuditLog(t, auditLog, checkpoints)
	assert.Greater(t, second.Links, first.Links)
	for name, h := range first.Chains {
		assert.GreaterOrEqual(t, second.Chains[name].Seq, h.Seq, name)
	}
	log, err := os.ReadFile(auditLog)
	require.NoError(t, err)
	assert.Contains(t, string(log), `"type":"dev.runtimetruth.verdict.drift.v2"`)
	assert.Contains(t, string(log), `"type":"dev.runtimetruth.verdict.pass.v2"`)
	// The collector's events are linked with their signature and the
	// digest of the payload bytes the auditor received.
	assert.Contains(t, string(log), `"rtsignature":`)
	assert.Contains(t, string(log), `"data_sha256":`)
}

type auditVerifyReport struct {
	Status      string `json:"status"`
	Links       int    `json:"links"`
	Checkpoints int    `json:"checkpoints"`
	Chains      map[string]struct {
		Seq uint64 `json:"seq"`
	} `json:"chains"`
}

// verifyAuditLog runs `runtimetruth audit verify` on up's audit log with
// its checkpoints, signed by up's key: it must pass, hold the verdict and
// evidence chains, and end no earlier than the last checkpoint.
func verifyAuditLog(t *testing.T, path, checkpoints string) auditVerifyReport {
	t.Helper()
	r := run(t, "audit", "verify", "--jsonl", path, "--checkpoints", checkpoints,
		"--checkpoint-key", filepath.Join(filepath.Dir(path), "checkpoint.key"))
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "audit chain intact")
	r = run(t, "audit", "verify", "--jsonl", path, "--checkpoints", checkpoints, "--json")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	var rep auditVerifyReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Equal(t, "intact", rep.Status)
	assert.Positive(t, rep.Checkpoints, "up leaves a checkpoint at shutdown")
	var evidence, verdicts bool
	for name := range rep.Chains {
		evidence = evidence || strings.HasPrefix(name, "EVIDENCE/")
		verdicts = verdicts || strings.HasPrefix(name, "VERDICTS/")
	}
	assert.True(t, evidence, "evidence chain in %v", rep.Chains)
	assert.True(t, verdicts, "verdict chain in %v", rep.Chains)
	return rep
}

func TestUpFirstRunExplainsApproval(t *testing.T) {
	repo := upWorkdir(t)
	r := run(t, "up", "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--once")
	assert.Equal(t, 1, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "NO BASELINE  git.repository:"+repo)
	assert.Contains(t, r.stdout, "runtimetruth baseline approve 'git.repository:"+repo+"'")
}

func TestBaselineAndStatusAgainstExternalNATS(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	t.Setenv("RUNTIMETRUTH_NATS_URL", url)
	repo := upWorkdir(t)
	target := "git.repository:" + repo

	data := t.TempDir() // one machine: one signing key, pinned by its first up
	r := run(t, "up", "--nats", url, "--data-dir", data, "--interval", "1s", "--no-codex", "--once", "--approve")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)

	r = run(t, "status")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `PASS +\S+ +git.repository:`, r.stdout)

	r = run(t, "baseline", "list")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, target)

	r = run(t, "baseline", "get", target)
	require.Equal(t, 0, r.code, r.stderr)
	snap := writeFile(t, t.TempDir(), "b.json", r.stdout)
	r = run(t, "verify", snap, "--git", repo)
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)

	r = run(t, "baseline", "rm", target)
	require.Equal(t, 0, r.code, r.stderr)
	r = run(t, "baseline", "get", target)
	assert.Equal(t, 1, r.code)

	r = run(t, "baseline", "put", snap, "--protect", "git.repository.head_commit")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "STORED: "+target)
	require.NoError(t, os.WriteFile(filepath.Join(repo, "new.txt"), []byte("x"), 0o600))
	r = run(t, "up", "--nats", url, "--data-dir", data, "--interval", "1s", "--no-codex", "--once")
	assert.Equal(t, 0, r.code, "only head_commit is protected: %s", r.stdout+r.stderr)

	// Another data directory is another key under the same host name:
	// refused before anything runs, with the way out.
	r = run(t, "up", "--nats", url, "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--once")
	assert.Equal(t, 1, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "is enrolled with another signing key than this data directory's")
	assert.Contains(t, r.stderr, "runtimetruth host approve")

	cmd := exec.Command("git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x")
	require.NoError(t, cmd.Run())
	r = run(t, "up", "--nats", url, "--data-dir", data, "--interval", "1s", "--no-codex", "--once")
	assert.Equal(t, 2, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "git.repository.head_commit: ")

	r = run(t, "baseline", "approve", "nonsense")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "want KIND:IDENTIFIER")
}

func TestUpSignsWhatItApproves(t *testing.T) {
	repo := upWorkdir(t)
	dir := t.TempDir()
	key, err := attestation.GenerateKey()
	require.NoError(t, err)
	keyPEM, err := attestation.MarshalPrivateKey(key, nil)
	require.NoError(t, err)
	keyFile := writeFile(t, dir, "cosign.key", string(keyPEM))
	hint, err := attestation.KeyHint(&key.PublicKey)
	require.NoError(t, err)

	r := run(t, "up", "--data-dir", filepath.Join(dir, "data"), "--interval", "1s", "--no-codex", "--once", "--approve", "--sign-key", keyFile)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "attestor         signs with "+keyFile)
	assert.Contains(t, r.stdout, "APPROVED  git.repository:"+repo)
	assert.Regexp(t, `SIGNED  git\.repository:`+regexp.QuoteMeta(repo)+`  sha256:[0-9a-f]{64} by `+regexp.QuoteMeta(hint), r.stdout)
	assert.NotContains(t, r.stdout+r.stderr, string(keyPEM))

	r = run(t, "up", "--data-dir", filepath.Join(dir, "data"), "--no-codex", "--once", "--sign-key", filepath.Join(dir, "missing.key"))
	assert.Equal(t, 1, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stderr, "attestor")
}
