// Package jsonl is the audit chain's file sink: one link per line
// (pkg/evidence/chain's line format), appended in batches, each batch written
// with one write and made durable with one fsync before Write returns.
//
// The active file is Path; when it reaches MaxBytes it is renamed to
// Path.000001 (then .000002, …) and a new Path is started. Chains run on
// across files: the first link of a chain in a new file has the previous
// file's last hash of that chain as prev, so the rotated files read in
// order (Files, read by Source) verify as one sequence.
//
// Open verifies every file before anything is appended, so a tampered log
// is refused (ErrBroken) rather than extended, and it drops a torn last
// line (a write cut short by a crash: never acknowledged). An exclusive
// lock on Path.lock keeps a second writer out.
package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"

	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
)

// Errors of Open.
var (
	// ErrBroken: the existing log does not verify.
	ErrBroken = errors.New("audit log is broken")
	// ErrLocked: another process writes the log.
	ErrLocked = errors.New("audit log is locked by another writer")
)

// Options configure a Sink.
type Options struct {
	// Path is the active file.
	Path string
	// MaxBytes rotates the active file once it holds this many bytes
	// (0: never).
	MaxBytes int64
	// Hasher checks the existing links (with the chain's key, if keyed).
	Hasher chain.Hasher
}

// Sink appends links to the JSONL file set.
type Sink struct {
	opts Options

	mu    sync.Mutex
	lock  *os.File
	f     *os.File
	size  int64
	heads map[string]link.Head
	next  int // number of the next rotated file
	// Dropped is the size of a torn last line Open removed (0 if none).
	Dropped int
}

// Open locks, verifies and opens the log at opts.Path, creating it (and
// its directory) if needed.
func Open(ctx context.Context, opts Options) (*Sink, error) {
	if opts.Path == "" {
		return nil, errors.New("jsonl: empty path")
	}
	if err := os.MkdirAll(filepath.Dir(opts.Path), 0o700); err != nil {
		return nil, fmt.Errorf("audit log directory: %w", err)
	}
	lock, err := os.OpenFile(opts.Path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log lock: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrLocked, opts.Path, err)
	}
	s := &Sink{opts: opts, lock: lock, heads: map[string]link.Head{}}
	if err := s.open(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sink) open(ctx context.Context) error {
	dropped, err := dropTornLine(s.opts.Path)
	if err != nil {
		return err
	}
	s.Dropped = dropped
	files, err := Files(s.opts.Path)
	if err != nil {
		return err
	}
	for _, f := range files {
		if n, ok := rotation(s.opts.Path, f); ok && n >= s.next {
			s.next = n + 1
		}
	}
	s.next = max(s.next, 1)
	// The last link of each chain is its head; its stream position is
	// read from its event once the log verified.
	last := map[string]chain.Candidate{}
	rep, err := chain.RunVisit(ctx, s.opts.Hasher, nil, Source(files), func(c *chain.Candidate) {
		last[c.Chain] = chain.Candidate{Seq: c.Seq, Hash: c.Hash, Event: bytes.Clone(c.Event)}
	})
	if err != nil {
		return err
	}
	if rep.Broken != nil {
		return fmt.Errorf("%w: %w", ErrBroken, rep.Broken)
	}
	for c, l := range last {
		if s.heads[c], err = link.HeadOf(l.Seq, l.Hash, l.Event); err != nil {
			return fmt.Errorf("%w: chain %q: %w", ErrBroken, c, err)
		}
	}
	f, err := os.OpenFile(s.opts.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("open audit log: %w", err)
	}
	s.f, s.size = f, st.Size()
	return syncDir(s.opts.Path)
}

// dropTornLine cuts a last line that has no newline (a write cut short),
// returning how many bytes it removed.
func dropTornLine(path string) (int, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("open audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, err
	}
	end := st.Size()
	buf := make([]byte, 64<<10)
	for pos := end; pos > 0; {
		n := min(int64(len(buf)), pos)
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return 0, fmt.Errorf("read audit log: %w", err)
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := pos + int64(i) + 1
			if keep == end {
				return 0, nil
			}
			return int(end - keep), truncate(f, keep)
		}
	}
	return int(end), truncate(f, 0)
}

func truncate(f *os.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("truncate audit log: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync audit log: %w", err)
	}
	return nil
}

// Name names the sink.
func (s *Sink) Name() string { return "jsonl" }

// Heads returns the last link of every chain in the log.
func (s *Sink) Heads(context.Context) (map[string]link.Head, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]link.Head, len(s.heads))
	for k, v := range s.heads {
		out[k] = v
	}
	return out, nil
}

