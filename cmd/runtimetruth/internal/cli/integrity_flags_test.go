package cli_test

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeWheel writes a minimal pure-Python wheel (with a correct RECORD)
// of NAME 1.0 into dir and returns its path.
func writeWheel(t *testing.T, dir, name string) string {
	t.Helper()
	info := name + "-1.0.dist-info/"
	files := [][2]string{
		{name + "/__init__.py", "VALUE = 1\n"},
		{info + "METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n"},
		{info + "WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	record.WriteString(info + "RECORD,,\n")
	files = append(files, [2]string{info + "RECORD", record.String()})
	path := filepath.Join(dir, name+"-1.0-py3-none-any.whl")
	out, err := os.Create(path)
	require.NoError(t, err)
	zw := zip.NewWriter(out)
	for _, f := range files {
		w, err := zw.Create(f[0])
		require.NoError(t, err)
		_, err = w.Write([]byte(f[1]))
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	require.NoError(t, out.Close())
	return path
}

// jsonReport is the part of the integrity verify --json document the
// tests read.
type jsonReport struct {
	ReportSchemaVersion int  `json:"report_schema_version"`
	Full                bool `json:"full"`
	Hashed              int  `json:"hashed"`
	Cached              int  `json:"cached"`
	Results             []struct {
		Name          string `json:"name"`
		Source        string `json:"source"`
		Status        string `json:"status"`
		SnapshotTaken bool   `json:"snapshot_taken"`
		Changes       []struct {
			Path string `json:"path"`
		} `json:"changes"`
	} `json:"results"`
}

// verifyJSON runs integrity verify --json and decodes its report.
func verifyJSON(t *testing.T, wantCode int, args ...string) jsonReport {
	t.Helper()
	r := run(t, append(append([]string{"integrity", "verify"}, args...), "--json")...)
	require.Equal(t, wantCode, r.code, r.stdout+r.stderr)
	var rep jsonReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.Equal(t, 1, rep.ReportSchemaVersion)
	return rep
}

// --all lists every distribution of the environment; without it only the
// distributions that install a console script are checked.
func TestIntegrityVerifyAllFlag(t *testing.T) {
	env, _ := venv(t)
	t.Setenv("RUNTIMETRUTH_STATE_DIR", t.TempDir())
	whl := writeWheel(t, t.TempDir(), "localpkg")
	out, err := exec.Command(filepath.Join(env, "bin", "python"), "-m", "pip", "install", "--no-index", "--disable-pip-version-check", whl).CombinedOutput()
	require.NoError(t, err, "%s", out)
	setuptools, err := filepath.Glob(filepath.Join(env, "lib", "python3*", "site-packages", "setuptools-*.dist-info"))
	require.NoError(t, err)

	r := run(t, "integrity", "verify", "--python", env)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Regexp(t, `(?m)^  pip +\S+ +index +ok +\d+ files$`, r.stdout)
	assert.NotContains(t, r.stdout, "localpkg", "no console script: not a runnable")
	assert.NotContains(t, r.stdout, "setuptools")

	r = run(t, "integrity", "verify", "--python", env, "--all")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Regexp(t, `(?m)^  pip +\S+ +index +ok +\d+ files$`, r.stdout)
	assert.Regexp(t, `(?m)^  localpkg +1\.0 +local build +ok +\d+ files$`, r.stdout)
	if len(setuptools) > 0 { // python3 -m venv installs it up to Python 3.11
		assert.Regexp(t, `(?m)^  setuptools +\S+ +index +ok +\d+ files$`, r.stdout)
	}

	rep := verifyJSON(t, 0, "--python", env, "--all")
	got := map[string]string{}
	for _, res := range rep.Results {
		got[res.Name] = res.Source + "/" + res.Status
	}
	want := map[string]string{"pip": "index/ok", "localpkg": "local build/ok"}
	if len(setuptools) > 0 {
		want["setuptools"] = "index/ok"
	}
	assert.Equal(t, want, got)
}

// --no-cache re-hashes every file instead of trusting the stat cache; the
// JSON report's cache counters show it. A same-size edit with the mtime
// put back is caught either way (the stat key includes ctime).
func TestIntegrityVerifyNoCacheFlag(t *testing.T) {
	env, pipInit := venv(t)
	t.Setenv("RUNTIMETRUTH_STATE_DIR", t.TempDir())

	first := verifyJSON(t, 0, "--python", env, "pip")
	assert.True(t, first.Full, "the first check has no cache")
	assert.Positive(t, first.Hashed)
	assert.Zero(t, first.Cached)

	cached := verifyJSON(t, 0, "--python", env, "pip")
	assert.False(t, cached.Full)
	assert.Zero(t, cached.Hashed, "nothing changed: every file from the cache")
	assert.Equal(t, first.Hashed, cached.Cached)

	full := verifyJSON(t, 0, "--python", env, "pip", "--no-cache")
	assert.True(t, full.Full)
	assert.Zero(t, full.Cached)
	assert.Equal(t, first.Hashed, full.Hashed, "every file hashed again")

	// Same size, mtime restored.
	fi, err := os.Stat(pipInit)
	require.NoError(t, err)
	data := mustRead(t, pipInit)
	i := strings.Index(data, "__version__")
	require.GreaterOrEqual(t, i, 0)
	edited := data[:i] + "__VERSION__" + data[i+len("__version__"):]
	require.NoError(t, os.WriteFile(pipInit, []byte(edited), 0o644))
	require.NoError(t, os.Chtimes(pipInit, fi.ModTime(), fi.ModTime()))

	for _, extra := range [][]string{nil, {"--no-cache"}} {
		rep := verifyJSON(t, 2, append([]string{"--python", env, "pip"}, extra...)...)
		require.Len(t, rep.Results, 1)
		assert.Equal(t, "modified", rep.Results[0].Status, "%v", extra)
		require.Len(t, rep.Results[0].Changes, 1)
		assert.Equal(t, "pip/__init__.py", rep.Results[0].Changes[0].Path)
		if extra != nil {
			assert.True(t, rep.Full)
			assert.Zero(t, rep.Cached)
		} else {
			assert.False(t, rep.Full)
			assert.Positive(t, rep.Cached)
			assert.Positive(t, rep.Hashed, "the edited file is hashed again")
		}
	}
}

// --snapshot retakes the Node first-run snapshot: after it the edited
// state is the known-good one.
func TestIntegrityNodeSnapshotFlag(t *testing.T) {
	project := t.TempDir()
	writeFile(t, project, "package.json", `{"name":"snapproj","version":"1.2.3"}`)
	writeFile(t, project, "index.js", "console.log('hi')\n")
	t.Setenv("RUNTIMETRUTH_STATE_DIR", t.TempDir())

	rep := verifyJSON(t, 0, "--node", project, "--snapshot")
	require.Len(t, rep.Results, 1)
	assert.Equal(t, "ok", rep.Results[0].Status)
	assert.True(t, rep.Results[0].SnapshotTaken)

	r := run(t, "integrity", "verify", "--node", project)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "snapproj")

	editNodeFile(t, project, "index.js", "console.log('edited on purpose')\n")

	rep = verifyJSON(t, 0, "--node", project, "--snapshot")
	require.Len(t, rep.Results, 1)
	assert.Equal(t, "ok", rep.Results[0].Status)
	assert.True(t, rep.Results[0].SnapshotTaken)
	assert.Empty(t, rep.Results[0].Changes)

	r = run(t, "integrity", "verify", "--node", project)
	assert.Equal(t, 0, r.code, "the retaken snapshot holds: %s", r.stdout+r.stderr)
	rep = verifyJSON(t, 0, "--node", project)
	assert.False(t, rep.Results[0].SnapshotTaken)

	writeFile(t, project, "index.js", "console.log('hi')\n")
	r = run(t, "integrity", "verify", "--node", project)
	assert.Equal(t, 2, r.code, "the original content now differs from the retaken snapshot: %s", r.stdout)
}
