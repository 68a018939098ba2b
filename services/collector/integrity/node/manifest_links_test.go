//go:build unix

package node_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/node"
)

// linkProject writes a project folder (deployed by copying) with
// link.js -> a.js and returns it.
func linkProject(t *testing.T) string {
	t.Helper()
	proj := filepath.Join(t.TempDir(), "proj")
	writeTree(t, proj, map[string]string{
		"package.json": `{"name":"proj","version":"1.0.0"}`, "a.js": "a\n", "b.js": "b\n",
	})
	require.NoError(t, os.Symlink("a.js", filepath.Join(proj, "link.js")))
	return proj
}

// verifyOne checks the project folder alone (no store: the manifest is the
// only baseline).
func verifyOne(t *testing.T, proj string) integrity.Result {
	t.Helper()
	rep, err := node.Verify(context.Background(), proj, node.Options{})
	require.NoError(t, err)
	require.Len(t, rep.Results, 1)
	return rep.Results[0]
}

func relink(t *testing.T, target, name string) {
	t.Helper()
	_ = os.Remove(name)
	require.NoError(t, os.Symlink(target, name))
}

// TestManifestLinksProjectFolder: a manifest written by this version
// records the project's links by target, so that the copy as deployed
// checks clean, and a retargeted, replaced, removed or planted link is a
// change.
func TestManifestLinksProjectFolder(t *testing.T) {
	proj := linkProject(t)
	m, err := node.WriteManifest(context.Background(), proj)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"link.js": "a.js"}, m.Links)
	assert.Equal(t, []string{"a.js", "b.js", "package.json"}, m.Paths())
	var doc map[string]json.RawMessage
	data, err := os.ReadFile(filepath.Join(proj, node.ManifestFile))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.JSONEq(t, `{"link.js":"a.js"}`, string(doc["links"]))
	assert.JSONEq(t, `"runtimetruth-files/1"`, string(doc["format"]), "backward-compatible: same format")

	link := filepath.Join(proj, "link.js")
	t.Run("ok", func(t *testing.T) {
		r := verifyOne(t, proj)
		assert.Equal(t, integrity.StatusOK, r.Status, "%v", r.Changes)
		assert.Equal(t, integrity.BaselineManifest, r.Baseline)
		assert.Equal(t, 4, r.Files, "three files and the link")
	})
	t.Run("retargeted link is modified", func(t *testing.T) {
		relink(t, "b.js", link)
		r := verifyOne(t, proj)
		require.Len(t, r.Changes, 1)
		assert.Equal(t, integrity.ChangeModified, r.Changes[0].Kind)
		assert.Equal(t, "link.js", r.Changes[0].Path)
		assert.Equal(t, "symlink:b.js", r.Changes[0].Observed)
	})
	t.Run("regular file where the link was is modified", func(t *testing.T) {
		require.NoError(t, os.Remove(link))
		require.NoError(t, os.WriteFile(link, []byte("a\n"), 0o644))
		assert.Equal(t, map[string]integrity.ChangeKind{"link.js": integrity.ChangeModified}, changes(verifyOne(t, proj)))
	})
	t.Run("removed link is missing", func(t *testing.T) {
		require.NoError(t, os.Remove(link))
		assert.Equal(t, map[string]integrity.ChangeKind{"link.js": integrity.ChangeMissing}, changes(verifyOne(t, proj)))
	})
	t.Run("unlisted link is added", func(t *testing.T) {
		relink(t, "a.js", link)
		relink(t, "/etc/passwd", filepath.Join(proj, "planted.js"))
		r := verifyOne(t, proj)
		require.Len(t, r.Changes, 1)
		assert.Equal(t, integrity.ChangeAdded, r.Changes[0].Kind)
		assert.Equal(t, "planted.js", r.Changes[0].Path)
		assert.Equal(t, "symlink:/etc/passwd", r.Changes[0].Observed)
	})
}

// TestManifestLinksOldFormatIgnored: a manifest without the links section
// (written before it existed, or runspec-files.json) cannot list links, so
// in the project folder they are neither checked nor reported.
func TestManifestLinksOldFormatIgnored(t *testing.T) {
	for _, file := range []string{node.ManifestFile, node.RunspecManifestFile} {
		t.Run(file, func(t *testing.T) {
			proj := linkProject(t)
			_, err := node.WriteManifest(context.Background(), proj)
			require.NoError(t, err)
			path := filepath.Join(proj, node.ManifestFile)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			var doc map[string]any
			require.NoError(t, json.Unmarshal(data, &doc))
			delete(doc, "links")
			if file != node.ManifestFile {
				delete(doc, "format")
				require.NoError(t, os.Remove(path))
			}
			data, err = json.Marshal(doc)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(proj, file), data, 0o644))

			r := verifyOne(t, proj)
			assert.Equal(t, integrity.StatusOK, r.Status, "%v", r.Changes)
			assert.Equal(t, 3, r.Files, "the files only")
			relink(t, "b.js", filepath.Join(proj, "link.js"))
			relink(t, "a.js", filepath.Join(proj, "other.js"))
			r = verifyOne(t, proj)
			assert.Equal(t, integrity.StatusOK, r.Status, "%v", r.Changes)
			require.NoError(t, os.WriteFile(filepath.Join(proj, "new.js"), []byte("n\n"), 0o644))
			assert.Equal(t, map[string]integrity.ChangeKind{"new.js": integrity.ChangeAdded}, changes(verifyOne(t, proj)),
				"files are still checked")
		})
	}
}

