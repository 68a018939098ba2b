//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package sysfile

import (
	"bytes"
	"errors"
	"sync/atomic"
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

// The open flags of OpenBeneath (a file, as Open) and OpenDirBeneath.
const (
	fileFlags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY
	dirFlags  = unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC
	// walkDirFlags open one directory of the component-wise walk: a
	// symbolic link fails (ELOOP or ENOTDIR) and is then read.
	walkDirFlags = unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	beneath      = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS
)

// noOpenat2 is set once the kernel answers openat2 with ENOSYS (before
// Linux 5.6): every later OpenBeneath walks the path itself.
var noOpenat2 atomic.Bool

// Walk is the scratch space of OpenBeneath's component-wise fallback,
// used where the kernel has no openat2. The zero value is ready; reusing
// one keeps the fallback from allocating once its buffers have grown. It
// is not safe for concurrent use.
type Walk struct {
	fds  []int  // directories opened on the way, innermost last
	rest []byte // what is left of the path
	tmp  []byte
	comp []byte // the current component, NUL-terminated
	link []byte // readlinkat's buffer
}

// OpenBeneath is OpenAt, except that resolving the path may not leave d:
// a ".." above d, an absolute symbolic link on the way, or a relative one
// leading out of d fails with ErrEscape. Symbolic links that stay under
// d are followed, except in the last component, which is never followed
// (it fails with ELOOP, as with Open). It uses openat2 with
// RESOLVE_BENEATH; where the kernel has none it walks the path a
// component at a time with O_NOFOLLOW, reading each link on the way, with
// w as scratch space.
func OpenBeneath(d Dir, p *Path, w *Walk) (File, error) {
	fd, err := openBeneath(d, p, w, false)
	if err != nil {
		return File{-1}, err
	}
	return File{fd}, nil
}

// OpenDirBeneath opens the directory at p beneath d, as OpenBeneath
// resolves it, except that a symbolic link in the last component is
// followed too (within d).
func OpenDirBeneath(d Dir, p *Path, w *Walk) (Dir, error) {
	fd, err := openBeneath(d, p, w, true)
	if err != nil {
		return Dir{}, err
	}
	return Dir{fd + 1}, nil
}

func openBeneath(d Dir, p *Path, w *Walk, dir bool) (int, error) {
	if len(p.b) == 0 {
		return -1, unix.ENOENT
	}
	flags := fileFlags
	if dir {
		flags = dirFlags
	}
	if !noOpenat2.Load() {
		how := unix.OpenHow{Flags: uint64(flags), Resolve: beneath}
		for retry := 0; ; retry++ {
			r, _, e := unix.Syscall6(unix.SYS_OPENAT2, d.at(), uintptr(unsafe.Pointer(&p.b[0])),
				uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
			switch {
			case e == 0:
				return int(r), nil
			case e == unix.EINTR, e == unix.EAGAIN && retry < 16:
				// EAGAIN: a rename raced a ".." and the kernel could not
				// vouch for it; try again.
				continue
			case e == unix.EXDEV:
				return -1, ErrEscape
			case e == unix.ENOSYS:
				noOpenat2.Store(true)
			case e == unix.EPERM:
				// A seccomp filter older than openat2 may refuse it with
				// EPERM: walk instead, this time.
			default:
				return -1, e
			}
			break
		}
	}
	return w.open(d, p.Bytes(), dir)
}

var dot = []byte{'.'}

// open resolves path beneath d a component at a time: each directory is
// opened with O_NOFOLLOW from the one before, a symbolic link on the way
// is read and its target put in front of the rest of the path (an
// absolute target, or ".." above d, is ErrEscape), and the last component
// is opened as a file (not followed) or, for dir, as a directory
// (followed).
func (w *Walk) open(d Dir, path []byte, dir bool) (int, error) {
	base := int(d.at())
	cur := base
	w.fds = w.fds[:0]
	defer w.closeAll()
	w.rest = append(w.rest[:0], path...)
	links := 0
	for {
		comp, next, last := w.rest, []byte(nil), true
		if i := bytes.IndexByte(w.rest, '/'); i >= 0 {
			comp, next, last = w.rest[:i], w.rest[i+1:], false
		}
		switch {
		case len(comp) == 0 || string(comp) == ".":
			if !last {
				w.rest = next
				continue
			}
			comp = dot
		case string(comp) == "..":
			if len(w.fds) == 0 {
				return -1, ErrEscape
			}
			_ = unix.Close(w.fds[len(w.fds)-1])
			w.fds = w.fds[:len(w.fds)-1]
			cur = base
			if len(w.fds) > 0 {
				cur = w.fds[len(w.fds)-1]
			}
			if !last {
				w.rest = next
				continue
			}
			comp = dot
		}
		if last && !dir {
			return w.openat(cur, comp, fileFlags)
		}
		fd, err := w.openat(cur, comp, walkDirFlags)
		if err == nil {
			if last {
				return fd, nil
			}
			w.fds = append(w.fds, fd)
			cur, w.rest = fd, next
			continue
		}
		if !errors.Is(err, unix.ENOTDIR) && !errors.Is(err, unix.ELOOP) {
			return -1, err
		}
		target, lerr := w.readlink(cur)
		if lerr != nil {
			return -1, err // not a link: a file where a directory should be
		}
		if links++; links > maxLinks {
			return -1, unix.ELOOP
		}
		if len(target) == 0 {
			return -1, unix.ENOENT
		}
		if target[0] == '/' {
			return -1, ErrEscape
		}
		w.tmp = append(w.tmp[:0], target...)
		if !last {
			w.tmp = append(append(w.tmp, '/'), next...)
		}
		w.rest, w.tmp = w.tmp, w.rest
	}
}

func (w *Walk) closeAll() {
	for _, fd := range w.fds {
		_ = unix.Close(fd)
	}
	w.fds = w.fds[:0]
}

// openat opens comp (copied into w.comp, NUL-terminated) from dirfd.
func (w *Walk) openat(dirfd int, comp []byte, flags int) (int, error) {
	w.comp = append(append(w.comp[:0], comp...), 0)
	for {
		r, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&w.comp[0])),
			uintptr(flags), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return -1, e
		}
		return int(r), nil
	}
}

// readlink reads the symbolic link w.comp (the component openat last
// tried) in dirfd.
func (w *Walk) readlink(dirfd int) ([]byte, error) {
	if len(w.link) == 0 {
		w.link = make([]byte, unix.PathMax)
	}
	r, _, e := unix.Syscall6(unix.SYS_READLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(&w.comp[0])),
		uintptr(unsafe.Pointer(&w.link[0])), uintptr(len(w.link)), 0, 0)
	if e != 0 {
		return nil, e
	}
	if int(r) >= len(w.link) {
		return nil, unix.ENAMETOOLONG
	}
	return w.link[:r], nil
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

// ForceWalk makes OpenBeneath walk paths itself, as on a kernel without
// openat2, until restore is called. It is for tests.
func ForceWalk() (restore func()) {
	was := noOpenat2.Swap(true)
	return func() { noOpenat2.Store(was) }
}
