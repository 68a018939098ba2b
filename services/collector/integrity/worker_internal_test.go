package integrity

import (
	"crypto/sha256"
	"crypto/sha512"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWorkerMixedAlgorithms checks that a worker hashing a file with a
// long digest (SHA-512) and then one with a shorter digest (SHA-256)
// compares the second against nothing of the first: both match.
func TestWorkerMixedAlgorithms(t *testing.T) {
	dir := t.TempDir()
	long, short := []byte("long digest\n"), []byte("short digest\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "long.py"), long, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "short.py"), short, 0o644))
	files := []File{{Dir: dir, Rel: "long.py"}, {Dir: dir, Rel: "short.py"}}
	s512 := sha512.Sum512(long)
	require.NoError(t, files[0].Want.SetBytes(SHA512, s512[:]))
	s256 := sha256.Sum256(short)
	require.NoError(t, files[1].Want.SetBytes(SHA256, s256[:]))
	w := worker{buf: make([]byte, DefaultBufferSize)}
	defer w.close()
	for i := range files {
		w.check(&files[i])
		require.True(t, files[i].OK(), "%s: got %s", files[i].Rel, files[i].Got())
	}
}
