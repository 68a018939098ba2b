//go:build !linux || !(amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package sysfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// errLoop stands for ELOOP where the platform reports a final symbolic
// link differently.
var errLoop = errors.New("final path component is a symbolic link")

// File is an open file.
type File struct {
	f *os.File
}

// Dir is a directory relative paths are resolved from. Here it only
// keeps the directory's path, which is joined to each relative path. The
// zero value stands for the current directory.
type Dir struct {
	path string
}

// OpenDir checks that path is a directory and returns it for OpenAt and
// LstatAt.
func OpenDir(path string) (Dir, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Dir{}, err
	}
	if !fi.IsDir() {
		return Dir{}, &fs.PathError{Op: "open", Path: path, Err: errors.New("not a directory")}
	}
	return Dir{path}, nil
}

// Close does nothing: no descriptor is kept.
func (d Dir) Close() error { return nil }

func (d Dir) name(p *Path) string {
	name := p.String()
	if d.path == "" || name == "" || filepath.IsAbs(name) {
		return name
	}
	return strings.TrimSuffix(d.path, string(filepath.Separator)) + string(filepath.Separator) + filepath.FromSlash(name)
}

// Open opens the path read-only; a final symbolic link fails with an error
// IsLoop recognises. Unlike the Linux version it allocates.
func Open(p *Path) (File, error) { return OpenAt(Dir{}, p) }

// OpenAt is Open with a relative path resolved from d.
func OpenAt(d Dir, p *Path) (File, error) {
	name := d.name(p)
	fi, err := os.Lstat(name)
	if err != nil {
		return File{}, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return File{}, errLoop
	}
	if !fi.Mode().IsRegular() {
		// Do not open FIFOs or devices: report the status through Stat.
		return File{}, &notRegular{fi}
	}
	f, err := os.Open(name)
	if err != nil {
		return File{}, err
	}
	return File{f}, nil
}

// notRegular carries the status of a path that is not a regular file.
type notRegular struct{ fi fs.FileInfo }

func (e *notRegular) Error() string { return "not a regular file" }

// Stat fills st from the open file.
func (f File) Stat(st *Stat) error {
	fi, err := f.f.Stat()
	if err != nil {
		return err
	}
	fillInfo(st, fi)
	return nil
}

// Read reads into b.
func (f File) Read(b []byte) (int, error) {
	n, err := f.f.Read(b)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// Close closes the file.
func (f File) Close() error {
	if f.f == nil {
		return nil
	}
	return f.f.Close()
}

// Lstat fills st with the path's status, not following a final symbolic
// link.
func Lstat(p *Path, st *Stat) error { return LstatAt(Dir{}, p, st) }

// LstatAt is Lstat with a relative path resolved from d.
func LstatAt(d Dir, p *Path, st *Stat) error {
	fi, err := os.Lstat(d.name(p))
	if err != nil {
		return err
	}
	fillInfo(st, fi)
	return nil
}

// NotRegularStat returns the status carried by Open's error for a path that
// is not a regular file.
func NotRegularStat(err error, st *Stat) bool {
	var nr *notRegular
	if errors.As(err, &nr) {
		fillInfo(st, nr.fi)
		return true
	}
	return false
}

func fillInfo(st *Stat, fi fs.FileInfo) {
	*st = Stat{Size: fi.Size(), Mtime: fi.ModTime().UnixNano()}
	m := fi.Mode()
	st.Mode = uint32(m.Perm())
	switch {
	case m.IsRegular():
		st.Mode |= ModeRegular
	case m.IsDir():
		st.Mode |= ModeDir
	case m&fs.ModeSymlink != 0:
		st.Mode |= ModeSymlink
	}
	// Device, inode and change time are not read on these platforms: the
	// cache keys on size, modification time and mode only.
}

// IsNotExist reports whether err means the path does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// IsLoop reports whether err is Open's refusal of a final symbolic link.
func IsLoop(err error) bool { return errors.Is(err, errLoop) }

// Walk is unused scratch space here (OpenBeneath resolves paths with
// package os).
type Walk struct{}

// OpenBeneath is OpenAt, except that resolving the path may not leave d:
// a ".." above d, an absolute symbolic link on the way, or a relative one
// leading out of d fails with ErrEscape. Symbolic links that stay under d
// are followed, except in the last component, which is never followed.
// Here the path is resolved a component at a time with lstat and
// readlink, then opened by the resolved name.
func OpenBeneath(d Dir, p *Path, _ *Walk) (File, error) {
	name, err := resolveBeneath(d.path, p.String(), false)
	if err != nil {
		return File{}, err
	}
	var full Path
	full.Set("", name)
	return OpenAt(Dir{}, &full)
}

// OpenDirBeneath opens the directory at p beneath d, as OpenBeneath
// resolves it, except that a symbolic link in the last component is
// followed too (within d).
func OpenDirBeneath(d Dir, p *Path, _ *Walk) (Dir, error) {
	name, err := resolveBeneath(d.path, p.String(), true)
	if err != nil {
		return Dir{}, err
	}
	return OpenDir(name)
}

// resolveBeneath returns the name of rel under root with every symbolic
// link on the way (and, for dir, in the last component) replaced by its
// target.
func resolveBeneath(root, rel string, dir bool) (string, error) {
	if root == "" {
		root = "."
	}
	if rel == "" || filepath.IsAbs(rel) {
		return "", ErrEscape
	}
	var parts []string
	rest := filepath.ToSlash(rel)
	links := 0
	for {
		comp, next, more := strings.Cut(rest, "/")
		last := !more
		switch comp {
		case "", ".":
			if last {
				return filepath.Join(append([]string{root}, parts...)...), nil
			}
			rest = next
			continue
		case "..":
			if len(parts) == 0 {
				return "", ErrEscape
			}
			parts = parts[:len(parts)-1]
			if last {
				return filepath.Join(append([]string{root}, parts...)...), nil
			}
			rest = next
			continue
		}
		name := filepath.Join(append(append([]string{root}, parts...), comp)...)
		if last && !dir {
			return name, nil
		}
		fi, err := os.Lstat(name)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			if !fi.IsDir() && !last {
				return "", &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist} // as ENOTDIR on Linux
			}
			parts = append(parts, comp)
			if last {
				return name, nil
			}
			rest = next
			continue
		}
		if links++; links > maxLinks {
			return "", &fs.PathError{Op: "open", Path: name, Err: errors.New("too many levels of symbolic links")}
		}
		target, err := os.Readlink(name)
		if err != nil {
			return "", err
		}
		if target == "" {
			return "", &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		target = filepath.ToSlash(target)
		if filepath.IsAbs(target) || strings.HasPrefix(target, "/") {
			return "", ErrEscape
		}
		if last {
			rest = target
		} else {
			rest = target + "/" + next
		}
	}
}

// ForceWalk does nothing here: OpenBeneath always walks. It is for tests.
func ForceWalk() (restore func()) { return func() {} }
