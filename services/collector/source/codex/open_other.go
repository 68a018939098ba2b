//go:build !linux

package codex

import (
	"os"
	"syscall"
)

// openRegular opens the file at path for reading without blocking: a FIFO
// opens at once and hashFile's fstat refuses it, as it refuses a device.
// (Linux checks the type before opening the file at all.)
func openRegular(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
}
