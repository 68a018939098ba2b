package integrity

import (
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// plannedTree writes items directories of uneven sizes (item i has i*7%23
// files) and returns their files with Want set.
func plannedTree(t *testing.T, items int) (string, [][]File) {
	t.Helper()
	root := t.TempDir()
	out := make([][]File, items)
	for i := range out {
		dir := filepath.Join(root, "pkg"+strconv.Itoa(i))
		require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
		for j := range i * 7 % 23 {
			rel := "sub/f" + strconv.Itoa(j) + ".py"
			data := []byte(rel + strconv.Itoa(i))
			require.NoError(t, os.WriteFile(filepath.Join(dir, rel), data, 0o644))
			sum := sha256.Sum256(data)
			f := File{Dir: dir, Rel: rel}
			require.NoError(t, f.Want.SetBytes(SHA256, sum[:]))
			out[i] = append(out[i], f)
		}
	}
	return root, out
}

func TestRunPlannedChecksEveryFileOnce(t *testing.T) {
	_, items := plannedTree(t, 40)
	for _, workers := range []int{1, 3, 8} {
		var calls [40]atomic.Int32
		h := Hasher{Workers: workers}
		err := h.RunPlanned(context.Background(), len(items), func(i int) *List {
			calls[i].Add(1)
			for j := range items[i] {
				items[i][j].State = FilePending
			}
			if len(items[i]) == 0 {
				return nil
			}
			return &List{Files: items[i]}
		}, nil)
		require.NoError(t, err)
		for i := range items {
			assert.EqualValues(t, 1, calls[i].Load(), "item %d planned once", i)
			for j := range items[i] {
				assert.True(t, items[i][j].OK(), "workers=%d item %d file %d", workers, i, j)
			}
		}
	}
	h := Hasher{}
	require.NoError(t, h.RunPlanned(context.Background(), 0, nil, nil), "no items")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, h.RunPlanned(ctx, len(items), func(i int) *List { return &List{Files: items[i]} }, nil), context.Canceled)
}

// TestCachedListInvalidation checks files that come from a cached list,
// resolved from their directory: a change of content behind a restored
// mtime (ctime), of size, mtime, mode or inode invalidates the cached
// digest, and a missing file or a symbolic link in its place is reported;
// with the cache handed from check to check in memory (warm), and read
// from its file by a new store each time (cold, as the check hook does).
func TestCachedListInvalidation(t *testing.T) {
	t.Run("warm", func(t *testing.T) { testCachedListInvalidation(t, false) })
	t.Run("cold", func(t *testing.T) { testCachedListInvalidation(t, true) })
}

// listFixture is item i of a planned tree of n items, a RECORD file beside
// its files, and stores of one state directory that check from the cache
// only (no forced full re-hash).
type listFixture struct {
	files    []File
	dir, src string
	newStore func() *Store
}

func newListFixture(t *testing.T, n, i int) listFixture {
	t.Helper()
	_, items := plannedTree(t, n)
	fx := listFixture{files: items[i], dir: items[i][0].Dir}
	state := t.TempDir()
	fx.newStore = func() *Store {
		s, err := OpenStore(state)
		require.NoError(t, err)
		s.FullEvery = 1 << 20
		return s
	}
	fx.src = filepath.Join(fx.dir, "RECORD")
	require.NoError(t, os.WriteFile(fx.src, []byte("listed"), 0o644))
	return fx
}

func testCachedListInvalidation(t *testing.T, cold bool) {
	fx := newListFixture(t, 2, 1) // 7 files
	files, dir, src, newStore := fx.files, fx.dir, fx.src, fx.newStore
	store := newStore()

	check := func() []File {
		t.Helper()
		if cold {
			store = newStore()
		}
		c, err := store.Cache(dir, false)
		require.NoError(t, err)
		fs, fromCache := checkList(t, c, src, dir, files)
		if fromCache {
			for i := range fs {
				assert.Equal(t, dir, fs[i].Dir, "cached files are resolved from their directory")
				assert.Equal(t, files[i].Rel, fs[i].Rel)
			}
		}
		return fs
	}
	fs := check()
	for i := range fs {
		require.True(t, fs[i].OK() && !fs[i].Cached)
	}
	fs = check()
	for i := range fs {
		require.True(t, fs[i].OK() && fs[i].Cached, "unchanged file %d from the cache", i)
	}

	path := func(i int) string { return filepath.Join(dir, files[i].Rel) }
	old, err := os.Stat(path(0))
	require.NoError(t, err)
	// 0: same size, mtime restored (only ctime tells).
	data, _ := os.ReadFile(path(0))
	data[0] ^= 0x20
	require.NoError(t, os.WriteFile(path(0), data, 0o644))
	require.NoError(t, os.Chtimes(path(0), old.ModTime(), old.ModTime()))
	// 1: size.
	require.NoError(t, os.WriteFile(path(1), []byte("longer content than before"), 0o644))
	// 2: mtime only (content intact: hashed again, still OK).
	later := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(path(2), later, later))
	// 3: mode only.
	require.NoError(t, os.Chmod(path(3), 0o600))
	// 4: replaced by a new inode with the same content.
	data4, _ := os.ReadFile(path(4))
	require.NoError(t, os.WriteFile(path(4)+".new", data4, 0o644))
	require.NoError(t, os.Rename(path(4)+".new", path(4)))
	// 5: missing; 6: a symbolic link to a file with the same content.
	require.NoError(t, os.Remove(path(5)))
	data6, _ := os.ReadFile(path(6))
	require.NoError(t, os.WriteFile(path(6)+".target", data6, 0o644))
	require.NoError(t, os.Remove(path(6)))
	require.NoError(t, os.Symlink(filepath.Base(path(6))+".target", path(6)))

	fs = check()
	for i := 0; i <= 4; i++ {
		assert.False(t, fs[i].Cached, "file %d re-hashed after its status changed", i)
		assert.Equal(t, FileHashed, fs[i].State, "file %d", i)
	}
	assert.False(t, fs[0].OK(), "content change behind a restored mtime")
	assert.False(t, fs[1].OK())
	assert.True(t, fs[2].OK() && fs[3].OK() && fs[4].OK(), "same content")
	assert.Equal(t, FileMissing, fs[5].State)
	assert.Equal(t, FileSymlink, fs[6].State)

	// The modified file stays modified on the next, cached, check.
	fs = check()
	assert.True(t, fs[0].Cached)
	assert.False(t, fs[0].OK())
}

// checkList checks files as the baseline read from src, as a Python check
// does: from c's list when it has one (fromCache), else stored with
// PutList; it updates and commits c and returns the files as checked.
func checkList(t *testing.T, c *Cache, src, dir string, files []File) (checked []File, fromCache bool) {
	t.Helper()
	ss := c.Source(src)
	l, fromCache := c.List(src, ss, dir)
	if !fromCache {
		fs := append([]File(nil), files...)
		labels := make([]string, len(fs))
		for i := range fs {
			labels[i] = fs[i].Rel
		}
		l = &List{Files: fs, Labels: labels}
		c.PutList(src, ss, l)
	}
	h := Hasher{Workers: 2}
	require.NoError(t, h.RunPlanned(context.Background(), 1, func(int) *List { return l }, c))
	c.UpdateList(l)
	require.NoError(t, c.Commit())
	checked = make([]File, l.Len())
	for i := range checked {
		checked[i] = *l.File(i)
		assert.Equal(t, checked[i].OK(), l.OK(i))
		assert.Equal(t, files[i].Rel, l.Label(i))
	}
	return checked, fromCache
}
