package codex

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openRegular opens the file at path for reading only if it is a regular
// file, following symbolic links. The path is first opened with O_PATH,
// which opens nothing (no device open routine runs, no FIFO is waited
// on), and fstat checks that file; only then is that very file opened
// for reading through its /proc/self/fd link, so a path swapped between
// the check and the open cannot lead elsewhere.
func openRegular(path string) (*os.File, error) {
	fd, err := openPath(path)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errNotRegular
	}
	return os.OpenFile("/proc/self/fd/"+strconv.Itoa(fd), os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
}

func openPath(path string) (int, error) {
	for {
		fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}
