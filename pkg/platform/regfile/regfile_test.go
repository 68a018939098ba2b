package regfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
)

// TestOpenRegularOnly: a FIFO without a writer is refused at once (the
// test would hang on a blocking open), /dev/zero is refused unread, a
// directory is an error; each error names the path. A link to a regular
// file is followed.
func TestOpenRegularOnly(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("data"), 0o600))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(file, link))
	for _, tc := range []struct {
		name, path, want string
	}{
		{"fifo", fifo, "not a regular file (a FIFO)"},
		{"dev-zero", "/dev/zero", "not a regular file (a character device)"},
		{"directory", dir, "is a directory"},
		{"missing", filepath.Join(dir, "missing"), "no such file or directory"},
		{"regular", file, ""},
		{"link to regular", link, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := regfile.Open(tc.path)
			if tc.want == "" {
				require.NoError(t, err)
				require.NoError(t, f.Close())
				data, err := regfile.Read(tc.path, 4)
				require.NoError(t, err)
				assert.Equal(t, "data", string(data))
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			var pe *fs.PathError
			require.True(t, errors.As(err, &pe))
			assert.Equal(t, tc.path, pe.Path)
			_, err = regfile.Read(tc.path, 1<<20)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestReadLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat("x", 10)), 0o600))
	_, err := regfile.Read(path, 9)
	assert.ErrorIs(t, err, regfile.ErrTooLarge)
	assert.Contains(t, err.Error(), "10 bytes (limit 9 bytes)")
	data, err := regfile.Read(path, 10)
	require.NoError(t, err)
	assert.Len(t, data, 10)
	_, err = regfile.ReadAtMost(strings.NewReader("abc"), 2)
	assert.ErrorIs(t, err, regfile.ErrTooLarge)
}
