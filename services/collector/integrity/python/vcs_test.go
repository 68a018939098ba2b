package python_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
)

// A real pip install from a git repository (git+file://, offline) records
// vcs_info in direct_url.json (PEP 610): checked against its RECORD and
// shown as a local build.
//
// The project uses the tests' dependency-free backend (testdata/rtbackend.py)
// rather than setuptools: the venv's setuptools cannot build a wheel
// offline without the separate wheel package (no bdist_wheel command).
func TestVerifyVCSInstall(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	venv := newVenv(t, dir)
	src := writeProject(t, dir, project{Name: "vcspkg", Version: "0.3.0", Packages: []string{"vcspkg"},
		Files: map[string]string{"vcspkg/__init__.py": "X = 1\n", "vcspkg/util.py": "def f():\n    return 1\n"}})
	git := func(args ...string) string {
		return strings.TrimSpace(run(t, src, "git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.invalid",
			"-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"}, args...)...))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "initial")
	head := git("rev-parse", "HEAD")

	pip(t, venv, "install", "--no-index", "--no-build-isolation", "git+file://"+filepath.ToSlash(src))

	site := sitePackages(t, venv)
	raw, err := os.ReadFile(filepath.Join(site, "vcspkg-0.3.0.dist-info", "direct_url.json"))
	require.NoError(t, err)
	var du struct {
		URL     string `json:"url"`
		VCSInfo *struct {
			VCS      string `json:"vcs"`
			CommitID string `json:"commit_id"`
		} `json:"vcs_info"`
	}
	require.NoError(t, json.Unmarshal(raw, &du), "%s", raw)
	require.NotNil(t, du.VCSInfo, "direct_url.json: %s", raw)
	assert.Equal(t, "git", du.VCSInfo.VCS)
	assert.Equal(t, head, du.VCSInfo.CommitID)

	env, err := python.Open(ctx, venv, python.OpenOptions{})
	require.NoError(t, err)
	verify := func() integrity.Result {
		t.Helper()
		rep, err := python.Verify(ctx, env, python.Options{Roots: []string{"vcspkg"}})
		require.NoError(t, err)
		require.Equal(t, []string{"vcspkg"}, names(rep))
		return rep.Results[0]
	}
	r := verify()
	assert.Equal(t, integrity.SourceLocalBuild, r.Source)
	assert.Equal(t, integrity.BaselineRecord, r.Baseline)
	assert.Equal(t, integrity.StatusOK, r.Status, r.Reason)
	assert.GreaterOrEqual(t, r.Files, 2, "both modules are hashed")

	rep, err := python.Verify(ctx, env, python.Options{All: true})
	require.NoError(t, err)
	assert.Equal(t, integrity.SourceLocalBuild, results(rep)["vcspkg"].Source, "same source under --all")

	f, err := os.OpenFile(filepath.Join(site, "vcspkg", "util.py"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("import os\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	r = verify()
	assert.Equal(t, integrity.SourceLocalBuild, r.Source)
	assert.Equal(t, integrity.StatusModified, r.Status)
	assert.Equal(t, []string{"vcspkg/util.py"}, changedPaths(r))
}
