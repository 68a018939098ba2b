package node_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/node"
)

func byName(rep *integrity.Report) map[string]integrity.Result {
	m := map[string]integrity.Result{}
	for _, r := range rep.Results {
		m[r.Name] = r
	}
	return m
}

func changes(r integrity.Result) map[string]integrity.ChangeKind {
	m := map[string]integrity.ChangeKind{}
	for _, c := range r.Changes {
		m[c.Path] = c.Kind
	}
	return m
}

// nodeFixture packs three packages with npm pack (one plain, one carrying
// our manifest, one carrying a runspec-files.json) and installs them, and
// a folder dependency (a symlink), into a project with a real npm install.
func nodeFixture(t *testing.T) (root, proj string) {
	t.Helper()
	ctx := context.Background()
	root = t.TempDir()
	pkgs := filepath.Join(root, "pkgs")
	writeTree(t, filepath.Join(pkgs, "liba"), map[string]string{
		"package.json": `{"name":"liba","version":"1.0.0","main":"index.js"}`,
		"index.js":     "module.exports = 'a'\n", "lib/util.js": "module.exports = 1\n", "README.md": "# a\n",
	})
	writeTree(t, filepath.Join(pkgs, "libm"), map[string]string{
		"package.json": `{"name":"libm","version":"2.0.0","files":["index.js","lib/","runtimetruth-files.json"]}`,
		"index.js":     "module.exports = 'm'\n", "lib/x.js": "x\n", "lib/y.js": "y\n", "test/t.js": "not published\n",
	})
	m, err := node.WriteManifest(ctx, filepath.Join(pkgs, "libm"))
	require.NoError(t, err)
	assert.Equal(t, []string{"index.js", "lib/x.js", "lib/y.js", "package.json"}, m.Paths())

	// runspec-files.json in a list shape with SRI hashes.
	rsFiles := map[string]string{
		"package.json": `{"name":"librs","version":"0.47.0"}`,
		"main.js":      "module.exports = 'rs'\n",
	}
	writeTree(t, filepath.Join(pkgs, "librs"), rsFiles)
	var list []map[string]string
	for _, p := range []string{"main.js", "package.json"} {
		sum := sha256.Sum256([]byte(rsFiles[p]))
		list = append(list, map[string]string{"path": p, "integrity": "sha256-" + base64.StdEncoding.EncodeToString(sum[:])})
	}
	data, err := json.Marshal(map[string]any{"files": list})
	require.NoError(t, err)
	writeTree(t, filepath.Join(pkgs, "librs"), map[string]string{"runspec-files.json": string(data)})

	writeTree(t, filepath.Join(pkgs, "linked"), map[string]string{"package.json": `{"name":"linked","version":"0.0.1"}`, "index.js": "1\n"})
	for _, p := range []string{"liba", "libm", "librs"} {
		npm(t, filepath.Join(pkgs, p), "pack", "--ignore-scripts", "--pack-destination", pkgs)
	}
	proj = filepath.Join(root, "deploy", "mytools")
	writeTree(t, proj, map[string]string{
		"package.json": `{"name":"mytools","version":"1.0.0","private":true}`,
		"greet.js":     "console.log('hi')\n", "lib/helper.js": "module.exports = 2\n",
	})
	npm(t, proj, "install", "--ignore-scripts", filepath.Join(pkgs, "liba-1.0.0.tgz"), filepath.Join(pkgs, "libm-2.0.0.tgz"),
		filepath.Join(pkgs, "librs-0.47.0.tgz"), filepath.Join(pkgs, "linked"))
	// What runspec writes into the deployed project: not part of it.
	writeTree(t, proj, map[string]string{"logs/run.log": "x\n", ".runspec_env": "A=1\n", "bin/mytools": "#!/bin/sh\n"})
	return root, proj
}

