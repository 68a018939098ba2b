package python_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/modified"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
)

func results(rep *integrity.Report) map[string]integrity.Result {
	m := map[string]integrity.Result{}
	for _, r := range rep.Results {
		m[python.NormalizeName(r.Name)] = r
	}
	return m
}

func names(rep *integrity.Report) []string {
	var out []string
	for _, r := range rep.Results {
		out = append(out, python.NormalizeName(r.Name))
	}
	return out
}

// installFixture builds a venv with real pip installs of every kind of
// source: from a local index (--no-index --find-links), from a local
// wheel, from a local folder and editable.
func installFixture(t *testing.T) (dir, venv string) {
	t.Helper()
	dir = t.TempDir()
	venv = newVenv(t, dir)
	one := func(name, version string, extra ...string) project {
		mod := strings.ReplaceAll(name, "-", "_")
		return project{Name: name, Version: version, Packages: []string{mod},
			Files: map[string]string{mod + "/__init__.py": "NAME = " + `"` + name + `"` + "\n" + strings.Join(extra, "\n")}}
	}
	app := project{
		Name: "app", Version: "1.0.0", Packages: []string{"app"},
		Requires: []string{
			"libdep>=1.0",
			`gated ; python_version < "3"`,
			`extraonly ; extra == "x"`,
			`winonly ; sys_platform == "win32"`,
			`Other.Name[feature] (>=0.1) ; os_name == "posix" and platform_python_implementation != "Jython"`,
		},
		Scripts: map[string]string{"app-cli": "app:main"},
		Files: map[string]string{
			"app/__init__.py": "def main():\n    print('app')\n",
			"app/core.py":     "VALUE = 1\n",
		},
	}
	libdep := project{Name: "libdep", Version: "1.2.0", Packages: []string{"libdep"},
		Files: map[string]string{"libdep/__init__.py": "X = 1\n", "libdep/data.txt": "some data\n"}}
	var srcs []string
	for _, p := range []project{app, libdep, one("gated", "1.0"), one("extraonly", "1.0"), one("winonly", "1.0"), one("other_name", "0.2")} {
		srcs = append(srcs, writeProject(t, dir, p))
	}
	index := filepath.Join(dir, "index")
	pip(t, venv, append([]string{"wheel", "--no-index", "--no-deps", "-w", index}, srcs...)...)
	pip(t, venv, "install", "--no-index", "--find-links", index, "app", "gated", "extraonly", "winonly")

	wheels := filepath.Join(dir, "wheels")
	pip(t, venv, "wheel", "--no-index", "--no-deps", "-w", wheels, writeProject(t, dir, one("localwheel", "2.0")))
	pip(t, venv, "install", "--no-index", filepath.Join(wheels, "localwheel-2.0-py3-none-any.whl"))
	pip(t, venv, "install", "--no-index", writeProject(t, dir, one("localdir", "3.0")))
	pip(t, venv, "install", "--no-index", "-e", writeProject(t, dir, one("editme", "0.1")))
	return dir, venv
}

