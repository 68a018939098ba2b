package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/policy"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// readSnapshot reads and strictly parses the snapshot at path ("-" is
// standard input). role names the file in errors ("baseline", "current").
func readSnapshot(path, role string, stdin io.Reader) (*snapshot.Snapshot, error) {
	data, err := readLimited(path, stdin, snapshot.MaxSize)
	if err != nil {
		return nil, fmt.Errorf("could not read %s %s: %w", role, snapshot.Quote(path), err)
	}
	s, err := snapshot.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", role, snapshot.Quote(path), err)
	}
	return s, nil
}

// Errors of readLimited, wrapped with the limit or the file's type.
var (
	errTooLarge   = errors.New("file too large")
	errNotRegular = errors.New("not a regular file")
)

// readFile reads a named file of at most limit bytes; unlike a snapshot,
// it cannot be standard input.
func readFile(path string, limit int64) ([]byte, error) {
	if path == "-" {
		return nil, errors.New("standard input is not accepted here; name a file")
	}
	return readLimited(path, nil, limit)
}

// readLimited reads the file a command line names ("-" is stdin, when
// stdin is not nil), at most limit bytes. A file must be a regular file:
// it is opened without blocking (O_NONBLOCK, so a FIFO with no writer does
// not hang the command) and refused on its fstat unless regular, so a
// FIFO, a device such as /dev/zero, a socket or a directory is an error at
// once, before anything is read. A file over limit bytes is refused
// unread, one that grows past it while read is refused too. A symbolic
// link is followed: the path is the user's own choice.
func readLimited(path string, stdin io.Reader, limit int64) ([]byte, error) {
	if path == "-" && stdin != nil {
		return readAtMost(stdin, limit)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, pe.Err
		}
		return nil, err
	}
	defer func() { _ = f.Close() }() // opened read-only: closing cannot lose data
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch m := fi.Mode(); {
	case m.IsDir():
		return nil, errors.New("is a directory")
	case !m.IsRegular():
		return nil, fmt.Errorf("%w (%s)", errNotRegular, fileType(m))
	case fi.Size() > limit:
		return nil, fmt.Errorf("%w: %d bytes (limit %d bytes)", errTooLarge, fi.Size(), limit)
	}
	return readAtMost(f, limit)
}

// readAtMost reads r to its end, refusing more than limit bytes.
func readAtMost(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w (limit %d bytes)", errTooLarge, limit)
	}
	return data, nil
}

// fileType names the type of a file that is not regular.
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	}
	return "mode " + m.Type().String()
}

// loadPolicy reads and validates the policy file at path, as policy.Load
// does, through readFile: a FIFO or device is refused, never waited on.
func loadPolicy(path string) (*policy.Policy, error) {
	data, err := readFile(path, policy.MaxSize)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, fmt.Errorf("invalid policy %s: larger than %d bytes", snapshot.Quote(path), policy.MaxSize)
	case err != nil:
		return nil, fmt.Errorf("could not read policy %s: %w", snapshot.Quote(path), err)
	}
	p, err := policy.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("invalid policy %s: %w", snapshot.Quote(path), err)
	}
	return p, nil
}

// loadTrustedRoot reads a Sigstore trusted root file (trusted_root.json).
func loadTrustedRoot(path string) (*root.TrustedRoot, error) {
	data, err := readFile(path, maxRootSize)
	if err != nil {
		return nil, fmt.Errorf("could not read trusted root %s: %w", snapshot.Quote(path), err)
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("trusted root %s: %w", snapshot.Quote(path), err)
	}
	return tr, nil
}

// writeSnapshot prints a snapshot followed by a newline.
func writeSnapshot(w io.Writer, s *snapshot.Snapshot, pretty bool) error {
	b, err := s.Marshal(pretty)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
