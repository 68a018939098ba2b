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
	data, err := readAll(f, limit, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// ReadFileBeneath is ReadFile for the relative path rel resolved beneath
// the directory root (OpenBeneath): a ".." above root or a symbolic link
// on the way that leads out of it is ErrEscape, a link in the last
// component is not followed. Errors name root/rel.
func ReadFileBeneath(root, rel string, limit int64) ([]byte, error) {
	return ReadFileBeneathInto(root, rel, limit, nil)
}

// ReadFileBeneathInto is ReadFileBeneath reading into *buf, reusing its
// capacity, for a caller that reads many files in turn: it returns the
// bytes read, *buf's first bytes, and leaves *buf empty with whatever
// capacity it grew to. A nil buf reads into a new slice.
func ReadFileBeneathInto(root, rel string, limit int64, buf *[]byte) ([]byte, error) {
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
		return nil, fmt.Errorf("%s: %w", filepath.Join(root, rel), err)
	}
	data, err := readAll(f, limit, buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(root, rel), err)
	}
	return data, nil
}

// readAll checks that f is a regular file of at most limit bytes, reads
// it whole into *buf (a new slice when buf is nil) and closes it. Its
// errors do not name the file: the callers add the name, only on failure
// (building it would cost every read an allocation).
func readAll(f File, limit int64, buf *[]byte) ([]byte, error) {
	defer func() { _ = f.Close() }() // read only: nothing to lose
	var st Stat
	if err := f.Stat(&st); err != nil {
		return nil, err
	}
	if !st.Regular() {
		return nil, fmt.Errorf("%w (%s)", ErrNotRegular, typeName(st.Mode))
	}
	if st.Size > limit {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrTooLarge, st.Size, limit)
	}
	var b []byte
	spare := int64(1)
	if buf != nil {
		b = (*buf)[:0]
		defer func() { *buf = b[:0] }()
		spare = 512 // and some more, for the next file read into it
	}
	// Room for one byte more than the file had: reading it tells a file
	// that grew; it may grow up to the cap, never past it.
	if int64(cap(b)) <= st.Size {
		b = make([]byte, 0, st.Size+spare)
	}
	for {
		if int64(len(b)) > limit {
			return nil, fmt.Errorf("%w: grew past %d bytes while read", ErrTooLarge, limit)
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		end := cap(b)
		if int64(end) > limit {
			end = int(limit) + 1
		}
		m, err := f.Read(b[len(b):end])
		b = b[:len(b)+m]
		if err != nil {
			return nil, err
		}
		if m == 0 {
			return b, nil
		}
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
