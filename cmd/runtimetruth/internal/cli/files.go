package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/policy"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
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
var errTooLarge = regfile.ErrTooLarge

// readFile reads a named file of at most limit bytes; unlike a snapshot,
// it cannot be standard input.
func readFile(path string, limit int64) ([]byte, error) {
	if path == "-" {
		return nil, errors.New("standard input is not accepted here; name a file")
	}
	return readLimited(path, nil, limit)
}

// readLimited reads the file a command line names ("-" is stdin, when
// stdin is not nil), at most limit bytes, as regfile.Read reads it: a
// FIFO, a device such as /dev/zero, a socket or a directory is an error at
// once, before anything is read, and a file over limit bytes is refused.
// A symbolic link is followed: the path is the user's own choice. Errors
// do not name the path (callers do).
func readLimited(path string, stdin io.Reader, limit int64) ([]byte, error) {
	if path == "-" && stdin != nil {
		return regfile.ReadAtMost(stdin, limit)
	}
	data, err := regfile.Read(path, limit)
	if pe, ok := errors.AsType[*fs.PathError](err); ok {
		return nil, pe.Err
	}
	return data, err
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
