package chain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// ErrBroken is returned by AppendFile when the existing file does not verify:
// nothing is appended to a broken chain.
var ErrBroken = errors.New("audit chain is broken")

// AppendFile appends one link for ev (in canonical form) to the chain
// chainName in the JSONL file at path, creating it (mode 0600) if needed,
// and fsyncs it. Concurrent writers (processes too) are serialized with an
// exclusive flock; the head is recovered by verifying the file under the
// lock, so a tampered file is refused (ErrBroken) rather than extended.
func AppendFile(path string, h Hasher, chainName string, ev jsontree.Value) (Link, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return Link{}, fmt.Errorf("open audit chain: %w", err)
	}
	defer func() { _ = f.Close() }() // the link is fsynced before return: closing cannot lose it
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return Link{}, fmt.Errorf("lock audit chain %s: %w", path, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file releases it too
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Link{}, fmt.Errorf("read audit chain %s: %w", path, err)
	}
	rep, err := Run(context.Background(), h, nil, Lines(f, ""))
	if err != nil {
		return Link{}, err
	}
	if rep.Broken != nil {
		return Link{}, fmt.Errorf("%w: %s: %w", ErrBroken, path, rep.Broken)
	}
	if chainName == "" {
		return Link{}, fmt.Errorf("%w: empty chain name", ErrLink)
	}
	event, err := canonjson.Marshal(ev)
	if err != nil {
		return Link{}, fmt.Errorf("%w: event: %w", ErrLink, err)
	}
	l := h.Seal(chainName, rep.Chains[chainName], event)
	if _, err := f.Write(append(l.Line, '\n')); err != nil {
		return Link{}, fmt.Errorf("append audit chain %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return Link{}, fmt.Errorf("sync audit chain %s: %w", path, err)
	}
	return l, nil
}
