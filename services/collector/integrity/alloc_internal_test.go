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

	// A file from a cached list: linked to its entry, resolved from its
	// directory, no lookup.
	full := File{Rel: filepath.Join(dir, "f.py"), Want: f.Want, ent: c.lookup([]byte(filepath.Join(dir, "f.py")))}
	require.NotNil(t, full.ent)
	full.Dir, full.Rel = dir, "f.py"
	w.check(&full)
	require.True(t, full.Cached && full.OK())
	assert.Zero(t, testing.AllocsPerRun(200, func() { w.check(&full) }), "a cache hit from a list")

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
