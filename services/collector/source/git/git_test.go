package git_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/gittest"
	"github.com/runtimetruth/runtimetruth/services/collector/source/git"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func repoRecord(t *testing.T, records []snapshot.Record) snapshot.Record {
	t.Helper()
	require.Len(t, records, 2)
	r := records[0]
	assert.Equal(t, snapshot.Live, r.Plane)
	assert.Equal(t, "git.repository", r.Kind)
	assert.Equal(t, snapshot.Source{Collector: "git", Method: "git rev-parse/status"}, r.Source)
	return r
}

// collectRepository collects path, which must succeed, and returns the
// git.repository record (checked by repoRecord).
func collectRepository(t *testing.T, path string) snapshot.Record {
	t.Helper()
	records, err := git.Collect(context.Background(), path)
	require.NoError(t, err)
	return repoRecord(t, records)
}

// writing is a setup that writes name into the work tree, which it
// returns as the path to collect.
func writing(name, content string) func(t *testing.T, dir string) string {
	return func(t *testing.T, dir string) string {
		gittest.WriteFile(t, dir, name, content)
		return dir
	}
}

func TestCollectRepositoryState(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir string) (path string)
		branch   snapshot.Value
		detached bool
		dirty    bool
	}{
		{
			name:   "clean on a branch",
			setup:  func(_ *testing.T, dir string) string { return dir },
			branch: snapshot.String("main"),
		},
		{
			name: "path inside a subdirectory",
			setup: func(t *testing.T, dir string) string {
				gittest.WriteFile(t, dir, "sub/dir/file.txt", "x\n")
				gittest.Commit(t, dir, "sub")
				return filepath.Join(dir, "sub", "dir")
			},
			branch: snapshot.String("main"),
		},
		{
			name: "other branch",
			setup: func(t *testing.T, dir string) string {
				gittest.Git(t, dir, "checkout", "--quiet", "-b", "feature/x")
				return dir
			},
			branch: snapshot.String("feature/x"),
		},
		{
			name:   "untracked file is dirty",
			setup:  writing("untracked.txt", "new\n"),
			branch: snapshot.String("main"),
			dirty:  true,
		},
		{
			name:   "modified tracked file is dirty",
			setup:  writing("README.md", "changed\n"),
			branch: snapshot.String("main"),
			dirty:  true,
		},
		{
			name: "ignored file is clean",
			setup: func(t *testing.T, dir string) string {
				gittest.WriteFile(t, dir, ".gitignore", "*.log\n")
				gittest.Commit(t, dir, "ignore logs")
				gittest.WriteFile(t, dir, "debug.log", "noise\n")
				return dir
			},
			branch: snapshot.String("main"),
		},
		{
			name: "detached head",
			setup: func(t *testing.T, dir string) string {
				gittest.Git(t, dir, "checkout", "--quiet", "--detach")
				return dir
			},
			branch:   snapshot.Null(),
			detached: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := gittest.New(t)
			path := tc.setup(t, dir)
			head := gittest.Git(t, dir, "rev-parse", "HEAD")

			r := collectRepository(t, path)
			assert.Equal(t, snapshot.Data{
				"repository_root": snapshot.String(dir),
				"head_commit":     snapshot.String(head),
				"branch":          tc.branch,
				"detached":        snapshot.Bool(tc.detached),
				"dirty":           snapshot.Bool(tc.dirty),
			}, r.Data, "exactly RuntimeTruth's keys")
		})
	}
}

func TestCollectDoesNotTouchTheIndex(t *testing.T) {
	dir := gittest.New(t)
	index := filepath.Join(dir, ".git", "index")
	before, err := os.Stat(index)
	require.NoError(t, err)
	// Make the index stat data stale so a locking status would rewrite it.
	require.NoError(t, os.Chtimes(filepath.Join(dir, "README.md"), before.ModTime(), before.ModTime().Add(3600e9)))

	_, err = git.Collect(context.Background(), dir)
	require.NoError(t, err)
	after, err := os.Stat(index)
	require.NoError(t, err)
	assert.Equal(t, before.ModTime(), after.ModTime(), "GIT_OPTIONAL_LOCKS=0 keeps the index as it was")
	_, err = os.Stat(index + ".lock")
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestCollectDoesNotRunFSMonitor(t *testing.T) {
	dir := gittest.New(t)
	marker := filepath.Join(t.TempDir(), "fsmonitor-ran")
	hook := filepath.Join(t.TempDir(), "fsmonitor.sh")
	require.NoError(t, os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))
	gittest.Git(t, dir, "config", "core.fsmonitor", hook)

	_, err := git.Collect(context.Background(), dir)
	require.NoError(t, err)
	assert.NoFileExists(t, marker)
}

