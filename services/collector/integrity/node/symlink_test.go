//go:build unix

package node_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/node"
)

// TestSnapshotSymlinksAndFIFOs checks that the snapshot and the later
// checks agree on symbolic links and FIFOs: a link is recorded by its
// target (so that the check after the snapshot is clean, and a changed
// target or a file turned into a link, or back, is a change), and a FIFO
// is in neither.
func TestSnapshotSymlinksAndFIFOs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	proj := filepath.Join(root, "proj")
	writeTree(t, proj, map[string]string{
		"package.json": `{"name":"proj","version":"1.0.0"}`, "a.js": "a\n", "b.js": "b\n", "lib/c.js": "c\n",
	})
	require.NoError(t, os.Symlink("a.js", filepath.Join(proj, "link.js")))
	require.NoError(t, os.Symlink("lib", filepath.Join(proj, "libdir")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(proj, "pipe"), 0o644))
	store, err := integrity.OpenStore(filepath.Join(root, "state"))
	require.NoError(t, err)
	check := func(t *testing.T, opts node.Options) integrity.Result {
		t.Helper()
		opts.Store = store
		rep, err := node.Verify(ctx, proj, opts)
		require.NoError(t, err)
		require.Len(t, rep.Results, 1)
		return rep.Results[0]
	}

	r := check(t, node.Options{TakeSnapshots: true})
	require.True(t, r.SnapshotTaken)
	assert.Equal(t, 6, r.Files, "package.json, a.js, b.js, lib/c.js and the two links; not the FIFO")
	snap, err := store.Snapshot(proj)
	require.NoError(t, err)
	assert.Equal(t, "symlink:a.js", snap.Files["link.js"])
	assert.Equal(t, "symlink:lib", snap.Files["libdir"])
	assert.NotContains(t, snap.Files, "pipe")
	for _, opts := range []node.Options{{TakeSnapshots: true}, {}, {NoCache: true}} {
		r = check(t, opts)
		assert.Equal(t, integrity.StatusOK, r.Status, "the check after the snapshot agrees with it: %v", r.Changes)
		assert.Empty(t, r.Changes)
	}

	t.Run("changed target", func(t *testing.T) {
		require.NoError(t, os.Remove(filepath.Join(proj, "link.js")))
		require.NoError(t, os.Symlink("b.js", filepath.Join(proj, "link.js")))
		r := check(t, node.Options{})
		assert.Equal(t, integrity.StatusModified, r.Status)
		require.Len(t, r.Changes, 1)
		assert.Equal(t, "link.js", r.Changes[0].Path)
		assert.Equal(t, integrity.ChangeModified, r.Changes[0].Kind)
		assert.Equal(t, "symlink:b.js", r.Changes[0].Observed)
	})
	t.Run("file replaced by a link and link by a file", func(t *testing.T) {
		require.NoError(t, os.Remove(filepath.Join(proj, "link.js")))
		require.NoError(t, os.WriteFile(filepath.Join(proj, "link.js"), []byte("a\n"), 0o644))
		require.NoError(t, os.Remove(filepath.Join(proj, "b.js")))
		require.NoError(t, os.Symlink("a.js", filepath.Join(proj, "b.js")))
		r := check(t, node.Options{})
		assert.Equal(t, integrity.StatusModified, r.Status)
		assert.Equal(t, map[string]integrity.ChangeKind{"link.js": integrity.ChangeModified, "b.js": integrity.ChangeModified}, changes(r))
	})
	t.Run("link removed, link planted", func(t *testing.T) {
		require.NoError(t, os.Remove(filepath.Join(proj, "libdir")))
		require.NoError(t, os.Symlink("/etc", filepath.Join(proj, "lib", "etc.js")))
		r := check(t, node.Options{})
		ch := changes(r)
		assert.Equal(t, integrity.ChangeMissing, ch["libdir"])
		assert.Equal(t, integrity.ChangeAdded, ch["lib/etc.js"])
		for _, c := range r.Changes {
			if c.Path == "lib/etc.js" {
				assert.Equal(t, "symlink:/etc", c.Observed)
			}
		}
	})
}
