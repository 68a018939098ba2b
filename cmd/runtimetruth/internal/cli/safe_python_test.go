package cli_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// trapInterpreters replaces the venv's interpreters (bin/python,
// python3, python3.X) by scripts that create a marker file and fail, and
// returns the marker's path: it exists once anything ran one of them.
func trapInterpreters(t *testing.T, env string) string {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "interpreter-ran")
	trap := "#!/bin/sh\necho \"$@\" >> '" + marker + "'\nexit 1\n"
	pythons, err := filepath.Glob(filepath.Join(env, "bin", "python*"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pythons), 2, "python and python3 at least")
	for _, p := range pythons {
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.WriteFile(p, []byte(trap), 0o755)) //nolint:gosec // an executable trap
	}
	return marker
}

// TestPythonInterpreterNeverRuns checks that no command inspecting a
// Python environment runs the environment's interpreter (which whoever
// can write the environment controls): verify, verify --json, check and
// inspect python, over a real venv whose interpreters are traps.
func TestPythonInterpreterNeverRuns(t *testing.T) {
	env, _ := venv(t)
	marker := trapInterpreters(t, env)
	t.Setenv("RUNTIMETRUTH_STATE_DIR", t.TempDir())
	for _, args := range [][]string{
		{"integrity", "verify", "--python", env},
		{"integrity", "verify", "--python", env, "--all", "--json"},
		{"integrity", "verify", "--python", env, "pip3"},
		{"integrity", "check", "--python", env, "--runnable", "pip"},
		{"integrity", "check", "--python", env, "--runnable", "pip3"},
		{"inspect", "python", env},
		{"inspect", "python", env, "pip"},
	} {
		t.Run(strings.Join(args[:2], " "), func(t *testing.T) {
			r := run(t, args...)
			require.Equal(t, 0, r.code, "%v: %s%s", args, r.stdout, r.stderr)
			assert.Empty(t, r.stderr, "%v", args)
			_, err := os.Stat(marker)
			assert.True(t, os.IsNotExist(err), "%v ran the environment's interpreter", args)
		})
	}
}

// safeDist installs a distribution into site by hand: its files, and a
// .dist-info with METADATA (Requires-Dist requires) and a RECORD.
func safeDist(t *testing.T, site, name string, requires ...string) {
	t.Helper()
	info := name + "-1.0.dist-info"
	meta := "Metadata-Version: 2.1\nName: " + name + "\nVersion: 1.0\n"
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	var record strings.Builder
	for rel, content := range map[string]string{name + "/__init__.py": "X = 1\n", info + "/METADATA": meta} {
		p := filepath.Join(site, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		sum := sha256.Sum256([]byte(content))
		record.WriteString(rel + ",sha256=" + base64.RawURLEncoding.EncodeToString(sum[:]) + "," + strconv.Itoa(len(content)) + "\n")
	}
	record.WriteString(info + "/RECORD,,\n")
	require.NoError(t, os.WriteFile(filepath.Join(site, info, "RECORD"), []byte(record.String()), 0o644))
}

// TestPythonMarkersFromPyvenvCfg checks, over real venvs whose
// interpreters are traps, that markers are evaluated for the version
// pyvenv.cfg gives (here X.Y.4, whatever the interpreter's micro version),
// and that with pyvenv.cfg's version gone (the lib/pythonX.Y folder gives
// python_version only) a dependency whose marker needs
// python_full_version is shown as not evaluated, with why, in the table
// and the JSON report, and is not checked.
func TestPythonMarkersFromPyvenvCfg(t *testing.T) {
	env, pipInit := venv(t)
	marker := trapInterpreters(t, env)
	t.Setenv("RUNTIMETRUTH_STATE_DIR", t.TempDir())
	site := filepath.Dir(filepath.Dir(pipInit))
	mm := strings.TrimPrefix(filepath.Base(filepath.Dir(site)), "python") // 3.11
	require.Regexp(t, `^3\.[0-9]+$`, mm)
	safeDist(t, site, "app",
		`old ; python_version < "3.10"`,
		`new ; python_version >= "`+mm+`"`,
		`exact ; python_full_version == "`+mm+`.4"`,
		`posix ; os_name == "posix" and sys_platform == "linux"`)
	for _, d := range []string{"old", "new", "exact", "posix"} {
		safeDist(t, site, d)
	}
	cfgPath := filepath.Join(env, "pyvenv.cfg")
	cfg := mustRead(t, cfgPath)
	version := regexp.MustCompile(`(?m)^version\s*=.*$`)
	require.Regexp(t, version, cfg)

	t.Run("pyvenv.cfg version X.Y.4", func(t *testing.T) {
		require.NoError(t, os.WriteFile(cfgPath, []byte(version.ReplaceAllString(cfg, "version = "+mm+".4")), 0o644))
		r := run(t, "integrity", "verify", "--python", env, "app", "--json")
		require.Equal(t, 0, r.code, r.stdout+r.stderr)
		var rep jsonReport
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
		var names []string
		for _, res := range rep.Results {
			assert.Equal(t, "ok", res.Status, res.Name)
			names = append(names, res.Name)
		}
		assert.Equal(t, []string{"app", "new", "exact", "posix"}, names, `old (python_version < "3.10") is out of scope`)
	})

	t.Run("no version in pyvenv.cfg", func(t *testing.T) {
		require.NoError(t, os.WriteFile(cfgPath, []byte(version.ReplaceAllString(cfg, "")), 0o644))
		why := `not evaluated: app requires it if python_full_version == "` + mm + `.4", and ` +
			`python_full_version is unknown (only the lib/python` + mm + ` folder gives the version, not its micro version)`
		r := run(t, "integrity", "verify", "--python", env, "app")
		require.Equal(t, 0, r.code, r.stdout+r.stderr)
		assert.Regexp(t, `(?m)^  exact +1\.0 +index +skipped +`+regexp.QuoteMeta(why)+`$`, r.stdout)
		assert.Regexp(t, `(?m)^  new +1\.0 +index +ok +2 files$`, r.stdout)
		assert.Contains(t, r.stdout, "✓  4 checked, 0 modified, 0 error, 1 skipped")

		r = run(t, "integrity", "verify", "--python", env, "app", "--json")
		require.Equal(t, 0, r.code, r.stdout+r.stderr)
		var rep struct {
			Results []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
				Reason string `json:"reason"`
				Files  int    `json:"files"`
			} `json:"results"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
		require.Len(t, rep.Results, 4)
		exact := rep.Results[2]
		assert.Equal(t, "exact", exact.Name)
		assert.Equal(t, "skipped", exact.Status)
		assert.Equal(t, why, exact.Reason)
		assert.Zero(t, exact.Files)

		r = run(t, "inspect", "python", env, "app")
		require.Equal(t, 0, r.code, r.stdout+r.stderr)
		assert.Contains(t, r.stdout, `"dist:exact:status":"skipped"`)
	})
	_, err := os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "the environment's interpreter ran")
}
