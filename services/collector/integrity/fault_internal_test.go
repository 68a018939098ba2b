//go:build unix

package integrity

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// faultFixture is a directory of files, checked once so that the state
// directory holds their stat cache.
type faultFixture struct {
	dir, state string
	files      []File
}

func newFaultFixture(t *testing.T) *faultFixture {
	t.Helper()
	fx := &faultFixture{dir: t.TempDir(), state: t.TempDir()}
	for i := range 300 {
		data := fmt.Appendf(nil, "file %d\n", i)
		name := fmt.Sprintf("f%03d.py", i)
		require.NoError(t, os.WriteFile(filepath.Join(fx.dir, name), data, 0o644))
		f := File{Dir: fx.dir, Rel: name}
		sum := sha256.Sum256(data)
		require.NoError(t, f.Want.SetBytes(SHA256, sum[:]))
		fx.files = append(fx.files, f)
	}
	st, err := Check(context.Background(), fx.store(t), fx.dir, fx.files, CheckOptions{})
	require.NoError(t, err)
	require.NoError(t, st.CacheErr)
	return fx
}

// store opens a new store on the state directory, so that its first
// cache is read (mapped) from the file.
func (fx *faultFixture) store(t *testing.T) *Store {
	t.Helper()
	s, err := OpenStore(fx.state)
	require.NoError(t, err)
	return s
}

// truncatedCache opens the scope's cache from its file (mapped) and then
// truncates the file in place, as another process might: reading the
// mapping now faults.
func (fx *faultFixture) truncatedCache(t *testing.T) *Cache {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("needs a mapped cache file (Linux)")
	}
	c, err := fx.store(t).Cache(fx.dir, false)
	require.NoError(t, err)
	require.False(t, c.Full())
	require.NotNil(t, c.view)
	require.NoError(t, os.Truncate(c.path, 0))
	return c
}

// TestRunStopsOnCacheFault checks that a worker reading a mapped cache
// file that was truncated under it stops the run with ErrCacheFault
// instead of crashing the process.
func TestRunStopsOnCacheFault(t *testing.T) {
	fx := newFaultFixture(t)
	c := fx.truncatedCache(t)
	var h Hasher
	err := h.Run(context.Background(), fx.files, c)
	require.ErrorIs(t, err, ErrCacheFault)
	runtime.KeepAlive(c)
}

// TestCheckRecoversFromCacheFault checks that Check, when its cache file
// faults, discards it, hashes every file again without it, and says so;
// and that the next check starts a new cache.
func TestCheckRecoversFromCacheFault(t *testing.T) {
	fx := newFaultFixture(t)
	c := fx.truncatedCache(t)
	st, err := CheckWith(context.Background(), c, fx.files, CheckOptions{})
	require.NoError(t, err)
	require.ErrorIs(t, st.CacheErr, ErrCacheFault)
	assert.Equal(t, len(fx.files), st.Hashed)
	assert.Zero(t, st.Cached)
	for i := range fx.files {
		require.True(t, fx.files[i].OK(), fx.files[i].Rel)
	}

	s := fx.store(t)
	st, err = Check(context.Background(), s, fx.dir, fx.files, CheckOptions{})
	require.NoError(t, err)
	require.NoError(t, st.CacheErr)
	assert.Equal(t, len(fx.files), st.Hashed, "the truncated file is discarded as damaged: every file hashed")
	st, err = Check(context.Background(), fx.store(t), fx.dir, fx.files, CheckOptions{})
	require.NoError(t, err)
	assert.Equal(t, len(fx.files), st.Cached, "the new cache is used")
}

var faultSink byte

// TestCatchFault checks that catchFault turns a fault reading a mapping
// into ErrCacheFault and lets other panics through.
func TestCatchFault(t *testing.T) {
	fx := newFaultFixture(t)
	c := fx.truncatedCache(t)
	data := c.view.data
	err := catchFault(func() error {
		for _, b := range data {
			faultSink += b
		}
		return nil
	})
	require.ErrorIs(t, err, ErrCacheFault)
	runtime.KeepAlive(c)

	// A fault anywhere else is a bug, not a cache problem: it goes on.
	page, err := unix.Mmap(-1, 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_ANON|unix.MAP_PRIVATE)
	require.NoError(t, err)
	require.NoError(t, unix.Munmap(page))
	assert.Panics(t, func() {
		_ = catchFault(func() error {
			faultSink += page[0] // unmapped
			return nil
		})
	})

	plain := errors.New("plain")
	assert.Equal(t, plain, catchFault(func() error { return plain }))
	assert.PanicsWithValue(t, "not a fault", func() {
		_ = catchFault(func() error { panic("not a fault") })
	})
}