// Write appends the records (each must follow its chain's head) with one
// write and one fsync. On failure nothing stays appended: the file is cut
// back to its size before the write.
func (s *Sink) Write(_ context.Context, recs []link.Record) error {
	if len(recs) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil {
		return errors.New("jsonl: sink closed")
	}
	heads := make(map[string]link.Head, 4)
	n := 0
	for _, r := range recs {
		h, ok := heads[r.Chain]
		if !ok {
			h = s.heads[r.Chain]
		}
		if r.Seq != h.Seq+1 || (h.Seq > 0 && r.Prev != h.Hash) {
			return fmt.Errorf("jsonl: chain %q: link %d does not follow the head %d", r.Chain, r.Seq, h.Seq)
		}
		heads[r.Chain] = r.Head()
		n += len(r.Line) + 1
	}
	if s.opts.MaxBytes > 0 && s.size > 0 && s.size+int64(n) > s.opts.MaxBytes {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	buf := make([]byte, 0, n)
	for _, r := range recs {
		buf = append(buf, r.Line...)
		buf = append(buf, '\n')
	}
	if _, err := s.f.Write(buf); err != nil {
		return errors.Join(fmt.Errorf("append audit log: %w", err), truncate(s.f, s.size))
	}
	if err := s.f.Sync(); err != nil {
		return errors.Join(fmt.Errorf("sync audit log: %w", err), truncate(s.f, s.size))
	}
	s.size += int64(n)
	for k, v := range heads {
		s.heads[k] = v
	}
	return nil
}

// rotate renames the active file to the next Path.NNNNNN and starts a new
// one.
func (s *Sink) rotate() error {
	name := RotatedName(s.opts.Path, s.next)
	if err := os.Rename(s.opts.Path, name); err != nil {
		return fmt.Errorf("rotate audit log: %w", err)
	}
	_ = s.f.Close()
	s.next++
	f, err := os.OpenFile(s.opts.Path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		s.f = nil
		return fmt.Errorf("rotate audit log: %w", err)
	}
	s.f, s.size = f, 0
	return syncDir(s.opts.Path)
}

// Links calls fn with every link of chainName after seq after, in order.
func (s *Sink) Links(ctx context.Context, chainName string, after uint64, fn func(link.Record) error) error {
	files, err := Files(s.opts.Path)
	if err != nil {
		return err
	}
	prefix := chain.LineStart(nil, chainName)
	for _, path := range files {
		if err := scan(ctx, path, prefix, after, fn); err != nil {
			return err
		}
	}
	return nil
}

func scan(ctx context.Context, path string, prefix []byte, after uint64, fn func(link.Record) error) error {
	return eachLine(path, func(_ int, line []byte) error {
		if !bytes.HasPrefix(line, prefix) {
			return nil
		}
		r, err := link.Parse(line)
		if err != nil {
			return fmt.Errorf("read audit log %s: %w", path, err)
		}
		if r.Seq <= after {
			return nil
		}
		if err := fn(r); err != nil {
			return err
		}
		return ctx.Err()
	})
}

// eachLine calls fn with the number (from 0) and bytes of every line of
// the audit log at path, up to the first error; the bytes are valid until
// fn returns.
func eachLine(path string, fn func(n int, line []byte) error) error {
	f, err := regfile.Open(path)
	if err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 256<<10), chain.MaxLinkSize+1)
	for n := 0; sc.Scan(); n++ {
		if err := fn(n, sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read audit log %s: %w", path, err)
	}
	return nil
}

// Close closes the file and releases the lock.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.f != nil {
		errs = append(errs, s.f.Close())
		s.f = nil
	}
	if s.lock != nil {
		errs = append(errs, s.lock.Close())
		s.lock = nil
	}
	return errors.Join(errs...)
}

func syncDir(path string) error {
	if err := regfile.SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("sync audit log directory: %w", err)
	}
	return nil
}

// RotatedName is the name of the n-th rotated file of path.
func RotatedName(path string, n int) string { return fmt.Sprintf("%s.%06d", path, n) }

