package cli_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
)

// venv makes a real virtual environment (with ensurepip's pip) and returns
// it with the path of one of pip's installed files.
func venv(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "venv")
	out, err := exec.Command("python3", "-m", "venv", dir).CombinedOutput()
	require.NoError(t, err, "python3 -m venv (install python3-venv): %s", out)
	files, err := filepath.Glob(filepath.Join(dir, "lib", "python3*", "site-packages", "pip", "__init__.py"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	return dir, files[0]
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func auditLinks(t *testing.T, state string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(state, "audit.jsonl"))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	rep, err := chain.Run(context.Background(), chain.NewHasher(nil), nil, chain.Lines(bytes.NewReader(data), ""))
	require.NoError(t, err)
	require.Nil(t, rep.Broken)
	return rep.Links
}

// editNodeFile writes content to the file name of the Node project and
// checks that integrity verify reports it changed (exit 2); it returns
// that run.
func editNodeFile(t *testing.T, project, name, content string) result {
	t.Helper()
	writeFile(t, project, name, content)
	r := run(t, "integrity", "verify", "--node", project)
	assert.Equal(t, 2, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "changed  "+name)
	return r
}

func TestIntegrityPython(t *testing.T) {
	env, pipInit := venv(t)
	state := t.TempDir()
	t.Setenv("RUNTIMETRUTH_STATE_DIR", state)

	r := run(t, "integrity", "verify", "--python", env)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, `^  pip +\S+ +index +ok +\d+ files\n`, r.stdout)

	r = run(t, "integrity", "verify", "--python", env, "pip3")
	require.Equal(t, 0, r.code, "a console script names the distribution that provides it: %s", r.stderr)
	assert.Regexp(t, `^  pip +\S+ +index +ok +\d+ files\n`, r.stdout)
	r = run(t, "integrity", "verify", "--python", env, "no-such-thing")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no-such-thing")

	baseline := writeFile(t, t.TempDir(), "py.json", run(t, "inspect", "python", env, "pip").stdout)
	r = run(t, "verify", baseline, "--python", env)
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)

	clean := mustRead(t, pipInit)
	appendTo(t, pipInit, "\n# hot fix on the box\n")
	editA := mustRead(t, pipInit)
	r = run(t, "integrity", "verify", "--python", env, "pip")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Regexp(t, `  pip +\S+ +index +modified +1 of \d+ files changed\n      changed  pip/__init__.py\n`, r.stdout)
	assert.Contains(t, r.stdout, "✗  1 distribution(s) modified since install.")

	r = run(t, "integrity", "verify", "--python", env, "--json")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stdout, `"report_schema_version":1`)
	assert.Contains(t, r.stdout, `"path":"pip/__init__.py"`)

	r = run(t, "verify", baseline, "--python", env)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stdout, "PYTHON DISTRIBUTIONS\n")
	assert.Contains(t, r.stdout, "dist:pip:status: ok -> modified")

	t.Run("check warns every run and records once per change", func(t *testing.T) {
		for range 2 {
			r := run(t, "integrity", "check", "--python", env, "--runnable", "pip")
			assert.Equal(t, 0, r.code)
			assert.Empty(t, r.stdout)
			assert.Regexp(t, `^⚠  pip: 1 installed file differs from the package \(pip \S+\): pip/__init__.py\. This run is recorded as modified\.`, r.stderr)
		}
		assert.Equal(t, 1, auditLinks(t, state))
		appendTo(t, pipInit, "# a further edit\n")
		r := run(t, "integrity", "check", "--python", env, "--runnable", "pip")
		assert.Equal(t, 0, r.code)
		assert.Equal(t, 2, auditLinks(t, state), "a further edit is a new event")
		data, err := os.ReadFile(filepath.Join(state, "audit.jsonl"))
		require.NoError(t, err)
		assert.Contains(t, string(data), `"type":"dev.runtimetruth.runnable.modified.v1"`)

		// A → B → A: the return to A differs from the last change reported.
		require.NoError(t, os.WriteFile(pipInit, []byte(editA), 0o644))
		r = run(t, "integrity", "check", "--python", env, "--runnable", "pip3")
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.stderr, "⚠  pip3: 1 installed file differs from the package (pip ")
		assert.Equal(t, 3, auditLinks(t, state), "a change back to an earlier edit is a new event")
		// Clean, then the same edit again: reported again.
		require.NoError(t, os.WriteFile(pipInit, []byte(clean), 0o644))
		r = run(t, "integrity", "check", "--python", env, "--runnable", "pip")
		assert.Equal(t, 0, r.code)
		assert.Empty(t, r.stderr)
		assert.Equal(t, 3, auditLinks(t, state))
		require.NoError(t, os.WriteFile(pipInit, []byte(editA), 0o644))
		run(t, "integrity", "check", "--python", env, "--runnable", "pip")
		run(t, "integrity", "check", "--python", env, "--runnable", "pip")
		assert.Equal(t, 4, auditLinks(t, state), "the same edit after a clean check is reported once more")

		t.Setenv("RUNTIMETRUTH_INTEGRITY", "off")
		r = run(t, "integrity", "check", "--python", env, "--runnable", "pip")
		assert.Equal(t, 0, r.code)
		assert.Empty(t, r.stderr)
	})

	t.Run("expected changes from the policy", func(t *testing.T) {
		pol := writeFile(t, t.TempDir(), "p.toml", "version = 1\n[[expected]]\npackage = \"pip\"\npath = \"pip/__init__.py\"\nreason = \"patched proxy support\"\n")
		r := run(t, "integrity", "verify", "--python", env, "pip", "--policy", pol)
		assert.Equal(t, 0, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, "modified (expected: patched proxy support) pip/__init__.py")
	})

	t.Run("check never blocks", func(t *testing.T) {
		r := run(t, "integrity", "check", "--python", filepath.Join(env, "nope"), "--runnable", "pip")
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.stderr, "runtimetruth: warning: integrity check of pip failed")
	})
}

