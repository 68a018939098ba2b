package sysfile

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Errors of ReadFile and ReadFileBeneath, wrapped with the file's path.
var (
	// ErrNotRegular is a file that is not a regular file: a FIFO, a
	// socket, a device or a directory, never read (and never waited on).
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge is a file over the reader's size cap, never read.
	ErrTooLarge = errors.New("larger than the size cap")
)

// ReadFile reads the regular file at path, at most limit bytes, the way
// an inspector reads a file someone else may have written: a symbolic
// link in the last component is not followed (ELOOP), nothing blocks (a
// FIFO or device is opened O_NONBLOCK and refused by its fstat as
// ErrNotRegular), and a file over limit bytes is ErrTooLarge without
// being read, or when it grows past limit while being read. Errors name
// the path.
func ReadFile(path string, limit int64) ([]byte, error) {
	var p Path
	p.Set("", path)
	f, err := Open(&p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return readAll(f, path, limit)
}

// ReadFileBeneath is ReadFile for the relative path rel resolved beneath
// the directory root (OpenBeneath): a ".." above root or a symbolic link
// on the way that leads out of it is ErrEscape, a link in the last
// component is not followed. Errors name root/rel.
func ReadFileBeneath(root, rel string, limit int64) ([]byte, error) {
	name := filepath.Join(root, rel)
	d, err := OpenDir(root)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root, err)
	}
	defer func() { _ = d.Close() }()
	var p Path
	p.Set("", rel)
	var w Walk
	f, err := OpenBeneath(d, &p, &w)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return readAll(f, name, limit)
}

// readAll checks that f is a regular file of at most limit bytes, reads
// it whole and closes it.
func readAll(f File, name string, limit int64) ([]byte, error) {
	defer func() { _ = f.Close() }()
	var st Stat
	if err := f.Stat(&st); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !st.Regular() {
		return nil, fmt.Errorf("%s: %w (%s)", name, ErrNotRegular, typeName(st.Mode))
	}
	if st.Size > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, over %d", name, ErrTooLarge, st.Size, limit)
	}
	// Room for one byte more than the file had: reading it tells a file
	// that grew; it may grow up to the cap, never past it.
	buf := make([]byte, st.Size+1)
	n := 0
	for {
		if n == len(buf) {
			if int64(n) > limit {
				return nil, fmt.Errorf("%s: %w: grew past %d bytes while read", name, ErrTooLarge, limit)
			}
			buf = append(buf, make([]byte, min(int64(len(buf)), limit+1-int64(len(buf))))...)
		}
		m, err := f.Read(buf[n:])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if m == 0 {
			return buf[:n], nil
		}
		n += m
	}
}

func typeName(mode uint32) string {
	switch mode & ModeType {
	case ModeDir:
		return "a directory"
	case ModeSymlink:
		return "a symbolic link"
	case 0o010000:
		return "a FIFO"
	case 0o140000:
		return "a socket"
	case 0o020000:
		return "a character device"
	case 0o060000:
		return "a block device"
	}
	return fmt.Sprintf("mode %o", mode&ModeType)
}