// rotation returns n when name is the n-th rotated file of active.
func rotation(active, name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, active+".")
	if !ok || rest == "" {
		return 0, false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// Files lists the files of an audit log in the order to verify them.
// arg is the active file (its rotated siblings, arg.NNNNNN, come first,
// in number order), a directory (every *.jsonl in it, each with its
// rotated files), or a glob pattern (the matches ordered the same way).
// A missing active file is not an error (the log may be empty).
func Files(arg string) ([]string, error) {
	var names []string
	switch st, err := os.Stat(arg); {
	case err == nil && st.IsDir():
		entries, err := os.ReadDir(arg)
		if err != nil {
			return nil, fmt.Errorf("list audit log: %w", err)
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			n := e.Name()
			if strings.HasSuffix(n, ".jsonl") || isRotated(n) {
				names = append(names, filepath.Join(arg, n))
			}
		}
	case strings.ContainsAny(arg, "*?["):
		m, err := filepath.Glob(arg)
		if err != nil {
			return nil, fmt.Errorf("audit log pattern %q: %w", arg, err)
		}
		for _, n := range m {
			if st, err := os.Stat(n); err == nil && st.Mode().IsRegular() && !strings.HasSuffix(n, ".lock") {
				names = append(names, n)
			}
		}
	default:
		m, gerr := filepath.Glob(globEscape(arg) + ".[0-9]*")
		if gerr != nil {
			return nil, fmt.Errorf("list audit log: %w", gerr)
		}
		for _, n := range m {
			if _, ok := rotation(arg, n); ok {
				names = append(names, n)
			}
		}
		switch {
		case err == nil:
			names = append(names, arg)
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("audit log: %w", err)
		}
	}
	sortFiles(names)
	return names, nil
}

func isRotated(name string) bool {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return false
	}
	_, ok := rotation(name[:i], name)
	return ok && strings.HasSuffix(name[:i], ".jsonl")
}

// sortFiles orders files by active name, then rotation number, the active
// file last.
func sortFiles(names []string) {
	key := func(n string) (string, int) {
		if i := strings.LastIndexByte(n, '.'); i > 0 && !strings.ContainsRune(n[i:], filepath.Separator) {
			if r, ok := rotation(n[:i], n); ok {
				return n[:i], r
			}
		}
		return n, int(^uint(0) >> 1)
	}
	slices.SortFunc(names, func(a, b string) int {
		ba, ra := key(a)
		bb, rb := key(b)
		if c := strings.Compare(ba, bb); c != 0 {
			return c
		}
		return ra - rb
	})
}

func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

var _ io.Closer = (*Sink)(nil)

// EventIDs calls fn with the chain and event id of every link that
// records a message, reading the log.
func (s *Sink) EventIDs(ctx context.Context, fn func(chain, id string) error) error {
	files, err := Files(s.opts.Path)
	if err != nil {
		return err
	}
	for _, path := range files {
		if err := scanIDs(ctx, path, func(chainName string, id []byte) error {
			return fn(chainName, chain.UnquoteID(id))
		}); err != nil {
			return err
		}
	}
	return nil
}

// Linked returns those of ids that a link of chainName recording a
// message carries, reading the log (a costly call, made only for the ids
// the auditor's filter may have seen).
func (s *Sink) Linked(ctx context.Context, chainName string, ids []string) (map[string]bool, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	out := map[string]bool{}
	files, err := Files(s.opts.Path)
	if err != nil {
		return nil, err
	}
	for _, path := range files {
		if err := scanIDs(ctx, path, func(c string, raw []byte) error {
			if c == chainName {
				if id := chain.UnquoteID(raw); want[id] {
					out[id] = true
				}
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// scanIDs calls fn with the chain and raw event id (chain.EventID) of every
// link of a file that records a message.
func scanIDs(ctx context.Context, path string, fn func(chainName string, id []byte) error) error {
	return eachLine(path, func(n int, line []byte) error {
		l, ok := chain.SplitLine(line)
		if !ok {
			// Not in the canonical layout: parse it.
			var err error
			if l, err = chain.ParseLink(line); err != nil {
				return fmt.Errorf("read audit log %s: %w", path, err)
			}
		}
		id, message, ok := chain.EventID(l.Event)
		if !ok || !message {
			return nil
		}
		if err := fn(l.Chain, id); err != nil {
			return err
		}
		if n%4096 == 0 {
			return ctx.Err()
		}
		return nil
	})
}

// Source returns a chain.Source reading the JSONL files in order (Files
// lists them), as one sequence of links (rotated files continue their
// chains).
func Source(paths []string) chain.Source {
	i := 0
	var f *os.File
	var cur chain.Source
	return func(ctx context.Context, b *chain.Batch) (bool, error) {
		for {
			if cur == nil {
				if i == len(paths) {
					return false, nil
				}
				var err error
				if f, err = regfile.Open(paths[i]); err != nil {
					return false, fmt.Errorf("open audit log: %w", err)
				}
				cur = chain.Lines(f, paths[i])
				i++
			}
			more, err := cur(ctx, b)
			if err != nil || more {
				if err != nil {
					_ = f.Close()
				}
				return true, err
			}
			_ = f.Close()
			cur = nil
			if len(b.Cands) > 0 {
				return true, nil
			}
		}
	}
}
