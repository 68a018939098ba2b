// Package sysfile holds the file primitives the integrity hasher runs once
// per file: open without following a final symlink, fstat, read into a
// caller's buffer, close, and lstat. On 64-bit Linux they are raw system
// calls on a NUL-terminated path kept in a reusable buffer, so checking a
// file allocates nothing; elsewhere they fall back to package os.
package sysfile

import "errors"

// ErrEscape is OpenBeneath's and OpenDirBeneath's refusal of a path that
// would resolve outside the directory it is resolved beneath: through a
// ".." above it, an absolute symbolic link, or a relative one that leads
// out.
var ErrEscape = errors.New("path resolves outside its root")

// maxLinks is how many symbolic links one path resolution follows before
// failing with ELOOP, as Linux does.
const maxLinks = 40

// Stat is the part of a file's status the stat cache keys on.
type Stat struct {
	Dev   uint64
	Ino   uint64
	Size  int64
	Mtime int64 // nanoseconds since the epoch
	Ctime int64 // nanoseconds since the epoch; 0 where the platform has none
	Mode  uint32
}

// File type bits of Stat.Mode (the POSIX S_IFMT values on every platform).
const (
	ModeType    = 0o170000
	ModeRegular = 0o100000
	ModeDir     = 0o040000
	ModeSymlink = 0o120000
)

// Regular reports whether the status is a regular file's.
func (s *Stat) Regular() bool { return s.Mode&ModeType == ModeRegular }

// Symlink reports whether the status is a symbolic link's.
func (s *Stat) Symlink() bool { return s.Mode&ModeType == ModeSymlink }

// Path builds NUL-terminated paths without allocating once its buffer has
// grown to the longest path seen. The zero value is ready to use.
type Path struct {
	b []byte
}

// Set makes the path dir + "/" + rel (just rel when dir is empty or rel is
// absolute).
func (p *Path) Set(dir, rel string) {
	b := p.b[:0]
	if dir != "" && (len(rel) == 0 || rel[0] != '/') {
		b = append(b, dir...)
		if len(dir) > 0 && dir[len(dir)-1] != '/' {
			b = append(b, '/')
		}
	}
	b = append(b, rel...)
	b = append(b, 0)
	p.b = b
}

// Bytes returns the path without its terminating NUL; it is valid until
// the next Set.
func (p *Path) Bytes() []byte {
	if len(p.b) == 0 {
		return nil
	}
	return p.b[:len(p.b)-1]
}

// String returns the path as a new string.
func (p *Path) String() string { return string(p.Bytes()) }