func TestVerifyRealInstalls(t *testing.T) {
	ctx := context.Background()
	dir, venv := installFixture(t)
	site := sitePackages(t, venv)
	env, err := python.Open(ctx, venv, python.OpenOptions{})
	require.NoError(t, err)
	require.Empty(t, env.Unknown, "a venv's pyvenv.cfg gives every marker variable")
	assert.Equal(t, venv, env.Prefix)
	assert.Equal(t, []string{site}, env.Sites, "lib64 → lib is scanned once")

	t.Run("scope is the runnable and its direct dependencies", func(t *testing.T) {
		rep, err := python.Verify(ctx, env, python.Options{Roots: []string{"App"}})
		require.NoError(t, err)
		// gated (python < 3), extraonly (extra), winonly (win32) are
		// excluded by their markers; other-name is in by its marker.
		assert.Equal(t, []string{"app", "libdep", "other-name"}, names(rep))
		app := results(rep)["app"]
		assert.Equal(t, integrity.SourceIndex, app.Source)
		assert.Equal(t, integrity.StatusOK, app.Status)
		assert.Equal(t, integrity.BaselineRecord, app.Baseline)
		// __init__, core, the console script, INSTALLER, METADATA,
		// REQUESTED, WHEEL, entry_points.txt; RECORD and byte-code unhashed.
		assert.Equal(t, 8, app.Files)
		assert.GreaterOrEqual(t, app.Unchecked, 1)
		_, err = python.Verify(ctx, env, python.Options{Roots: []string{"nope"}})
		assert.ErrorIs(t, err, python.ErrNotInstalled)
		_, err = python.Verify(ctx, env, python.Options{})
		assert.ErrorIs(t, err, python.ErrNoScope)
	})

	t.Run("all over a fresh venv: sources per PEP 610", func(t *testing.T) {
		rep, err := python.Verify(ctx, env, python.Options{All: true})
		require.NoError(t, err)
		res := results(rep)
		for _, n := range []string{"app", "libdep", "gated", "extraonly", "winonly", "other-name", "pip"} {
			require.Contains(t, res, n)
			assert.Equal(t, integrity.SourceIndex, res[n].Source, n)
			assert.Equal(t, integrity.StatusOK, res[n].Status, n)
		}
		if st, ok := res["setuptools"]; ok { // venv installs it up to Python 3.11
			assert.Equal(t, integrity.StatusOK, st.Status)
		}
		assert.Greater(t, res["pip"].Files, 400, "pip's real RECORD, scripts in ../../../bin included")
		for _, n := range []string{"localwheel", "localdir"} {
			assert.Equal(t, integrity.SourceLocalBuild, res[n].Source, n)
			assert.Equal(t, integrity.StatusOK, res[n].Status, n)
		}
		assert.Equal(t, integrity.SourceEditable, res["editme"].Source)
		assert.Equal(t, integrity.StatusSkipped, res["editme"].Status)
		assert.Equal(t, integrity.BaselineNone, res["editme"].Baseline)
		assert.Empty(t, rep.Modified())
		assert.Empty(t, rep.Errors())
	})

	t.Run("owner of a file", func(t *testing.T) {
		dists, err := env.Distributions()
		require.NoError(t, err)
		d, ok, err := env.Owner(dists, filepath.Join(site, "app", "core.py"))
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, "app", d.Name)
		_, ok, err = env.Owner(dists, filepath.Join(dir, "elsewhere.py"))
		require.NoError(t, err)
		assert.False(t, ok)
	})

	store, err := integrity.OpenStore(filepath.Join(dir, "state"))
	require.NoError(t, err)
	verify := func(t *testing.T, opts python.Options) (*integrity.Report, map[string]integrity.Result) {
		t.Helper()
		opts.Store = store
		if opts.Roots == nil {
			opts.All = true
		}
		rep, err := python.Verify(ctx, env, opts)
		require.NoError(t, err)
		return rep, results(rep)
	}

	t.Run("stat cache", func(t *testing.T) {
		rep, _ := verify(t, python.Options{})
		assert.True(t, rep.Full, "first check has no cache")
		assert.Zero(t, rep.Cached)
		rep, _ = verify(t, python.Options{})
		assert.False(t, rep.Full)
		assert.Zero(t, rep.Hashed, "nothing changed: every file from the cache")
		assert.Positive(t, rep.Cached)
		rep, _ = verify(t, python.Options{NoCache: true})
		assert.True(t, rep.Full)
		assert.Zero(t, rep.Cached)
	})

	libInit := filepath.Join(site, "libdep", "__init__.py")
	var firstDigest string
	t.Run("edited file", func(t *testing.T) {
		f, err := os.OpenFile(libInit, os.O_APPEND|os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteString("PATCHED = True\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		rep, res := verify(t, python.Options{})
		lib := res["libdep"]
		assert.Equal(t, integrity.StatusModified, lib.Status)
		require.Len(t, lib.Changes, 1)
		fi, err := os.Stat(libInit)
		require.NoError(t, err)
		assert.Equal(t, integrity.Change{Path: "libdep/__init__.py", Kind: integrity.ChangeModified, Observed: "size:" + strconv.FormatInt(fi.Size(), 10)},
			stripAbs(lib.Changes[0]), "a file longer than RECORD says is modified by its size, not read")
		assert.Len(t, lib.ChangeDigest, 64)
		assert.Len(t, rep.Modified(), 1)
		firstDigest = lib.ChangeDigest
		// Same change, same digest, whether hashed or cached.
		_, res = verify(t, python.Options{})
		assert.Equal(t, firstDigest, res["libdep"].ChangeDigest)
		_, res = verify(t, python.Options{NoCache: true})
		assert.Equal(t, firstDigest, res["libdep"].ChangeDigest)
	})

	t.Run("reported once per distinct change", func(t *testing.T) {
		sc := modified.Scope{Host: "h", Ecosystem: events.Python, Environment: env.Prefix}
		rep, _ := verify(t, python.Options{})
		evs, err := modified.Unreported(store, rep, sc)
		require.NoError(t, err)
		require.Len(t, evs, 1)
		assert.Equal(t, firstDigest, evs[0].ChangeDigest)
		require.NoError(t, modified.Reported(store, sc, evs))
		evs, err = modified.Unreported(store, rep, sc)
		require.NoError(t, err)
		assert.Empty(t, evs)
	})

	t.Run("same-size edit with the mtime put back is still caught", func(t *testing.T) {
		data := filepath.Join(site, "libdep", "data.txt")
		fi, err := os.Stat(data)
		require.NoError(t, err)
		verify(t, python.Options{}) // cache the current state
		require.NoError(t, os.WriteFile(data, []byte("SOME DATA\n"), 0o644))
		require.NoError(t, os.Chtimes(data, fi.ModTime(), fi.ModTime()))
		rep, res := verify(t, python.Options{})
		assert.False(t, rep.Full)
		paths := changedPaths(res["libdep"])
		assert.Contains(t, paths, "libdep/data.txt")
		assert.NotEqual(t, firstDigest, res["libdep"].ChangeDigest, "a further edit is a new change")
	})

	t.Run("deleted file, replaced script, symlink", func(t *testing.T) {
		require.NoError(t, os.Remove(filepath.Join(site, "app", "core.py")))
		require.NoError(t, os.WriteFile(filepath.Join(venv, "bin", "app-cli"), []byte("#!/bin/sh\necho replaced\n"), 0o755))
		other := filepath.Join(site, "other_name", "__init__.py")
		require.NoError(t, os.Remove(other))
		require.NoError(t, os.Symlink(libInit, other))
		_, res := verify(t, python.Options{Roots: []string{"app"}})
		app := res["app"]
		assert.Equal(t, integrity.StatusModified, app.Status)
		kinds := map[string]integrity.ChangeKind{}
		for _, c := range app.Changes {
			kinds[c.Path] = c.Kind
		}
		assert.Equal(t, map[string]integrity.ChangeKind{
			"app/core.py": integrity.ChangeMissing, "../../../bin/app-cli": integrity.ChangeModified,
		}, kinds)
		on := res["other-name"]
		require.Len(t, on.Changes, 1)
		assert.Equal(t, "symlink", on.Changes[0].Observed)
	})

	t.Run("local build and editable", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(site, "localwheel", "__init__.py"), []byte("X = 2\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "src", "editme", "editme", "__init__.py"), []byte("edited\n"), 0o644))
		_, res := verify(t, python.Options{})
		assert.Equal(t, integrity.StatusModified, res["localwheel"].Status)
		assert.Equal(t, integrity.SourceLocalBuild, res["localwheel"].Source)
		assert.Equal(t, integrity.StatusSkipped, res["editme"].Status)
	})

	t.Run("expected changes", func(t *testing.T) {
		_, err := integrity.NewAllowlist([]integrity.Expectation{{Path: "x"}})
		assert.ErrorIs(t, err, integrity.ErrNoReason)
		allow, err := integrity.NewAllowlist([]integrity.Expectation{
			{Package: "LibDep", Path: "libdep/*", Reason: "CA bundle injected by the image"},
			{Path: filepath.Join(venv, "bin", "app-*"), Reason: "shebang rewritten"},
		})
		require.NoError(t, err)
		rep, res := verify(t, python.Options{Allow: allow})
		lib := res["libdep"]
		assert.Equal(t, integrity.StatusOK, lib.Status)
		assert.Empty(t, lib.ChangeDigest)
		require.Len(t, lib.Changes, 2)
		for _, c := range lib.Changes {
			assert.Equal(t, integrity.ChangeExpected, c.Kind)
			assert.Equal(t, "modified (expected: CA bundle injected by the image)", c.Label())
		}
		app := res["app"]
		assert.Equal(t, integrity.StatusModified, app.Status, "app/core.py is still missing")
		assert.Equal(t, []string{"app/core.py"}, changedPaths(app))
		rec := python.Evidence(rep)
		assert.Equal(t, snapshot.String(`["libdep/__init__.py","libdep/data.txt"]`), rec.Data["dist:libdep:expected"])
		assert.Equal(t, snapshot.String("ok"), rec.Data["dist:libdep:status"])
	})

	t.Run("RECORD path escaping the environment", func(t *testing.T) {
		rec := filepath.Join(site, "localdir-3.0.dist-info", "RECORD")
		orig, err := os.ReadFile(rec)
		require.NoError(t, err)
		for _, hostile := range []string{
			"../../../../etc/hostname,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n",
			"/etc/hostname,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n",
			"localdir/../../../../../../etc/hostname,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n",
		} {
			require.NoError(t, os.WriteFile(rec, append(append([]byte{}, orig...), hostile...), 0o644))
			_, res := verify(t, python.Options{})
			ld := res["localdir"]
			assert.Equal(t, integrity.StatusError, ld.Status, hostile)
			assert.Contains(t, ld.Reason, "escapes the environment")
			assert.Zero(t, ld.Files)
			assert.Equal(t, integrity.StatusOK, res["gated"].Status, "other distributions are unaffected")
		}
		require.NoError(t, os.WriteFile(rec, append(append([]byte{}, orig...), "localdir/x.py,md5=abc,1\n"...), 0o644))
		_, res := verify(t, python.Options{})
		assert.Equal(t, integrity.StatusError, res["localdir"].Status)
		assert.Contains(t, res["localdir"].Reason, "weak hash")
		require.NoError(t, os.WriteFile(rec, orig, 0o644))
	})

	t.Run("evidence", func(t *testing.T) {
		rep, _ := verify(t, python.Options{})
		rec := python.Evidence(rep)
		assert.Equal(t, "python.distributions", rec.Kind)
		assert.Equal(t, snapshot.Live, rec.Plane)
		assert.Equal(t, snapshot.Source{Collector: "python", Method: "RECORD sha256"}, rec.Source)
		assert.Equal(t, snapshot.String("modified"), rec.Data["dist:libdep:status"])
		assert.Equal(t, snapshot.String("index"), rec.Data["dist:libdep:source"])
		assert.Equal(t, snapshot.String("1.2.0"), rec.Data["dist:libdep:version"])
		assert.Equal(t, snapshot.String(`["libdep/__init__.py","libdep/data.txt"]`), rec.Data["dist:libdep:changed"])
		assert.Equal(t, snapshot.String("local build"), rec.Data["dist:localwheel:source"])
		assert.Equal(t, snapshot.String("skipped"), rec.Data["dist:editme:status"])
		assert.Equal(t, snapshot.Null(), rec.Data["dist:gated:change_digest"])
		// The record is valid schema v1 evidence.
		s := snapshot.New(snapshot.Target{Kind: "python", Identifier: venv}, rec)
		out, err := s.Marshal(false)
		require.NoError(t, err)
		back, err := snapshot.Parse(out)
		require.NoError(t, err)
		assert.Equal(t, rec.Data, back.Evidence[0].Data)
	})

	t.Run("derived marker environment", func(t *testing.T) {
		// The test asks the venv's own interpreter for its marker
		// environment (packaging's, as pip evaluates markers) to compare:
		// Open derives the same without running it.
		out := run(t, dir, filepath.Join(venv, "bin", "python"), "-c",
			"import json; from pip._vendor.packaging.markers import default_environment; print(json.dumps(default_environment()))")
		var want python.Environment
		require.NoError(t, json.Unmarshal([]byte(out), &want))
		want["extra"] = ""
		assert.Equal(t, want, env.Markers)
		bySite, err := python.Open(ctx, site, python.OpenOptions{})
		require.NoError(t, err)
		assert.Equal(t, venv, bySite.Prefix, "prefix inferred from lib/pythonX.Y/site-packages")
		assert.Equal(t, env.Markers, bySite.Markers, "with the prefix's pyvenv.cfg")
		rep, err := python.Verify(ctx, bySite, python.Options{Roots: []string{"gated"}})
		require.NoError(t, err)
		assert.Equal(t, integrity.StatusOK, rep.Results[0].Status)
	})
}

func changedPaths(r integrity.Result) []string {
	var out []string
	for _, c := range r.Unexpected() {
		out = append(out, c.Path)
	}
	return out
}

func stripAbs(c integrity.Change) integrity.Change {
	return integrity.Change{Path: c.Path, Kind: c.Kind, Actual: c.Actual, Reason: c.Reason, Observed: c.Observed}
}
