//go:build !unix

package integrity

import "os"

// mapFile reads the first size bytes of f into memory (mapped is always
// false where memory mapping is not used).
func mapFile(f *os.File, size int) (data []byte, mapped bool, err error) {
	return readFile(f, size)
}

// unmapFile is never called where mapFile does not map.
func unmapFile([]byte) {}
