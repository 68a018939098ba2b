package integrity

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoreKeepsCommittedCache checks that a store hands the cache its
// last check committed to the next check of the scope instead of reading
// the file again; that a second check running at the same time, or a
// check after another process committed, reads the file; and that a
// cache kept in memory links its lists to the entries as a reload would.
func TestStoreKeepsCommittedCache(t *testing.T) {
	fx := newListFixture(t, 3, 2)
	files, dir, src, newStore := fx.files, fx.dir, fx.src, fx.newStore
	store := newStore()

	check := func(s *Store) (*Cache, []File) {
		t.Helper()
		c, err := s.Cache(dir, false)
		require.NoError(t, err)
		fs, _ := checkList(t, c, src, dir, files)
		return c, fs
	}
	cached := func(fs []File) (n int) {
		for i := range fs {
			if fs[i].Cached {
				n++
			}
		}
		return n
	}

	c1, fs := check(store)
	assert.Zero(t, cached(fs))
	c2, fs := check(store)
	assert.Same(t, c1, c2, "the committed cache is handed to the next check")
	assert.Equal(t, len(fs), cached(fs))

	// Two checks at once: the second reads the file.
	a, err := store.Cache(dir, false)
	require.NoError(t, err)
	b, err := store.Cache(dir, false)
	require.NoError(t, err)
	assert.Same(t, c2, a)
	assert.NotSame(t, a, b)
	require.NoError(t, b.Commit())
	require.NoError(t, a.Commit())

	// Another process changes a file and commits: the next check reads
	// what it wrote.
	p := filepath.Join(dir, files[1].Rel)
	require.NoError(t, os.WriteFile(p, []byte("changed"), 0o644))
	_, fs = check(newStore())
	assert.Equal(t, len(fs)-1, cached(fs))
	c3, fs := check(store)
	assert.NotSame(t, a, c3, "the file changed: read again")
	assert.Equal(t, len(fs), cached(fs), "with the other process's entry")
	assert.False(t, fs[1].OK())

	// A file that goes missing and comes back is hashed once, then taken
	// from the cache through its list again.
	data, err := os.ReadFile(filepath.Join(dir, files[2].Rel))
	require.NoError(t, err)
	require.NoError(t, os.Remove(filepath.Join(dir, files[2].Rel)))
	_, fs = check(store)
	assert.Equal(t, FileMissing, fs[2].State)
	require.NoError(t, os.WriteFile(filepath.Join(dir, files[2].Rel), data, 0o644))
	_, fs = check(store)
	assert.True(t, fs[2].OK() && !fs[2].Cached)
	c4, fs := check(store)
	assert.Same(t, c3, c4)
	assert.True(t, fs[2].OK() && fs[2].Cached)

	// At most MaxCaches caches are kept.
	store.MaxCaches = 2
	for _, d := range []string{t.TempDir(), t.TempDir(), t.TempDir()} {
		c, err := store.Cache(d, false)
		require.NoError(t, err)
		require.NoError(t, c.Commit())
	}
	assert.Len(t, store.warm, 2)
}
