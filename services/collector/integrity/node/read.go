package node

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// Size caps of the files read from the tree being checked, per kind. A
// file over its cap is an error for its package (sysfile.ErrTooLarge),
// refused by its size before a byte of it is read; the reader allocates
// what the file holds, not the cap, so a generous cap costs nothing until
// a file that large turns up.
const (
	// maxPackageJSON caps package.json. Published ones are a few KiB (npm
	// 11's own is 6.6 KiB, the largest of its 118 dependencies' 7.8 KiB);
	// npm before 5 copied the README into the installed package.json,
	// which the largest READMEs take to a few hundred KiB. 4 MiB leaves
	// room for those and refuses a package.json that is a disk image.
	maxPackageJSON = 4 << 20
	// maxLockfile caps package-lock.json, npm-shrinkwrap.json and
	// node_modules/.package-lock.json. A lockfile is about 0.5 KiB per
	// installed package in lockfileVersion 3 (measured: 760,962 bytes for
	// 1,489 packages, 159,770 for 367) and twice that in version 2, which
	// holds both "packages" and "dependencies"; the largest monorepos
	// install tens of thousands of packages, tens of MiB of lockfile.
	// 256 MiB is five times that and still refuses a planted multi-GiB
	// file before the JSON decoder multiplies it.
	maxLockfile = 256 << 20
	// maxManifest caps runtimetruth-files.json and runspec-files.json:
	// about 100 bytes per listed file (path and a SHA-256 in hex; a
	// list-shaped runspec-files.json a little more), so 64 MiB is over
	// half a million files, more than any package publishes.
	maxManifest = 64 << 20
	// maxIgnoreFile caps the .npmignore and .gitignore files PackList
	// reads: a few KiB of patterns in practice.
	maxIgnoreFile = 1 << 20
)

// readBeneath reads the regular file rel beneath the directory root,
// at most limit bytes, with sysfile.ReadFileBeneath: a symbolic link on
// the way that leads out of root (or a ".." above it) is
// sysfile.ErrEscape, a FIFO, socket or device is sysfile.ErrNotRegular
// without being waited on, a file over limit is sysfile.ErrTooLarge
// without being read. A symbolic link in the last component is not
// followed: that error says so rather than "too many levels of symbolic
// links". Errors name root/rel.
func readBeneath(root, rel string, limit int64) ([]byte, error) {
	data, err := sysfile.ReadFileBeneath(root, rel, limit)
	if err != nil && sysfile.IsLoop(err) {
		name := filepath.Join(root, rel)
		if fi, lerr := os.Lstat(name); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: %w", name, errSymlink)
		}
	}
	return data, err
}

// readlink returns the target of the symbolic link rel (slash-separated)
// in the package folder dir, the directories on the way resolved beneath
// dir (os.Root): the link the hasher found there is read from there, even
// if a directory on its path was swapped for a link leading out since.
func readlink(dir, rel string) (string, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer func() { _ = r.Close() }()
	return r.Readlink(filepath.FromSlash(rel))
}
