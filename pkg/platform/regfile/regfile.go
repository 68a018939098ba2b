// Package regfile opens and reads files that an operator names (command
// line arguments, configured paths) only when they are regular files,
// without blocking: a FIFO with no writer, a device such as /dev/zero, a
// socket or a directory is refused at once, before anything is read. It
// also writes state files atomically and durably (WriteAtomic, SyncDir).
package regfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Errors of Open and Read, wrapped with the file's type or the limit.
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrTooLarge   = errors.New("file too large")
)

// Open opens path for reading if it is a regular file. It opens it
// without blocking (O_NONBLOCK, so a FIFO's open does not wait for a
// writer; O_NOCTTY) and refuses it on its fstat unless it is regular. A
// symbolic link is followed: the path is the operator's own choice.
// Errors are *fs.PathError naming path.
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = check(fi.Mode())
	}
	if err != nil {
		_ = f.Close() // opened read-only: closing cannot lose data
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}

// Read reads the regular file at path (as Open opens it), at most limit
// bytes: a larger file is refused unread, one that grows past the limit
// while read is refused too.
func Read(path string, limit int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes (limit %d bytes)", ErrTooLarge, fi.Size(), limit)}
	}
	data, err := ReadAtMost(f, limit)
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return data, nil
}

// ReadAtMost reads r to its end, refusing more than limit bytes.
func ReadAtMost(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w (limit %d bytes)", ErrTooLarge, limit)
	}
	return data, nil
}

// check refuses a file mode that is not a regular file's, naming its type.
func check(m fs.FileMode) error {
	switch {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return errors.New("is a directory")
	case m&fs.ModeNamedPipe != 0:
		return fmt.Errorf("%w (a FIFO)", ErrNotRegular)
	case m&fs.ModeSocket != 0:
		return fmt.Errorf("%w (a socket)", ErrNotRegular)
	case m&fs.ModeCharDevice != 0:
		return fmt.Errorf("%w (a character device)", ErrNotRegular)
	case m&fs.ModeDevice != 0:
		return fmt.Errorf("%w (a block device)", ErrNotRegular)
	}
	return fmt.Errorf("%w (mode %s)", ErrNotRegular, m.Type())
}

// WriteAtomic replaces path's content with data atomically and durably: a
// temporary file beside it, written and synced, renamed over path, then
// the directory synced. The file gets perm.
func WriteAtomic(path string, data []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir syncs a directory, so that the entries created, renamed or
// removed in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
