package integrity

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPerFileAllocations checks the per-file path: hashing a file, and
// taking its digest from the stat cache, allocate nothing (on 64-bit
// Linux, where the raw system calls are used).
func TestPerFileAllocations(t *testing.T) {
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("raw system calls are used on 64-bit Linux only")
	}
	dir := t.TempDir()
	data := []byte("print('hello')\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "f.py"), data, 0o644))
	sum := sha256.Sum256(data)
	f := File{Dir: dir, Rel: "f.py"}
	require.NoError(t, f.Want.SetBytes(SHA256, sum[:]))

	w := worker{buf: make([]byte, DefaultBufferSize)}
	defer w.close()
	w.check(&f) // warm up: allocates the hash state and opens dir once
	require.True(t, f.OK())
	assert.Zero(t, testing.AllocsPerRun(200, func() { w.check(&f) }), "hashing a file")

	c := &Cache{entries: map[string]*cacheEntry{}, gen: 1}
	c.Update([]File{f})
	w.cache = c
	w.check(&f)
	require.True(t, f.Cached)
	assert.Zero(t, testing.AllocsPerRun(200, func() { w.check(&f) }), "a cache hit")

	// Read from a cache file, as a new process does: a file looked up
	// in the file's entries, and a file of a list read from the file
	// (linked to its entry, resolved from its directory, no lookup).
	state := t.TempDir()
	src := filepath.Join(dir, "RECORD")
	require.NoError(t, os.WriteFile(src, []byte("listed"), 0o644))
	for range 2 {
		store, err := OpenStore(state)
		require.NoError(t, err)
		store.FullEvery = 1 << 20
		fc, err := store.Cache(dir, false)
		require.NoError(t, err)
		checkList(t, fc, src, dir, []File{{Dir: dir, Rel: "f.py", Want: f.Want}})
	}
	store, err := OpenStore(state)
	require.NoError(t, err)
	store.FullEvery = 1 << 20
	fc, err := store.Cache(dir, false)
	require.NoError(t, err)
	require.NotNil(t, fc.saved)
	require.Nil(t, fc.entries)
	w.cache = fc
	w.check(&f)
	require.True(t, f.Cached && f.OK())
	assert.Zero(t, testing.AllocsPerRun(200, func() { w.check(&f) }), "a cache hit read from the file")
	l, ok := fc.List(src, fc.Source(src), dir)
	require.True(t, ok)
	require.NotNil(t, l.cached)
	w.checkListed(l.cached, 0)
	require.True(t, l.OK(0))
	assert.Zero(t, testing.AllocsPerRun(200, func() { w.checkListed(l.cached, 0) }), "a cache hit from a list")

	// Files of several directories, more than a worker keeps open.
	var many []File
	for i := range maxDirs + 3 {
		sub := filepath.Join(dir, "d"+string(rune('a'+i)))
		require.NoError(t, os.Mkdir(sub, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(sub, "f.py"), data, 0o644))
		many = append(many, File{Dir: sub, Rel: "f.py", Want: f.Want})
	}
	w.cache = nil
	for i := range many {
		w.check(&many[i])
		require.True(t, many[i].OK(), many[i].Dir)
	}
	assert.Equal(t, maxDirs, w.ndirs, "the least recently used directory is closed")

	// Beneath a root (Hasher.Root, as for a Python environment): the
	// file resolved from its directory, and an absolute path from the
	// root, allocate nothing either.
	wr := worker{buf: make([]byte, DefaultBufferSize), root: dir}
	defer wr.close()
	sub := File{Dir: many[0].Dir, Rel: "f.py", Want: f.Want}
	abs := File{Rel: filepath.Join(many[1].Dir, "f.py"), Want: f.Want}
	for _, g := range []*File{&sub, &abs} {
		wr.check(g)
		require.True(t, g.OK(), g.Path())
		assert.Zero(t, testing.AllocsPerRun(200, func() { wr.check(g) }), "hashing beneath a root")
	}
	wr.cache = c
	c.Update([]File{sub})
	wr.check(&sub)
	require.True(t, sub.Cached)
	assert.Zero(t, testing.AllocsPerRun(200, func() { wr.check(&sub) }), "a cache hit beneath a root")
}
