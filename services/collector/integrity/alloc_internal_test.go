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
}