// TestManifestLinksPackRules: links follow the pack rules (same ignore
// rules as the files, "files" naming a link included), and a folder
// without links gets an empty section.
func TestManifestLinksPackRules(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"package.json": `{"name":"p","version":"1.0.0","files":["lib/","top.js","index.js"]}`,
		"index.js":     "i\n", "lib/a.js": "a\n", "lib/.npmignore": "*.tmp\n", "test/t.js": "t\n",
	})
	for name, target := range map[string]string{
		"top.js": "index.js", "lib/l.js": "a.js", "lib/dir": "../test", "lib/x.tmp": "a.js",
		"test/l.js": "t.js", "other.js": "index.js",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, filepath.FromSlash(name))))
	}
	m, err := node.WriteManifest(context.Background(), dir)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"top.js": "index.js", "lib/l.js": "a.js", "lib/dir": "../test"}, m.Links)
	list, err := node.PackList(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"index.js", "lib/a.js", "package.json"}, list, "links are still not in the pack list")
	back, err := node.ReadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, m.Links, back.Links)

	empty := t.TempDir()
	writeTree(t, empty, map[string]string{"package.json": `{"name":"e","version":"1.0.0"}`})
	m, err = node.WriteManifest(context.Background(), empty)
	require.NoError(t, err)
	assert.NotNil(t, m.Links)
	assert.Empty(t, m.Links)
	back, err = node.ReadManifest(empty)
	require.NoError(t, err)
	assert.NotNil(t, back.Links, "an empty section is kept apart from none")
}

// TestManifestLinksDependency: npm installs no links from a tarball, so a
// dependency's listed links are not missing; a link planted there is added
// (unless it is a listed link with its recorded target), section or not.
func TestManifestLinksDependency(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	pkgs := filepath.Join(root, "pkgs")
	for _, name := range []string{"libl", "libold"} {
		dir := filepath.Join(pkgs, name)
		writeTree(t, dir, map[string]string{
			"package.json": `{"name":"` + name + `","version":"1.0.0"}`, "index.js": "i\n", "b.js": "b\n",
		})
		require.NoError(t, os.Symlink("index.js", filepath.Join(dir, "link.js")))
		m, err := node.WriteManifest(ctx, dir)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"link.js": "index.js"}, m.Links)
		if name == "libold" {
			data, err := json.Marshal(map[string]any{"format": node.ManifestFormat, "files": map[string]string{
				"index.js": m.Files["index.js"].String(), "b.js": m.Files["b.js"].String(), "package.json": m.Files["package.json"].String(),
			}})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, node.ManifestFile), data, 0o644))
		}
		npm(t, dir, "pack", "--ignore-scripts", "--pack-destination", pkgs)
	}
	proj := filepath.Join(root, "deploy", "app")
	writeTree(t, proj, map[string]string{"package.json": `{"name":"app","version":"1.0.0","private":true}`})
	npm(t, proj, "install", "--ignore-scripts", filepath.Join(pkgs, "libl-1.0.0.tgz"), filepath.Join(pkgs, "libold-1.0.0.tgz"))
	nm := filepath.Join(proj, "node_modules")
	_, err := os.Lstat(filepath.Join(nm, "libl", "link.js"))
	require.ErrorIs(t, err, os.ErrNotExist, "npm does not install the link")

	check := func() map[string]integrity.Result {
		rep, err := node.Verify(ctx, proj, node.Options{Packages: []string{"libl", "libold"}})
		require.NoError(t, err)
		return byName(rep)
	}
	res := check()
	for _, n := range []string{"libl", "libold"} {
		assert.Equal(t, integrity.StatusOK, res[n].Status, "%s: listed link not missing: %v", n, res[n].Changes)
		assert.Equal(t, integrity.BaselineManifest, res[n].Baseline, n)
	}

	relink(t, "index.js", filepath.Join(nm, "libl", "link.js"))
	relink(t, "/tmp/evil.js", filepath.Join(nm, "libl", "b2.js"))
	relink(t, "/tmp/evil.js", filepath.Join(nm, "libold", "link.js"))
	res = check()
	assert.Equal(t, map[string]integrity.ChangeKind{"b2.js": integrity.ChangeAdded}, changes(res["libl"]),
		"the listed link with its recorded target is accepted")
	assert.Equal(t, map[string]integrity.ChangeKind{"link.js": integrity.ChangeAdded}, changes(res["libold"]),
		"without a section a link in a dependency is still added")
	relink(t, "b.js", filepath.Join(nm, "libl", "link.js"))
	res = check()
	assert.Equal(t, integrity.ChangeAdded, changes(res["libl"])["link.js"], "a listed link with another target is not accepted")
}

func TestParseManifestLinks(t *testing.T) {
	h := "sha256:" + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	m, err := node.ParseManifest([]byte(`{"files":{"a.js":"` + h + `"},"links":{"l.js":"a.js","d/x":"/abs/ok"}}`))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"l.js": "a.js", "d/x": "/abs/ok"}, m.Links)
	m, err = node.ParseManifest([]byte(`{"files":{"a.js":"` + h + `"}}`))
	require.NoError(t, err)
	assert.Nil(t, m.Links, "no section")
	m, err = node.ParseManifest([]byte(`{"files":{"a.js":"` + h + `"},"links":{}}`))
	require.NoError(t, err)
	assert.NotNil(t, m.Links, "an empty section")
	for _, bad := range []string{
		`{"files":{},"links":{"../x":"a"}}`, `{"files":{},"links":{"/x":"a"}}`, `{"files":{},"links":{"x":""}}`,
		`{"files":{},"links":[]}`, `{"files":{},"links":{"x":7}}`, `{"files":{"a.js":"` + h + `"},"links":{"a.js":"b"}}`,
	} {
		_, err := node.ParseManifest([]byte(bad))
		assert.ErrorIs(t, err, node.ErrBadManifest, bad)
	}
}