func TestVerifyRealNpmInstall(t *testing.T) {
	ctx := context.Background()
	root, proj := nodeFixture(t)
	nm := filepath.Join(proj, "node_modules")

	t.Run("without a store: manifests only", func(t *testing.T) {
		rep, err := node.Verify(ctx, proj, node.Options{})
		require.NoError(t, err)
		res := byName(rep)
		require.Len(t, res, 5)
		assert.Equal(t, integrity.SourceProject, res["mytools"].Source)
		assert.Equal(t, integrity.StatusSkipped, res["mytools"].Status)
		assert.Equal(t, integrity.BaselineNone, res["mytools"].Baseline)
		assert.Equal(t, integrity.StatusSkipped, res["liba"].Status)
		assert.Equal(t, integrity.SourceLocalBuild, res["liba"].Source, "installed from a .tgz")
		assert.Equal(t, integrity.StatusOK, res["libm"].Status)
		assert.Equal(t, integrity.BaselineManifest, res["libm"].Baseline)
		assert.Equal(t, 4, res["libm"].Files)
		assert.Equal(t, integrity.StatusOK, res["librs"].Status, "runspec-files.json is read")
		assert.Equal(t, 2, res["librs"].Files)
		assert.Equal(t, integrity.SourceLink, res["linked"].Source)
		assert.Equal(t, integrity.StatusSkipped, res["linked"].Status)
	})

	store, err := integrity.OpenStore(filepath.Join(root, "state"))
	require.NoError(t, err)
	check := func(t *testing.T, opts node.Options) (*integrity.Report, map[string]integrity.Result) {
		t.Helper()
		opts.Store = store
		rep, err := node.Verify(ctx, proj, opts)
		require.NoError(t, err)
		return rep, byName(rep)
	}

	t.Run("verify does not snapshot; a run does, once", func(t *testing.T) {
		_, res := check(t, node.Options{})
		assert.Equal(t, integrity.BaselineNone, res["liba"].Baseline)
		rep, res := check(t, node.Options{TakeSnapshots: true})
		for _, n := range []string{"mytools", "liba"} {
			assert.True(t, res[n].SnapshotTaken, n)
			assert.Equal(t, integrity.BaselineSnapshot, res[n].Baseline, n)
			assert.Equal(t, integrity.StatusOK, res[n].Status, n)
		}
		assert.Equal(t, 3, res["mytools"].Files, "package.json, greet.js, lib/helper.js: no logs/, bin/, dot-files, lock, node_modules")
		assert.Equal(t, 4, res["liba"].Files)
		assert.False(t, res["libm"].SnapshotTaken, "a package with a manifest is never snapshotted")
		assert.Empty(t, rep.Modified())
		rep, res = check(t, node.Options{TakeSnapshots: true})
		assert.False(t, res["liba"].SnapshotTaken)
		assert.Equal(t, integrity.StatusOK, res["liba"].Status)
		assert.Zero(t, rep.Hashed, "second check: all from the stat cache")
	})

	t.Run("edit, add, delete", func(t *testing.T) {
		require.NoError(t, os.WriteFile(filepath.Join(nm, "libm", "index.js"), []byte("module.exports = 'evil'\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(nm, "libm", "lib", "z.js"), []byte("new\n"), 0o644))
		require.NoError(t, os.Remove(filepath.Join(nm, "libm", "lib", "x.js")))
		require.NoError(t, os.WriteFile(filepath.Join(nm, "liba", "lib", "util.js"), []byte("module.exports = 3\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(proj, "greet.js"), []byte("console.log('hello')\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(proj, "lib", "extra.js"), []byte("1\n"), 0o644))
		// Not part of the project snapshot.
		writeTree(t, proj, map[string]string{"logs/other.log": "y\n", ".hidden": "z\n", "package-lock.json": "{}"})
		rep, res := check(t, node.Options{TakeSnapshots: true})
		assert.Equal(t, map[string]integrity.ChangeKind{
			"index.js": integrity.ChangeModified, "lib/z.js": integrity.ChangeAdded, "lib/x.js": integrity.ChangeMissing,
		}, changes(res["libm"]))
		assert.Equal(t, map[string]integrity.ChangeKind{"lib/util.js": integrity.ChangeModified}, changes(res["liba"]))
		assert.Equal(t, map[string]integrity.ChangeKind{
			"greet.js": integrity.ChangeModified, "lib/extra.js": integrity.ChangeAdded,
		}, changes(res["mytools"]))
		assert.Len(t, rep.Modified(), 3)
		d := res["libm"].ChangeDigest
		require.NotEmpty(t, d)
		_, res = check(t, node.Options{NoCache: true})
		assert.Equal(t, d, res["libm"].ChangeDigest, "stable while nothing else changes")

		rec := node.Evidence(rep)
		assert.Equal(t, "node.packages", rec.Kind)
		assert.Equal(t, snapshot.Source{Collector: "node", Method: "manifest sha256"}, rec.Source)
		assert.Equal(t, snapshot.String("mytools"), rec.Data["project"])
		assert.Equal(t, snapshot.String("modified"), rec.Data["pkg:.:status"])
		assert.Equal(t, snapshot.String(`["index.js","lib/x.js","lib/z.js"]`), rec.Data["pkg:libm:changed"])
		assert.Equal(t, snapshot.String("manifest"), rec.Data["pkg:libm:baseline"])
		assert.Equal(t, snapshot.String("link"), rec.Data["pkg:linked:source"])
	})

	t.Run("expected change", func(t *testing.T) {
		allow, err := integrity.NewAllowlist([]integrity.Expectation{{Package: "liba", Path: "lib/**", Reason: "patched for CVE-1"}})
		require.NoError(t, err)
		_, res := check(t, node.Options{Allow: allow})
		assert.Equal(t, integrity.StatusOK, res["liba"].Status)
		assert.Equal(t, "modified (expected: patched for CVE-1)", res["liba"].Changes[0].Label())
	})

	t.Run("snapshot retaken after reinstall", func(t *testing.T) {
		_, res := check(t, node.Options{Resnapshot: true, Packages: []string{"liba"}})
		require.Len(t, res, 1)
		assert.True(t, res["liba"].SnapshotTaken)
		_, res = check(t, node.Options{Packages: []string{"liba"}})
		assert.Equal(t, integrity.StatusOK, res["liba"].Status)
		_, err := node.Verify(ctx, proj, node.Options{Packages: []string{"nope"}})
		assert.ErrorIs(t, err, node.ErrNotInstalled)
	})

	t.Run("all", func(t *testing.T) {
		rep, err := node.Verify(ctx, proj, node.Options{All: true, Store: store})
		require.NoError(t, err)
		assert.Len(t, rep.Results, 5)
	})

	t.Run("nothing is checked in a git checkout", func(t *testing.T) {
		require.NoError(t, os.Mkdir(filepath.Join(root, "deploy", ".git"), 0o755))
		defer func() { require.NoError(t, os.Remove(filepath.Join(root, "deploy", ".git"))) }()
		rep, err := node.Verify(ctx, proj, node.Options{Store: store, TakeSnapshots: true})
		require.NoError(t, err)
		assert.Equal(t, "git checkout at "+filepath.Join(root, "deploy"), rep.Skipped)
		assert.Empty(t, rep.Results)
	})
}

func TestParseManifest(t *testing.T) {
	h := "sha256:" + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	for _, doc := range []string{
		`{"format":"runtimetruth-files/1","name":"x","version":"1","files":{"a.js":"` + h + `"}}`,
		`{"files":{"a.js":{"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}}}`,
		`{"files":[{"path":"a.js","sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}]}`,
		`{"files":[{"path":"a.js","integrity":"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}]}`,
		`{"a.js":"sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"}`,
		`{"a.js":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}`,
	} {
		m, err := node.ParseManifest([]byte(doc))
		require.NoError(t, err, doc)
		d := m.Files["a.js"]
		assert.Equal(t, h, d.String(), doc)
	}
	m, err := node.ParseManifest([]byte(`{"files":[{"path":"a.js","sha256":"` + h[7:] + `","size":0},{"path":"b.js","sha256":"` + h[7:] + `"}],` +
		`"links":{}}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"a.js": 0}, m.Sizes, "a size where the entry has one")
	m, err = node.ParseManifest([]byte(`{"files":{"a.js":{"sha256":"` + h[7:] + `","size":12},"b.js":"` + h + `"}}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"a.js": 12}, m.Sizes)
	m, err = node.ParseManifest([]byte(`{"files":{"a.js":"` + h + `"}}`))
	require.NoError(t, err)
	assert.Nil(t, m.Sizes)
	for _, bad := range []string{
		`{"files":[{"path":"a.js","sha256":"` + h[7:] + `","size":-1}]}`,
		`{"files":[{"path":"a.js","sha256":"` + h[7:] + `","size":1.5}]}`,
		`{"files":[{"path":"a.js","sha256":"` + h[7:] + `","size":"12"}]}`,
		`{"files":{"a.js":{"sha256":"` + h[7:] + `","size":1e30}}}`,
		`[]`, `{"files":{"../x":"` + h + `"}}`, `{"files":{"/etc/passwd":"` + h + `"}}`, `{"files":{"a/./b":"` + h + `"}}`,
		`{"files":{"a":"md5:d41d8cd98f00b204e9800998ecf8427e"}}`, `{"files":{"a":"nothash"}}`, `{"files":7}`,
	} {
		_, err := node.ParseManifest([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(`{"format":"runtimetruth-files/1","files":{"a.js":"sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}}`))
	f.Add([]byte(`{"files":[{"path":"a.js","integrity":"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}]}`))
	f.Add([]byte(`{"a.js":"sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"}`))
	f.Add([]byte(`{"files":[{"path":"a.js","integrity":"sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=","size":0}]}`))
	f.Add([]byte(`{"files":{"a.js":{"sha256":"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855","size":-1}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := node.ParseManifest(data)
		if err != nil {
			return
		}
		for p, n := range m.Sizes {
			if _, ok := m.Files[p]; !ok || n < 0 {
				t.Fatalf("accepted size %d for %q (listed: %v)", n, p, ok)
			}
		}
		for p, d := range m.Files {
			if p == "" || p[0] == '/' || filepath.Clean(p) != p || p == ".." || len(p) > 2 && p[:3] == "../" {
				t.Fatalf("accepted path %q", p)
			}
			if d.IsZero() {
				t.Fatalf("accepted empty digest for %q", p)
			}
		}
	})
}
