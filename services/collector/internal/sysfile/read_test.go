package sysfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadFile: a regular file is read whole; a FIFO, a device, a
// directory or a socket is refused at once (a FIFO nobody writes would
// block a plain open forever), a final symbolic link is not followed, and a
// file over the cap (/dev/zero's link, a large sparse file) is refused
// without being read.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	put := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	small := put("small", "hello")
	empty := put("empty", "")
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	link := filepath.Join(dir, "zero")
	require.NoError(t, os.Symlink("/dev/zero", link))
	sparse := filepath.Join(dir, "sparse")
	f, err := os.Create(sparse)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(10<<30))
	require.NoError(t, f.Close())

	got, err := ReadFile(small, 5)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	got, err = ReadFile(empty, 5)
	require.NoError(t, err)
	assert.Empty(t, got)

	done := make(chan struct{})
	go func() {
		defer close(done)
		for name, tc := range map[string]struct {
			path string
			want error
			text string
		}{
			"over the cap":  {small, ErrTooLarge, "5 bytes, over 4"},
			"fifo":          {fifo, ErrNotRegular, "a FIFO"},
			"device":        {"/dev/zero", ErrNotRegular, "a character device"},
			"directory":     {dir, ErrNotRegular, "a directory"},
			"link":          {link, syscall.ELOOP, ""},
			"sparse 10 GiB": {sparse, ErrTooLarge, "10737418240 bytes"},
			"missing":       {filepath.Join(dir, "none"), os.ErrNotExist, ""},
		} {
			limit := int64(1 << 20)
			if name == "over the cap" {
				limit = 4
			}
			_, err := ReadFile(tc.path, limit)
			require.ErrorIs(t, err, tc.want, name)
			assert.Contains(t, err.Error(), tc.path, "%s: the error names the file", name)
			assert.Contains(t, err.Error(), tc.text, name)
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("a read blocked")
	}
}

// TestReadFileBeneath: links that stay under the root are followed on
// the way; one that leads out (to /etc, say), ".." above the root and a
// final link are refused, in both resolution modes.
func TestReadFileBeneath(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "pkg")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "real"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "real", "f"), []byte("inside"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "secret"), []byte("outside"), 0o644))
	require.NoError(t, os.Symlink("real", filepath.Join(root, "lib")))
	require.NoError(t, os.Symlink("/etc", filepath.Join(root, "etc")))
	require.NoError(t, os.Symlink("../secret", filepath.Join(root, "up")))
	for _, mode := range []string{"openat2", "walk"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "walk" {
				defer ForceWalk()()
			}
			got, err := ReadFileBeneath(root, "lib/f", 100)
			require.NoError(t, err)
			assert.Equal(t, "inside", string(got))
			for rel, want := range map[string]error{
				"etc/passwd": ErrEscape, "../secret": ErrEscape, "up": syscall.ELOOP, "real/../../secret": ErrEscape,
			} {
				_, err := ReadFileBeneath(root, rel, 100)
				require.Error(t, err, rel)
				assert.True(t, errors.Is(err, want), "%s: %v", rel, err)
				assert.True(t, strings.Contains(err.Error(), filepath.Join(root, rel)), err.Error())
			}
		})
	}
}

// TestReadFileBeneathInto: files read in turn into one buffer keep its
// capacity once it has grown, each read returns just its file's bytes,
// and a buffer larger than the cap still refuses a file over it.
func TestReadFileBeneathInto(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "long"), []byte(strings.Repeat("x", 1000)), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "short"), []byte("hello"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))

	var buf []byte
	got, err := ReadFileBeneathInto(root, "long", 1000, &buf)
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("x", 1000), string(got))
	assert.Empty(t, buf)
	require.Greater(t, cap(buf), 1000, "the buffer keeps what it grew to")
	grown := cap(buf)

	got, err = ReadFileBeneathInto(root, "short", 1000, &buf)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	assert.Equal(t, grown, cap(buf), "a smaller file reuses the buffer")
	assert.Same(t, &buf[:1][0], &got[0], "read into the buffer")
	allocs := testing.AllocsPerRun(20, func() {
		_, err := ReadFileBeneathInto(root, "long", 1000, &buf)
		require.NoError(t, err)
	})
	assert.LessOrEqual(t, allocs, 2.0, "a read into a grown buffer allocates only root's and rel's NUL-terminated copies")

	_, err = ReadFileBeneathInto(root, "long", 999, &buf)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), filepath.Join(root, "long")+": larger than the size cap: 1000 bytes, over 999")
	_, err = ReadFileBeneathInto(root, "fifo", 1000, &buf)
	require.ErrorIs(t, err, ErrNotRegular)
	assert.Contains(t, err.Error(), filepath.Join(root, "fifo")+": not a regular file (a FIFO)")
	assert.Equal(t, grown, cap(buf), "a refused file leaves the buffer as it was")

	// A file whose size says 0 but whose reads go on (Linux's /proc)
	// grows while read: up to the cap, never past it.
	if _, err := os.Stat("/proc/self/status"); err != nil {
		return
	}
	for _, b := range []*[]byte{nil, &buf, new([]byte)} {
		got, err := ReadFileBeneathInto("/proc/self", "status", 1<<20, b)
		require.NoError(t, err)
		assert.Contains(t, string(got), "Name:")
		_, err = ReadFileBeneathInto("/proc/self", "status", 10, b)
		require.ErrorIs(t, err, ErrTooLarge)
		assert.Contains(t, err.Error(), "/proc/self/status: larger than the size cap: grew past 10 bytes while read")
	}
}
