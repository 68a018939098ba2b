package integrity_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/proctest"
)

func TestSetWantSize(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int64
		want int64
		ok   bool
	}{
		{name: "empty file", n: 0, want: 0, ok: true},
		{name: "some bytes", n: 1234, want: 1234, ok: true},
		{name: "largest", n: math.MaxInt64 - 1, want: math.MaxInt64 - 1, ok: true},
		{name: "negative is unknown", n: -1, ok: false},
		{name: "MaxInt64 is unknown", n: math.MaxInt64, ok: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f integrity.File
			_, ok := f.WantSize()
			require.False(t, ok, "the zero File's size is unknown")
			f.SetWantSize(tc.n)
			n, ok := f.WantSize()
			assert.Equal(t, tc.ok, ok)
			if tc.ok {
				assert.Equal(t, tc.want, n)
			}
		})
	}
}

// TestWrongSizeIsNotRead checks the size-first rule: a 10 GiB sparse file
// listed with size 1 is reported modified by its size, from its lstat or
// fstat, without a byte of it read, with and without the stat cache and
// from a baseline list the cache kept (as a second check of an unchanged
// RECORD reads it); files of their listed size are hashed as before.
func TestWrongSizeIsNotRead(t *testing.T) {
	dir := t.TempDir()
	good := []byte("print('good')\n")
	same := []byte("print('evil')\n") // same size as good, another digest
	require.NoError(t, os.WriteFile(filepath.Join(dir, "good.py"), good, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "same.py"), same, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "unknown.py"), good, 0o644))
	const huge = 10 << 30
	big := filepath.Join(dir, "big.py")
	require.NoError(t, os.WriteFile(big, nil, 0o644))
	require.NoError(t, os.Truncate(big, huge)) // sparse: no blocks
	src := filepath.Join(dir, "RECORD")
	require.NoError(t, os.WriteFile(src, []byte("listed"), 0o644))

	files := func() []integrity.File {
		fs := []integrity.File{
			{Dir: dir, Rel: "good.py", Want: digestOf(t, good)},
			{Dir: dir, Rel: "same.py", Want: digestOf(t, good)},
			{Dir: dir, Rel: "big.py", Want: digestOf(t, good)},
			{Dir: dir, Rel: "unknown.py", Want: digestOf(t, good)},
		}
		for i := range fs[:3] {
			fs[i].SetWantSize(int64(len(good)))
		}
		return fs
	}
	assertChecked := func(t *testing.T, fs []integrity.File) {
		t.Helper()
		assert.True(t, fs[0].OK(), "good.py")
		assert.Equal(t, integrity.FileHashed, fs[1].State, "same.py: of its size, so hashed")
		assert.False(t, fs[1].OK())
		assert.True(t, fs[3].OK(), "a file of unknown size is hashed")
		f := &fs[2]
		require.Equal(t, integrity.FileWrongSize, f.State)
		assert.Equal(t, int64(huge), f.Size)
		assert.False(t, f.OK() || f.Cached)
		c, changed := integrity.ChangeFor(f, "big.py")
		require.True(t, changed)
		assert.Equal(t, integrity.Change{Path: "big.py", Kind: integrity.ChangeModified, Observed: "size:10737418240"}, stripChange(c))
	}

	store, err := integrity.OpenStore(t.TempDir())
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		hashed int // files read and hashed, over all the checks of the case
		check  func(t *testing.T) ([]integrity.File, int)
	}{
		{name: "no cache", hashed: 3, check: func(t *testing.T) ([]integrity.File, int) {
			fs := files()
			var h integrity.Hasher
			require.NoError(t, h.Run(t.Context(), fs, nil))
			hashed, _ := integrity.Stats(fs)
			return fs, hashed
		}},
		{name: "stat cache, twice", hashed: 0, check: func(t *testing.T) ([]integrity.File, int) {
			fs := files()
			_, err := integrity.Check(t.Context(), store, dir, fs, integrity.CheckOptions{})
			require.NoError(t, err)
			fs = files()
			st, err := integrity.Check(t.Context(), store, dir, fs, integrity.CheckOptions{})
			require.NoError(t, err)
			require.False(t, st.Full)
			assert.Equal(t, 3, st.Cached, "good, same and unknown from the cache")
			return fs, st.Hashed
		}},
		{name: "list kept by the cache, read from its file", hashed: 3, check: func(t *testing.T) ([]integrity.File, int) {
			state := t.TempDir()
			var hashed int
			var last *integrity.List
			for i := range 3 { // stored; read from the file; read again
				s, err := integrity.OpenStore(state)
				require.NoError(t, err)
				c, err := s.Cache(dir, false)
				require.NoError(t, err)
				stat := c.Source(src)
				l, fromCache := c.List(src, stat, dir)
				require.Equal(t, i > 0, fromCache, "check %d", i)
				if !fromCache {
					l = &integrity.List{Files: files(), Labels: []string{"good.py", "same.py", "big.py", "unknown.py"}}
					c.PutList(src, stat, l)
				}
				h := integrity.Hasher{Workers: 2, Root: dir}
				require.NoError(t, h.RunPlanned(t.Context(), 1, func(int) *integrity.List { return l }, c))
				h1, _ := l.Stats()
				hashed += h1
				c.UpdateList(l)
				require.NoError(t, c.Commit())
				last = l
			}
			fs := make([]integrity.File, last.Len())
			for i := range fs {
				fs[i] = *last.File(i)
			}
			return fs, hashed
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := proctest.BytesRead(t)
			fs, hashed := tc.check(t)
			read := proctest.BytesRead(t) - before
			assertChecked(t, fs)
			assert.Less(t, read, int64(64<<20), "the 10 GiB file was not read (%d bytes read in all)", read)
			assert.Equal(t, tc.hashed, hashed, "the wrong-sized file is never hashed")
		})
	}
}

// stripChange drops the unexported absolute path a change carries.
func stripChange(c integrity.Change) integrity.Change {
	return integrity.Change{Path: c.Path, Kind: c.Kind, Actual: c.Actual, Reason: c.Reason, Observed: c.Observed}
}

// TestWrongSizeStates checks which files the size-first rule applies to:
// a regular file of another size only; a missing file, a symbolic link
// and a directory keep their own states.
func TestWrongSizeStates(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "short.py"), []byte("x"), 0o644))
	require.NoError(t, os.Symlink("short.py", filepath.Join(dir, "link.py")))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "dir.py"), 0o755))
	want := digestOf(t, bytes.Repeat([]byte("x"), 10))
	for _, tc := range []struct {
		rel  string
		want integrity.FileState
	}{
		{rel: "short.py", want: integrity.FileWrongSize},
		{rel: "missing.py", want: integrity.FileMissing},
		{rel: "link.py", want: integrity.FileSymlink},
		{rel: "dir.py", want: integrity.FileNotRegular},
	} {
		t.Run(tc.rel, func(t *testing.T) {
			fs := []integrity.File{{Dir: dir, Rel: tc.rel, Want: want}}
			fs[0].SetWantSize(10)
			var h integrity.Hasher
			require.NoError(t, h.Run(t.Context(), fs, nil))
			assert.Equal(t, tc.want, fs[0].State)
		})
	}
}