// The hook warns about distributions it cannot check (here a RECORD path
// escaping the environment) and still lets the run go ahead; verify marks
// them as errors, never with a tick.
func TestIntegrityUncheckable(t *testing.T) {
	env, pipInit := venv(t)
	t.Setenv("RUNTIMETRUTH_STATE_DIR", t.TempDir())
	records, err := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(pipInit)), "pip-*.dist-info", "RECORD"))
	require.NoError(t, err)
	require.Len(t, records, 1)
	appendTo(t, records[0], "../../../../../../etc/hostname,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n")

	r := run(t, "integrity", "check", "--python", env, "--runnable", "pip")
	assert.Equal(t, 0, r.code)
	assert.Empty(t, r.stdout)
	assert.Regexp(t, `^⚠  pip: 1 installed package could not be checked \(pip \S+: .*escapes the environment.*\)\. The run goes ahead`, r.stderr)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %s", r.stderr)

	r = run(t, "integrity", "verify", "--python", env, "pip")
	assert.Equal(t, 1, r.code)
	assert.Regexp(t, `  pip +\S+ +index +error +`, r.stdout)
	assert.Contains(t, r.stdout, "✗  1 distribution(s) could not be checked: 1 checked, 0 modified, 1 error, 0 skipped\n")
	assert.NotContains(t, r.stdout, "✓")
}

// A package.json without a version still yields a warning without an empty
// version and a runnable.modified event.
func TestIntegrityNodeUnversioned(t *testing.T) {
	project := t.TempDir()
	writeFile(t, project, "package.json", `{"name":"proj"}`)
	writeFile(t, project, "index.js", "console.log('hi')\n")
	state := t.TempDir()
	t.Setenv("RUNTIMETRUTH_STATE_DIR", state)
	r := run(t, "integrity", "check", "--node", project, "--runnable", "proj")
	require.Equal(t, 0, r.code)
	require.Empty(t, r.stderr, "the first check takes the snapshot")
	writeFile(t, project, "index.js", "console.log('pwned')\n")
	for range 2 {
		r = run(t, "integrity", "check", "--node", project, "--runnable", "proj")
		assert.Equal(t, 0, r.code)
		assert.Equal(t, "⚠  proj: 1 installed file differs from the package (proj): index.js. This run is recorded as modified. Reinstall the package to restore it; \"runtimetruth integrity verify\" lists the changes.\n", r.stderr)
	}
	assert.Equal(t, 1, auditLinks(t, state))
	assert.Contains(t, mustRead(t, filepath.Join(state, "audit.jsonl")), `"version":"unversioned"`)
}

func TestIntegrityNodeManifest(t *testing.T) {
	project := t.TempDir()
	writeFile(t, project, "package.json", `{"name":"mytools","version":"1.0.0","files":["greet.js","runtimetruth-files.json"]}`)
	writeFile(t, project, "greet.js", "console.log('hi')\n")
	writeFile(t, project, "notes.txt", "not published\n")
	r := run(t, "manifest", project)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "runtimetruth-files.json (2 files)")
	manifest := mustRead(t, filepath.Join(project, "runtimetruth-files.json"))
	assert.Contains(t, manifest, `"greet.js": "sha256:`)
	assert.Contains(t, manifest, `"package.json": "sha256:`)
	assert.NotContains(t, manifest, "notes.txt", "npm pack would not publish it")
	require.NoError(t, os.Remove(filepath.Join(project, "notes.txt")))

	t.Setenv("RUNTIMETRUTH_STATE_DIR", t.TempDir())
	r = run(t, "integrity", "verify", "--node", project)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "mytools")
	r = editNodeFile(t, project, "greet.js", "console.log('pwned')\n")
	assert.Contains(t, r.stdout, "package(s) modified since install")
	writeFile(t, project, "dropped.js", "require('child_process')\n")
	r = run(t, "integrity", "verify", "--node", project)
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stdout, "added    dropped.js")
}

func TestIntegrityUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"integrity", "verify"},
		{"integrity", "verify", "--python", "a", "--node", "b"},
		{"integrity", "check", "--python", "a"},
	} {
		r := run(t, args...)
		if strings.Contains(strings.Join(args, " "), "check") {
			assert.Equal(t, 1, r.code, "a missing --runnable is a usage error: %v", args)
		} else {
			assert.Equal(t, 1, r.code, "%v", args)
		}
		assert.True(t, strings.HasPrefix(r.stderr, "runtimetruth: error: "), r.stderr)
	}
}
