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
