package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
)

// runBounded is run with a context that ends before the test's deadline,
// so a command that never returns fails the test instead of hanging it;
// it reports whether the command returned on its own.
func runBounded(t *testing.T, args ...string) (result, bool) {
	t.Helper()
	limit := time.Minute
	if d, ok := t.Deadline(); ok {
		limit = min(limit, time.Until(d)-10*time.Second)
	}
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	var out, errb bytes.Buffer
	code := cli.Run(ctx, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, "test", args)
	return result{code: code, stdout: out.String(), stderr: errb.String()}, ctx.Err() == nil
}

// emptyRepo is a git repository with no commit.
func emptyRepo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	out, err := exec.Command("git", "-C", dir, "init", "-q", "-b", "main").CombinedOutput()
	require.NoError(t, err, string(out))
	return dir
}

// TestUpOnceExitsOnFailedCollection: a target whose collection fails has
// no verdict; its collection.failed event is its outcome, so --once ends
// and exits 1 with the error instead of waiting for a verdict.
func TestUpOnceExitsOnFailedCollection(t *testing.T) {
	tests := []struct {
		name    string
		setup   func(t *testing.T) (dir, venv string)
		approve bool
		// wantErr is in the error up exits with; wantOut are in stdout.
		wantErr []string
		wantOut func(dir, venv string) []string
	}{
		{
			name:    "repository without commits",
			setup:   func(t *testing.T) (string, string) { return emptyRepo(t), "" },
			wantErr: []string{"collection of git.repository:", "repository has no commits yet"},
			wantOut: func(dir, _ string) []string {
				return []string{"ERROR  git.repository:" + dir + "  collection failed"}
			},
		},
		{
			name: "missing python environment",
			setup: func(t *testing.T) (string, string) {
				return t.TempDir(), filepath.Join(t.TempDir(), "no-venv")
			},
			wantErr: []string{"collection of python.environment:", "no such file or directory"},
			wantOut: func(_, venv string) []string {
				return []string{"ERROR  python.environment:" + venv + "  collection failed (not_found)"}
			},
		},
		{
			name: "one target verified, one failing",
			setup: func(t *testing.T) (string, string) {
				return gitRepo(t), filepath.Join(t.TempDir(), "no-venv")
			},
			approve: true,
			wantErr: []string{"collection of python.environment:"},
			wantOut: func(dir, venv string) []string {
				return []string{
					"APPROVED  git.repository:" + dir,
					"PASS   git.repository:" + dir,
					"ERROR  python.environment:" + venv + "  collection failed",
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir, venv := tc.setup(t)
			t.Chdir(dir)
			t.Setenv("VIRTUAL_ENV", venv)
			args := []string{"up", "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--once"}
			if tc.approve {
				args = append(args, "--approve")
			}

			r, returned := runBounded(t, args...)
			require.True(t, returned, "up --once did not return before the test deadline:\n%s%s", r.stdout, r.stderr)
			assert.Equal(t, 1, r.code, r.stdout+r.stderr)
			for _, want := range tc.wantErr {
				assert.Contains(t, r.stderr, want)
			}
			assert.Contains(t, r.stderr, "runtimetruth: error: collection of ")
			for _, want := range tc.wantOut(dir, venv) {
				assert.Contains(t, r.stdout, want)
			}
		})
	}
}

// TestUpAsRootLeavesCodexOut: make run on a fresh machine runs up as root
// in a directory root owns. The Codex probe never runs as root, so up
// leaves Codex out, says why, and verifies the rest: a codex on PATH is
// never started and --once exits 0.
func TestUpAsRootLeavesCodexOut(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("up leaves Codex out only when it runs as root (TestCodexRunAs covers the rule)")
	}
	bin := t.TempDir()
	ran := filepath.Join(t.TempDir(), "codex-ran")
	require.NoError(t, os.WriteFile(filepath.Join(bin, "codex"), []byte("#!/bin/sh\ntouch "+ran+"\nexit 1\n"), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("SUDO_USER", "")
	t.Setenv("VIRTUAL_ENV", "")
	t.Setenv("PYTHONHOME", "")
	dir := gitRepo(t)
	t.Chdir(dir)

	r, returned := runBounded(t, "up", "--data-dir", t.TempDir(), "--interval", "1s", "--once", "--approve")
	require.True(t, returned, "up --once did not return:\n%s%s", r.stdout, r.stderr)
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "not watching     codex   up runs as root in a directory root owns")
	assert.Contains(t, r.stdout, "PASS   git.repository:")
	assert.NotContains(t, r.stdout, "codex.")
	assert.NoFileExists(t, ran, "the Codex probe ran as root")
}