func TestCollectIgnoresRepositoryEnvironment(t *testing.T) {
	dir := gittest.New(t)
	other := gittest.New(t)
	gittest.Git(t, other, "checkout", "--quiet", "-b", "other")
	t.Setenv("GIT_DIR", filepath.Join(other, ".git"))
	t.Setenv("GIT_WORK_TREE", other)

	r := collectRepository(t, dir)
	assert.Equal(t, snapshot.String(dir), r.Data["repository_root"])
	assert.Equal(t, snapshot.String("main"), r.Data["branch"])
}

func TestCollectErrors(t *testing.T) {
	tests := []struct {
		name      string
		collector git.Collector
		path      func(t *testing.T) string
		wantErr   error
		wantMsg   string
	}{
		{
			name:    "not a repository",
			path:    func(t *testing.T) string { return t.TempDir() },
			wantErr: git.ErrNotRepository,
			wantMsg: "not inside a git work tree",
		},
		{
			name:    "inside the .git directory",
			path:    func(t *testing.T) string { return filepath.Join(gittest.New(t), ".git") },
			wantErr: git.ErrNotRepository,
		},
		{
			name:    "no commits yet",
			path:    func(t *testing.T) string { return gittest.Init(t) },
			wantErr: git.ErrNoCommits,
			wantMsg: "repository has no commits yet",
		},
		{
			name:    "missing path",
			path:    func(t *testing.T) string { return filepath.Join(t.TempDir(), "gone") },
			wantErr: fs.ErrNotExist,
		},
		{
			name: "file path",
			path: func(t *testing.T) string {
				dir := gittest.New(t)
				return filepath.Join(dir, "README.md")
			},
			wantMsg: "not a directory",
		},
		{
			name:      "git missing",
			collector: git.Collector{Binary: "/nonexistent/bin/git"},
			path:      func(t *testing.T) string { return gittest.New(t) },
			wantErr:   git.ErrGitNotFound,
			wantMsg:   "git executable not found",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			records, err := tc.collector.Collect(context.Background(), path)
			require.Error(t, err)
			assert.Nil(t, records)
			assert.Contains(t, err.Error(), "collect git "+path+": ")
			if tc.wantErr != nil {
				assert.ErrorIs(t, err, tc.wantErr)
			}
			if tc.wantMsg != "" {
				assert.Contains(t, err.Error(), tc.wantMsg)
			}
		})
	}
}

func TestCollectGitNotInPath(t *testing.T) {
	dir := gittest.New(t)
	t.Setenv("PATH", t.TempDir())
	_, err := git.Collect(context.Background(), dir)
	require.ErrorIs(t, err, git.ErrGitNotFound)
}

func TestCollectRefusesRepositoryOwnedByAnotherUser(t *testing.T) {
	dir := gittest.New(t)
	gittest.GiveToAnotherUser(t, dir)

	_, err := git.Collect(context.Background(), dir)
	require.ErrorIs(t, err, git.ErrDubiousOwnership)
	assert.NotErrorIs(t, err, git.ErrNotRepository)
}

func TestCollectRemotes(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  snapshot.Data
	}{
		{
			name:  "no remotes",
			setup: func(*testing.T, string) {},
			want:  snapshot.Data{"remote_count": snapshot.Int(0)},
		},
		{
			name: "credentials stripped",
			setup: func(t *testing.T, dir string) {
				gittest.Git(t, dir, "remote", "add", "origin", "https://deploy:ghp_SECRET@github.com/org/agent.git")
				gittest.Git(t, dir, "remote", "add", "mirror", "git@gitlab.example.com:org/agent.git")
				gittest.Git(t, dir, "remote", "add", "signed", "https://cdn.example.com/agent.git?X-Amz-Signature=SECRET")
			},
			want: snapshot.Data{
				"remote_count":  snapshot.Int(3),
				"remote:origin": snapshot.String("https://github.com/org/agent.git"),
				"remote:mirror": snapshot.String("git@gitlab.example.com:org/agent.git"),
				"remote:signed": snapshot.String("https://cdn.example.com/agent.git"),
			},
		},
		{
			name: "dotted name and several urls",
			setup: func(t *testing.T, dir string) {
				gittest.Git(t, dir, "config", "remote.my.Fork.url", "/srv/fork.git")
				gittest.Git(t, dir, "config", "--add", "remote.my.Fork.url", "https://tok@host/fork.git")
			},
			want: snapshot.Data{
				"remote_count":   snapshot.Int(1),
				"remote:my.Fork": snapshot.String(`["/srv/fork.git","https://host/fork.git"]`),
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := gittest.New(t)
			tc.setup(t, dir)
			records, err := git.Collect(context.Background(), dir)
			require.NoError(t, err)
			require.Len(t, records, 2)
			r := records[1]
			assert.Equal(t, snapshot.Live, r.Plane)
			assert.Equal(t, "git.remotes", r.Kind)
			assert.Equal(t, snapshot.Source{Collector: "git", Method: "git config remote.*.url"}, r.Source)
			assert.Equal(t, tc.want, r.Data)
			for k, v := range r.Data {
				assert.NotContains(t, v.String(), "SECRET", k)
			}
		})
	}
}
