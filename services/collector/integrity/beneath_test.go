package integrity_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// TestRootAfterALinkOut: a package folder hashed into the stat cache,
// then moved out of the root and replaced by a link to where it went. A
// file whose status matches its cache entry is taken from the cache by
// its path (an fstatat, nothing read: the digest is the one hashed
// inside the root, of the same inode, unchanged). Any other (changed, or
// every file in the periodic full re-hash) is opened beneath the root:
// ErrOutsideRoot, its content never read. A link that stays inside the
// root is followed.
func TestRootAfterALinkOut(t *testing.T) {
	content := []byte("print('hi')\n")
	for _, tc := range []struct {
		name string
		// file is the file as listed, given the root.
		file func(root string) integrity.File
		// beneathDir confines each file to its Dir (Hasher.BeneathDir)
		// instead of setting Hasher.Root.
		beneathDir bool
	}{
		{name: "relative to a Dir", file: func(root string) integrity.File {
			return integrity.File{Dir: root, Rel: "lib/a.py"}
		}},
		{name: "relative to a Dir below the root", file: func(root string) integrity.File {
			return integrity.File{Dir: filepath.Join(root, "site"), Rel: "../lib/a.py"}
		}},
		{name: "absolute", file: func(root string) integrity.File {
			return integrity.File{Rel: filepath.Join(root, "lib", "a.py")}
		}},
		{name: "beneath its Dir", beneathDir: true, file: func(root string) integrity.File {
			return integrity.File{Dir: root, Rel: "lib/a.py"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := t.TempDir(), t.TempDir()
			require.NoError(t, os.MkdirAll(filepath.Join(root, "lib"), 0o755))
			require.NoError(t, os.Mkdir(filepath.Join(root, "site"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(root, "lib", "a.py"), content, 0o644))
			require.NoError(t, os.Symlink("lib", filepath.Join(root, "inside")))
			want := digestOf(t, content)
			files := func() []integrity.File {
				f := tc.file(root)
				f.Want = want
				g := integrity.File{Dir: root, Rel: "inside/a.py", Want: want}
				return []integrity.File{f, g}
			}
			store, err := integrity.OpenStore(t.TempDir())
			require.NoError(t, err)
			check := func(full bool) []integrity.File {
				c, err := store.Cache(root, full)
				require.NoError(t, err)
				fs := files()
				h := integrity.Hasher{Root: root}
				if tc.beneathDir {
					h = integrity.Hasher{BeneathDir: true}
				}
				require.NoError(t, h.Run(t.Context(), fs, c))
				c.Update(fs)
				require.NoError(t, c.Commit())
				return fs
			}
			outsideErr := func(t *testing.T, fs []integrity.File) {
				t.Helper()
				for j := range fs {
					assert.Equal(t, integrity.FileError, fs[j].State, "file %d", j)
					assert.ErrorIs(t, fs[j].Err, integrity.ErrOutsideRoot, "file %d", j)
					assert.False(t, fs[j].Cached || fs[j].OK(), "file %d", j)
				}
			}

			fs := check(false)
			require.True(t, fs[0].OK(), "hashed beneath the root: %v %v", fs[0].State, fs[0].Err)
			require.True(t, fs[1].OK(), "through a link inside the root")
			fs = check(false)
			require.True(t, fs[0].OK() && fs[0].Cached, "from the cache")

			require.NoError(t, os.Rename(filepath.Join(root, "lib"), filepath.Join(outside, "lib")))
			require.NoError(t, os.Symlink(filepath.Join(outside, "lib"), filepath.Join(root, "lib")))
			outsideErr(t, check(true))

			// Changed outside: its status no longer matches, so it is
			// opened, beneath the root, and never read.
			require.NoError(t, os.WriteFile(filepath.Join(outside, "lib", "a.py"), []byte("evil"), 0o644))
			outsideErr(t, check(false))
		})
	}
}

// TestRootNames: beneath a root, a name whose last component is "." or
// ".." names the directory it resolves to (never a file above it), and a
// file whose directory is missing is missing.
func TestRootNames(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pkg", "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "pkg", "a.py"), []byte("a"), 0o644))
	for _, tc := range []struct {
		rel   string
		state integrity.FileState
		err   error
	}{
		{rel: "pkg/a.py", state: integrity.FileHashed},
		{rel: "pkg/sub/..", state: integrity.FileNotRegular},
		{rel: "pkg/.", state: integrity.FileNotRegular},
		{rel: "pkg/", state: integrity.FileNotRegular},
		{rel: "..", state: integrity.FileError, err: integrity.ErrOutsideRoot},
		{rel: "pkg/../..", state: integrity.FileError, err: integrity.ErrOutsideRoot},
		{rel: "gone/a.py", state: integrity.FileMissing},
		{rel: "pkg/a.py/x", state: integrity.FileMissing}, // a file on the way: ENOTDIR
	} {
		t.Run(tc.rel, func(t *testing.T) {
			fs := []integrity.File{{Dir: root, Rel: tc.rel}}
			h := integrity.Hasher{Root: root}
			require.NoError(t, h.Run(t.Context(), fs, nil))
			assert.Equal(t, tc.state, fs[0].State, "%v", fs[0].Err)
			if tc.err != nil {
				assert.ErrorIs(t, fs[0].Err, tc.err)
			}
		})
	}
}
