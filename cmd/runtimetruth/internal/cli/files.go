package cli

import (
	"errors"
	"fmt"
	"io"
	"os"

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

var errTooLarge = errors.New("file too large")

// readLimited reads at most limit bytes, refusing larger inputs without
// reading them whole.
func readLimited(path string, stdin io.Reader, limit int64) ([]byte, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				return nil, pe.Err
			}
			return nil, err
		}
		defer func() { _ = f.Close() }() // opened read-only: closing cannot lose data
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, errors.New("is a directory")
		}
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w (limit %d bytes)", errTooLarge, limit)
	}
	return data, nil
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
