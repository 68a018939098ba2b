//go:build unix

package integrity

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile returns the first size bytes of f, mapped read-only and shared
// when the system allows (mapped is then true, and the bytes must be
// released with unmapFile), else read into memory. Mapping a file the
// page cache holds costs a few page faults; reading it costs a copy into
// freshly allocated memory, which on some virtual machines is the larger
// part of a short-lived check.
//
// Every write of a cache file replaces it (writeAtomic), so the mapped
// file never changes under the mapping; a process that truncated it in
// place would make the next read of the mapping fault, which catchFault
// (around the check and in each hashing worker) turns into ErrCacheFault.
func mapFile(f *os.File, size int) (data []byte, mapped bool, err error) {
	if b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED); err == nil {
		mappedFiles.add(b)
		return b, true, nil
	}
	return readFile(f, size)
}

// unmapFile releases bytes mapFile mapped.
func unmapFile(b []byte) {
	mappedFiles.remove(b)
	_ = unix.Munmap(b)
}
