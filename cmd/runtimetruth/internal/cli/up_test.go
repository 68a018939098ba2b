package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events/natstest"
)

func TestUpOnceApprovesThenDetectsDrift(t *testing.T) {
	repo := gitRepo(t)
	t.Chdir(repo)
	t.Setenv("VIRTUAL_ENV", "")
	data := t.TempDir()
	args := []string{"up", "--data-dir", data, "--interval", "1s", "--no-codex", "--once"}

	r := run(t, append(args, "--approve")...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "watching git     "+repo)
	assert.Contains(t, r.stdout, "APPROVED  git.repository:"+repo)
	assert.Contains(t, r.stdout, "PASS   git.repository:"+repo)
	assert.NoFileExists(t, filepath.Join(data, "nats.url"), "the URL file goes with the server")

	// The baseline persists in the data directory's JetStream store.
	require.NoError(t, os.WriteFile(filepath.Join(repo, "new.txt"), []byte("x"), 0o600))
	r = run(t, args...)
	assert.Equal(t, 2, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "DRIFT  git.repository:"+repo)
	assert.Contains(t, r.stdout, "git.repository.dirty: false -> true")
}

func TestUpFirstRunExplainsApproval(t *testing.T) {
	repo := gitRepo(t)
	t.Chdir(repo)
	t.Setenv("VIRTUAL_ENV", "")
	r := run(t, "up", "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--once")
	assert.Equal(t, 1, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "NO BASELINE  git.repository:"+repo)
	assert.Contains(t, r.stdout, "runtimetruth baseline approve 'git.repository:"+repo+"'")
}

func TestBaselineAndStatusAgainstExternalNATS(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	t.Setenv("RUNTIMETRUTH_NATS_URL", url)
	repo := gitRepo(t)
	t.Chdir(repo)
	t.Setenv("VIRTUAL_ENV", "")
	target := "git.repository:" + repo

	r := run(t, "up", "--nats", url, "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--once", "--approve")
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
	r = run(t, "up", "--nats", url, "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--once")
	assert.Equal(t, 0, r.code, "only head_commit is protected: %s", r.stdout+r.stderr)

	cmd := exec.Command("git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "x")
	require.NoError(t, cmd.Run())
	r = run(t, "up", "--nats", url, "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--once")
	assert.Equal(t, 2, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "git.repository.head_commit: ")

	r = run(t, "baseline", "approve", "nonsense")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "want KIND:IDENTIFIER")
}
