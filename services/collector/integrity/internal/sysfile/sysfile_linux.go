//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package sysfile

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// atFDCWD is unix.AT_FDCWD as a variable, so it converts to uintptr.
var atFDCWD = unix.AT_FDCWD

// File is an open file descriptor.
type File struct {
	fd int
}

// Dir is a directory opened to resolve relative paths from (the *at
// system calls), so that each file's path is walked from there rather than
// from the root. The zero value stands for the current directory.
type Dir struct {
	fd int // descriptor + 1: 0 is the current directory
}

// OpenDir opens the directory at path (following symbolic links, as a
// path through it would) for OpenAt and LstatAt. It opens it with O_PATH:
// no read permission is needed and nothing is read.
func OpenDir(path string) (Dir, error) {
	for {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return Dir{}, err
		}
		return Dir{fd + 1}, nil
	}
}

// Close closes the directory; closing the zero Dir does nothing.
func (d Dir) Close() error {
	if d.fd == 0 {
		return nil
	}
	return unix.Close(d.fd - 1)
}

func (d Dir) at() uintptr {
	if d.fd == 0 {
		return uintptr(atFDCWD)
	}
	return uintptr(d.fd - 1)
}

// Open opens the path read-only without following a symbolic link in its
// last component (a link fails with ELOOP) and without blocking on a FIFO
// or device.
func Open(p *Path) (File, error) { return OpenAt(Dir{}, p) }

// OpenAt is Open with a relative path resolved from d.
func OpenAt(d Dir, p *Path) (File, error) {
	if len(p.b) == 0 {
		return File{-1}, unix.ENOENT
	}
	for {
		r, _, e := unix.Syscall6(unix.SYS_OPENAT, d.at(), uintptr(unsafe.Pointer(&p.b[0])),
			uintptr(unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return File{-1}, e
		}
		return File{int(r)}, nil
	}
}

// Stat fills st from the open file.
func (f File) Stat(st *Stat) error {
	var s unix.Stat_t
	if err := unix.Fstat(f.fd, &s); err != nil {
		return err
	}
	fill(st, &s)
	return nil
}

// Read reads into b, retrying on EINTR.
func (f File) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(f.fd, b)
		if err == unix.EINTR {
			continue
		}
		if n < 0 {
			n = 0
		}
		return n, err
	}
}

// Close closes the file.
func (f File) Close() error {
	if f.fd < 0 {
		return nil
	}
	return unix.Close(f.fd)
}

// Lstat fills st with the path's status, not following a final symbolic
// link.
func Lstat(p *Path, st *Stat) error { return LstatAt(Dir{}, p, st) }

// LstatAt is Lstat with a relative path resolved from d.
func LstatAt(d Dir, p *Path, st *Stat) error {
	if len(p.b) == 0 {
		return unix.ENOENT
	}
	var s unix.Stat_t
	for {
		_, _, e := unix.Syscall6(unix.SYS_NEWFSTATAT, d.at(), uintptr(unsafe.Pointer(&p.b[0])),
			uintptr(unsafe.Pointer(&s)), uintptr(unix.AT_SYMLINK_NOFOLLOW), 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return e
		}
		fill(st, &s)
		return nil
	}
}

func fill(st *Stat, s *unix.Stat_t) {
	st.Dev = uint64(s.Dev) //nolint:unconvert // Dev is uint32 on some 64-bit arches.
	st.Ino = s.Ino
	st.Size = s.Size
	st.Mtime = s.Mtim.Sec*1e9 + s.Mtim.Nsec
	st.Ctime = s.Ctim.Sec*1e9 + s.Ctim.Nsec
	st.Mode = s.Mode
}

// IsNotExist reports whether err means the path, or a directory on it, does
// not exist.
func IsNotExist(err error) bool { return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) }

// IsLoop reports whether err is Open's refusal of a final symbolic link.
func IsLoop(err error) bool { return errors.Is(err, unix.ELOOP) }

// NotRegularStat is for platforms whose Open refuses non-regular files; on
// Linux Open succeeds and Stat reports the type, so it is always false.
func NotRegularStat(error, *Stat) bool { return false }
