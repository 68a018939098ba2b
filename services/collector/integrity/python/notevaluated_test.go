package python_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
)

// writeDist installs a distribution by hand, as pip would leave it: its
// files under site, and a .dist-info with METADATA (Requires-Dist
// requires) and a RECORD listing every file with its hash and size.
func writeDist(t testing.TB, site, name, version string, requires []string, files map[string]string) string {
	t.Helper()
	info := filepath.Join(site, name+"-"+version+".dist-info")
	require.NoError(t, os.MkdirAll(info, 0o755))
	meta := "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"
	for _, r := range requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	var record strings.Builder
	write := func(rel, content string) {
		p := filepath.Join(site, filepath.FromSlash(rel))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		record.WriteString(rel + "," + recordHash([]byte(content)) + "," + strconv.Itoa(len(content)) + "\n")
	}
	write(filepath.Base(info)+"/METADATA", meta)
	for rel, content := range files {
		write(rel, content)
	}
	record.WriteString(filepath.Base(info) + "/RECORD,,\n")
	require.NoError(t, os.WriteFile(filepath.Join(info, "RECORD"), []byte(record.String()), 0o644))
	return info
}

func TestMarkersWithUnknownVariables(t *testing.T) {
	// Linux, with no Python version known.
	env := python.Environment{"os_name": "posix", "sys_platform": "linux", "implementation_name": "cpython", "extra": ""}
	for _, tc := range []struct {
		marker  string
		want    bool
		unknown string // the variables named, "" when the marker is evaluated
	}{
		{marker: `sys_platform == "linux"`, want: true},
		{marker: `python_version < "3.10"`, unknown: "python_version"},
		{marker: `python_full_version >= "3.11.2" and python_version < "4"`, unknown: "python_full_version, python_version"},
		{marker: `"3.8" <= python_version`, unknown: "python_version"},
		{marker: `python_version < "3" or sys_platform == "linux"`, want: true},
		{marker: `sys_platform == "linux" or python_version < "3"`, want: true},
		{marker: `python_version < "3" and sys_platform == "win32"`, want: false},
		{marker: `sys_platform == "win32" and python_version < "3"`, want: false},
		{marker: `python_version < "3" or sys_platform == "win32"`, unknown: "python_version"},
		{marker: `python_version < "3" and sys_platform == "linux"`, unknown: "python_version"},
		{marker: `(python_version < "3" or os_name == "nt") and extra == "x"`, want: false},
		{marker: `platform_machine in "x86_64 aarch64"`, unknown: "platform_machine"},
	} {
		t.Run(tc.marker, func(t *testing.T) {
			m, err := python.ParseMarker(tc.marker)
			require.NoError(t, err)
			got, err := m.Evaluate(env)
			if tc.unknown != "" {
				require.ErrorIs(t, err, python.ErrUnknownVariable)
				assert.EqualError(t, err, python.ErrUnknownVariable.Error()+": "+tc.unknown)
				assert.False(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestVerifyMarkerScope checks that a root's direct dependencies are
// selected by their markers evaluated for the environment's own version
// (from pyvenv.cfg, nothing run), and that without version information a
// dependency whose marker needs it is reported as not evaluated (named,
// with why), never guessed in or out of scope and never checked.
func TestVerifyMarkerScope(t *testing.T) {
	ctx := context.Background()
	requires := []string{
		`old ; python_version < "3.10"`,
		`new ; python_version >= "3.11"`,
		`exact ; python_full_version == "3.11.4"`,
		`posix ; os_name == "posix"`,
		`either ; python_version < "3" or os_name == "posix"`,
		`missing ; python_version >= "3"`, // not installed: left out
		`shared ; python_version < "3.10"`,
	}
	deps := []string{"old", "new", "exact", "posix", "either", "shared", "other"}
	layout := func(t *testing.T, cfg, siteRel string) string {
		t.Helper()
		venv := filepath.Join(t.TempDir(), "venv")
		site := filepath.Join(venv, filepath.FromSlash(siteRel))
		if cfg != "" {
			require.NoError(t, os.MkdirAll(venv, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte(cfg), 0o644))
		}
		writeDist(t, site, "app", "1.0", requires, map[string]string{"app/__init__.py": "APP = 1\n"})
		// Another root puts shared in scope unconditionally.
		writeDist(t, site, "other", "1.0", []string{"shared"}, map[string]string{"other/__init__.py": "OTHER = 1\n"})
		for _, d := range deps[:6] {
			writeDist(t, site, d, "1.0", nil, map[string]string{d + "/__init__.py": "X = 1\n"})
		}
		return venv
	}
	for _, tc := range []struct {
		name         string
		cfg, siteRel string
		open         string // relative to the venv: what Open is given
		roots        []string
		checked      []string // in report order
		notEvaluated map[string]string
	}{
		{
			name: "pyvenv.cfg version 3.11.4", cfg: "home = /usr/bin\nversion = 3.11.4\n", siteRel: "lib/python3.11/site-packages",
			roots: []string{"app"}, checked: []string{"app", "new", "exact", "posix", "either"},
		},
		{
			name: "pyvenv.cfg version 3.9.18", cfg: "home = /usr/bin\nversion_info = 3.9.18.final.0\n", siteRel: "lib/python3.9/site-packages",
			roots: []string{"app", "other"}, checked: []string{"app", "other", "old", "posix", "either", "shared"},
		},
		{
			name: "no version information", cfg: "home = /usr/bin\n", siteRel: "Lib/site-packages",
			roots: []string{"app"}, checked: []string{"app", "posix", "either"},
			notEvaluated: map[string]string{
				"old":    `if python_version < "3.10", and python_version is unknown (no version in pyvenv.cfg and no lib/pythonX.Y folder)`,
				"new":    `python_version is unknown (no version in pyvenv.cfg`,
				"exact":  `python_full_version is unknown (no version in pyvenv.cfg`,
				"shared": `python_version is unknown`,
			},
		},
		{
			name: "no version information, another root puts a dependency in scope", cfg: "home = /usr/bin\n", siteRel: "Lib/site-packages",
			roots: []string{"app", "other"}, checked: []string{"app", "other", "posix", "either", "shared"},
			notEvaluated: map[string]string{"old": "python_version", "new": "python_version", "exact": "python_full_version"},
		},
		{
			name: "the lib/python3.11 folder alone", siteRel: "lib/python3.11/site-packages", open: "lib/python3.11/site-packages",
			roots: []string{"app"}, checked: []string{"app", "new", "posix", "either"},
			notEvaluated: map[string]string{"exact": "python_full_version is unknown (only the lib/python3.11 folder gives the version, not its micro version)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			venv := layout(t, tc.cfg, tc.siteRel)
			env, err := python.Open(ctx, filepath.Join(venv, filepath.FromSlash(tc.open)), python.OpenOptions{})
			require.NoError(t, err)
			rep, err := python.Verify(ctx, env, python.Options{Roots: tc.roots})
			require.NoError(t, err)
			var checked []string
			notEvaluated := map[string]string{}
			for _, r := range rep.Results {
				if r.Status == integrity.StatusSkipped {
					notEvaluated[r.Name] = r.Reason
					assert.Zero(t, r.Files, "%s is not checked", r.Name)
					continue
				}
				assert.Equal(t, integrity.StatusOK, r.Status, "%s: %s", r.Name, r.Reason)
				checked = append(checked, r.Name)
			}
			assert.Equal(t, tc.checked, checked)
			require.Len(t, notEvaluated, len(tc.notEvaluated), "%v", notEvaluated)
			for name, why := range tc.notEvaluated {
				require.Contains(t, notEvaluated, name)
				assert.True(t, strings.HasPrefix(notEvaluated[name], "not evaluated: app requires it if "), notEvaluated[name])
				assert.Contains(t, notEvaluated[name], why, name)
			}
			// The evidence record carries the same.
			rec := python.Evidence(rep)
			for name, why := range notEvaluated {
				assert.Contains(t, rec.Data["dist:"+name+":reason"].String(), why)
				assert.Equal(t, snapshot.String("skipped"), rec.Data["dist:"+name+":status"])
			}
		})
	}
}

// TestVerifyUndefinedMarkerIsNotEvaluated checks that a marker comparing
// in a way PEP 508 leaves undefined is not guessed either.
func TestVerifyUndefinedMarkerIsNotEvaluated(t *testing.T) {
	venv, site := handVenv(t, t.TempDir(), "3.12", "version = 3.12.1\n")
	writeDist(t, site, "app", "1.0", []string{`odd ; os_name ~= "posix"`}, nil)
	writeDist(t, site, "odd", "1.0", nil, nil)
	env, err := python.Open(context.Background(), venv, python.OpenOptions{})
	require.NoError(t, err)
	rep, err := python.Verify(context.Background(), env, python.Options{Roots: []string{"app"}})
	require.NoError(t, err)
	require.Len(t, rep.Results, 2)
	odd := rep.Results[1]
	assert.Equal(t, integrity.StatusSkipped, odd.Status)
	assert.Equal(t, `not evaluated: app requires it if os_name ~= "posix", which PEP 508 leaves undefined (undefined marker comparison: "posix" ~= "posix")`, odd.Reason)
}
