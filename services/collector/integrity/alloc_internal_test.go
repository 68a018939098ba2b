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
	w.check(&f) // warm up: allocates the hash state once
	require.True(t, f.OK())
	assert.Zero(t, testing.AllocsPerRun(200, func() { w.check(&f) }), "hashing a file")

	c := &Cache{entries: map[string]*cacheEntry{}, gen: 1}
	c.Update([]File{f})
	w.cache = c
	w.check(&f)
	require.True(t, f.Cached)
	assert.Zero(t, testing.AllocsPerRun(200, func() { w.check(&f) }), "a cache hit")
}
