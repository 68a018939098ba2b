package spool

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
)

// Errors, each possibly wrapped with detail; check them with errors.Is.
var (
	// ErrFull means an Append would exceed MaxBytes or MaxEvents; nothing
	// was written.
	ErrFull = errors.New("spool full")
	// ErrTooLarge means a record is larger than MaxRecordBytes.
	ErrTooLarge = errors.New("record larger than the spool allows")
	// ErrClosed means the spool was closed.
	ErrClosed = errors.New("spool closed")
	// ErrCorrupt means a record failed its check when read back after
	// Open had verified it (damage while running); reopening the spool
	// cuts the segment there.
	ErrCorrupt = errors.New("corrupt spool record")
)

// Defaults of Options.
const (
	DefaultMaxBytes       = 256 << 20
	DefaultMaxEvents      = 100_000
	DefaultSegmentBytes   = 16 << 20
	DefaultMaxRecordBytes = 4 << 20
)

const (
	magic     = "RTSPOOL1"
	headerLen = int64(len(magic))
	frameLen  = 8 // uint32 length + uint32 CRC
	segSuffix = ".seg"
	cursorFn  = "cursor"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Options bound a spool; zero values mean the defaults.
type Options struct {
	// MaxBytes bounds the undelivered records, framing included.
	MaxBytes int64
	// MaxEvents bounds the number of undelivered records.
	MaxEvents int
	// SegmentBytes is the size at which a new segment file starts.
	SegmentBytes int64
	// MaxRecordBytes bounds one record.
	MaxRecordBytes int
}

func (o Options) withDefaults() Options {
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxEvents <= 0 {
		o.MaxEvents = DefaultMaxEvents
	}
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.MaxRecordBytes <= 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	return o
}

// Recovery describes bytes Open cut from a damaged segment.
type Recovery struct {
	// Segment is the segment file name.
	Segment string
	// Offset is where the segment was cut; Bytes how many bytes went.
	Offset int64
	Bytes  int64
	// Reason says what was wrong at Offset.
	Reason string
}

// Record is one record read by Next; pass it to Commit once handled.
type Record struct {
	// Data is the payload, owned by the caller.
	Data []byte

	seg        uint64
	start, end int64
}

type segment struct {
	id   uint64
	size int64
}

type pos struct {
	seg uint64
	off int64
}

// Spool is an open spool directory.
type Spool struct {
	dir  string
	opts Options

	mu        sync.Mutex
	segs      []segment // ascending; the last one is written
	w         *os.File  // the last segment, for appending
	r         *os.File  // the segment being read
	rID       uint64
	cursor    pos // first undelivered record, as persisted
	read      pos // next record Next returns
	count     int
	bytes     int64
	changed   chan struct{}
	closed    bool
	err       error // a failed write left the spool unusable
	recovered []Recovery
}

// Open opens (creating it with mode 0700 when needed) the spool in dir,
// checks the undelivered records and cuts damaged segment tails (see
// Recovered).
func Open(dir string, opts Options) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open spool %s: %w", dir, err)
	}
	s := &Spool{dir: dir, opts: opts.withDefaults(), changed: make(chan struct{})}
	if err := s.load(); err != nil {
		_ = s.closeFiles()
		return nil, fmt.Errorf("open spool %s: %w", dir, err)
	}
	return s, nil
}

func (s *Spool) segPath(id uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", id, segSuffix))
}

func (s *Spool) load() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	var ids []uint64
	for _, e := range entries {
		name := e.Name()
		switch {
		case strings.HasSuffix(name, ".tmp"):
			_ = os.Remove(filepath.Join(s.dir, name)) // an interrupted cursor write
		case strings.HasSuffix(name, segSuffix) && e.Type().IsRegular():
			id, err := strconv.ParseUint(strings.TrimSuffix(name, segSuffix), 10, 64)
			if err == nil && id > 0 {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)

	cur, ok, err := s.readCursor()
	if err != nil {
		return err
	}
	if !ok {
		first := uint64(1)
		if len(ids) > 0 {
			first = ids[0]
		}
		cur = pos{seg: first, off: headerLen}
	}
	// Segments before the cursor were delivered; a crash may have left
	// them behind.
	for len(ids) > 0 && ids[0] < cur.seg {
		if err := os.Remove(s.segPath(ids[0])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		ids = ids[1:]
	}
	if len(ids) > 0 && ids[0] != cur.seg {
		cur = pos{seg: ids[0], off: headerLen}
	}
	for _, id := range ids {
		from := headerLen
		if id == cur.seg {
			from = cur.off
		}
		size, n, nbytes, err := s.check(id, from)
		if err != nil {
			return err
		}
		if id == cur.seg {
			cur.off = min(max(cur.off, headerLen), size)
		}
		s.segs = append(s.segs, segment{id: id, size: size})
		s.count += n
		s.bytes += nbytes
	}
	if len(s.segs) == 0 {
		if err := s.newSegment(max(cur.seg, 1)); err != nil {
			return err
		}
		cur = pos{seg: s.segs[0].id, off: headerLen}
	} else {
		last := s.segs[len(s.segs)-1]
		w, err := os.OpenFile(s.segPath(last.id), os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if _, err := w.Seek(last.size, io.SeekStart); err != nil {
			_ = w.Close()
			return err
		}
		s.w = w
	}
	s.cursor, s.read = cur, cur
	return nil
}

// check verifies segment id's header and its records from offset from on,
// cutting the file at the first bad one; it returns the resulting size
// and the number and framed bytes of the records from from on.
func (s *Spool) check(id uint64, from int64) (size int64, n int, nbytes int64, err error) {
	path := s.segPath(id)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() { _ = f.Close() }() // synced where it matters
	st, err := f.Stat()
	if err != nil {
		return 0, 0, 0, err
	}
	size = st.Size()
	hdr := make([]byte, headerLen)
	if _, err := f.ReadAt(hdr, 0); err != nil || string(hdr) != magic {
		// A segment created by a crashed Append, or a foreign file: start
		// it again empty.
		if size > 0 {
			s.recovered = append(s.recovered, Recovery{Segment: filepath.Base(path), Offset: 0, Bytes: size, Reason: "bad segment header"})
		}
		if err := f.Truncate(0); err != nil {
			return 0, 0, 0, err
		}
		if _, err := f.WriteAt([]byte(magic), 0); err != nil {
			return 0, 0, 0, err
		}
		return headerLen, 0, 0, f.Sync()
	}
	off := max(from, headerLen)
	if off > size {
		return size, 0, 0, nil
	}
	var buf []byte
	for off < size {
		next, data, reason := s.readAt(f, off, size, buf)
		if reason != "" {
			s.recovered = append(s.recovered, Recovery{Segment: filepath.Base(path), Offset: off, Bytes: size - off, Reason: reason})
			if err := f.Truncate(off); err != nil {
				return 0, 0, 0, err
			}
			if err := f.Sync(); err != nil {
				return 0, 0, 0, err
			}
			return off, n, nbytes, nil
		}
		buf = data[:0]
		n++
		nbytes += next - off
		off = next
	}
	return size, n, nbytes, nil
}

// readAt reads the record at off of a file of the given size into buf
// (reallocated when short); reason is non-empty when the record is bad.
func (s *Spool) readAt(f *os.File, off, size int64, buf []byte) (next int64, data []byte, reason string) {
	if size-off < frameLen {
		return 0, nil, "truncated record frame"
	}
	var frame [frameLen]byte
	if _, err := f.ReadAt(frame[:], off); err != nil {
		return 0, nil, "unreadable record frame: " + err.Error()
	}
	n := int64(binary.LittleEndian.Uint32(frame[:4]))
	if n > int64(s.opts.MaxRecordBytes) {
		return 0, nil, fmt.Sprintf("record length %d over the %d-byte limit", n, s.opts.MaxRecordBytes)
	}
	if off+frameLen+n > size {
		return 0, nil, "truncated record"
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	data = buf[:n]
	if _, err := f.ReadAt(data, off+frameLen); err != nil {
		return 0, nil, "unreadable record: " + err.Error()
	}
	crc := crc32.Update(crc32.Checksum(frame[:4], castagnoli), castagnoli, data)
	if crc != binary.LittleEndian.Uint32(frame[4:]) {
		return 0, nil, "record checksum mismatch"
	}
	return off + frameLen + n, data, ""
}

func (s *Spool) readCursor() (pos, bool, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, cursorFn))
	if errors.Is(err, fs.ErrNotExist) {
		return pos{}, false, nil
	}
	if err != nil {
		return pos{}, false, err
	}
	if len(data) != 20 || crc32.Checksum(data[:16], castagnoli) != binary.LittleEndian.Uint32(data[16:]) {
		// Redeliver from the oldest segment: duplicates, not losses.
		s.recovered = append(s.recovered, Recovery{Segment: cursorFn, Bytes: int64(len(data)), Reason: "bad cursor; delivering from the oldest segment"})
		return pos{}, false, nil
	}
	p := pos{seg: binary.LittleEndian.Uint64(data[:8]), off: int64(binary.LittleEndian.Uint64(data[8:16]))}
	if p.seg == 0 || p.off < headerLen {
		s.recovered = append(s.recovered, Recovery{Segment: cursorFn, Bytes: int64(len(data)), Reason: "bad cursor; delivering from the oldest segment"})
		return pos{}, false, nil
	}
	return p, true, nil
}

func (s *Spool) writeCursor(p pos) error {
	var data [20]byte
	binary.LittleEndian.PutUint64(data[:8], p.seg)
	binary.LittleEndian.PutUint64(data[8:16], uint64(p.off))
	binary.LittleEndian.PutUint32(data[16:], crc32.Checksum(data[:16], castagnoli))
	tmp := filepath.Join(s.dir, cursorFn+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data[:])
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, cursorFn))
	}
	if err == nil {
		err = regfile.SyncDir(s.dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write spool cursor: %w", err)
	}
	return nil
}

// newSegment creates segment id with its header and makes it the one
// written.
func (s *Spool) newSegment(id uint64) error {
	f, err := os.OpenFile(s.segPath(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte(magic)); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := regfile.SyncDir(s.dir); err != nil {
		_ = f.Close()
		return err
	}
	if s.w != nil {
		_ = s.w.Close()
	}
	s.w = f
	s.segs = append(s.segs, segment{id: id, size: headerLen})
	return nil
}

// Append writes records, in order, as one batch and fsyncs them. It
// refuses the whole batch with ErrFull when it would take the undelivered
// records over MaxBytes or MaxEvents, and with ErrTooLarge when a record
// exceeds MaxRecordBytes.
func (s *Spool) Append(records ...[]byte) error {
	if len(records) == 0 {
		return nil
	}
	var total int64
	for _, r := range records {
		if len(r) > s.opts.MaxRecordBytes {
			return fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(r), s.opts.MaxRecordBytes)
		}
		total += frameLen + int64(len(r))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.err != nil {
		return s.err
	}
	if s.count+len(records) > s.opts.MaxEvents || s.bytes+total > s.opts.MaxBytes {
		return fmt.Errorf("%w: %d records, %d bytes undelivered (limits %d, %d)",
			ErrFull, s.count, s.bytes, s.opts.MaxEvents, s.opts.MaxBytes)
	}
	last := &s.segs[len(s.segs)-1]
	if last.size >= s.opts.SegmentBytes {
		if err := s.w.Sync(); err != nil {
			return s.fail(err)
		}
		if err := s.newSegment(last.id + 1); err != nil {
			return fmt.Errorf("spool: new segment: %w", err)
		}
		last = &s.segs[len(s.segs)-1]
	}
	buf := make([]byte, 0, total)
	for _, r := range records {
		var frame [frameLen]byte
		binary.LittleEndian.PutUint32(frame[:4], uint32(len(r)))
		crc := crc32.Update(crc32.Checksum(frame[:4], castagnoli), castagnoli, r)
		binary.LittleEndian.PutUint32(frame[4:], crc)
		buf = append(buf, frame[:]...)
		buf = append(buf, r...)
	}
	if _, err := s.w.Write(buf); err != nil {
		return s.undo(last, err)
	}
	if err := s.w.Sync(); err != nil {
		return s.undo(last, err)
	}
	last.size += total
	s.count += len(records)
	s.bytes += total
	s.broadcast()
	return nil
}

// undo cuts a failed batch off the segment, so that a partial write never
// sits before later records.
func (s *Spool) undo(last *segment, err error) error {
	if terr := s.w.Truncate(last.size); terr != nil {
		return s.fail(errors.Join(err, terr))
	}
	if _, serr := s.w.Seek(last.size, io.SeekStart); serr != nil {
		return s.fail(errors.Join(err, serr))
	}
	return fmt.Errorf("spool append: %w", err)
}

func (s *Spool) fail(err error) error {
	s.err = fmt.Errorf("spool unusable after a failed write (reopen to recover): %w", err)
	return s.err
}

func (s *Spool) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Spool) segIndex(id uint64) int {
	for i := range s.segs {
		if s.segs[i].id == id {
			return i
		}
	}
	return -1
}

// Next returns the oldest record not yet returned, waiting for one until
// ctx ends. After a restart it starts at the first uncommitted record.
// Only one goroutine may call Next and Commit.
func (s *Spool) Next(ctx context.Context) (Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closed {
			return Record{}, ErrClosed
		}
		i := s.segIndex(s.read.seg)
		if i < 0 {
			return Record{}, fmt.Errorf("spool: read position in missing segment %d", s.read.seg)
		}
		seg := s.segs[i]
		if s.read.off < seg.size {
			return s.readRecord(seg)
		}
		if i+1 < len(s.segs) {
			s.read = pos{seg: s.segs[i+1].id, off: headerLen}
			continue
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
			s.mu.Lock()
		case <-ctx.Done():
			s.mu.Lock()
			return Record{}, context.Cause(ctx)
		}
	}
}

func (s *Spool) readRecord(seg segment) (Record, error) {
	if s.r == nil || s.rID != seg.id {
		if s.r != nil {
			_ = s.r.Close()
			s.r = nil
		}
		f, err := os.Open(s.segPath(seg.id))
		if err != nil {
			return Record{}, fmt.Errorf("spool read: %w", err)
		}
		s.r, s.rID = f, seg.id
	}
	next, data, reason := s.readAt(s.r, s.read.off, seg.size, nil)
	if reason != "" {
		return Record{}, fmt.Errorf("%w: %s at %s offset %d", ErrCorrupt, reason, filepath.Base(s.segPath(seg.id)), s.read.off)
	}
	rec := Record{Data: data, seg: seg.id, start: s.read.off, end: next}
	s.read.off = next
	return rec, nil
}

// Commit marks r and every record before it delivered: it persists the
// read position and deletes the segments entirely before it.
func (s *Spool) Commit(r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	i := s.segIndex(r.seg)
	if i < 0 || r.end <= r.start {
		return fmt.Errorf("spool: commit of a record not from this spool")
	}
	if r.seg < s.cursor.seg || (r.seg == s.cursor.seg && r.end <= s.cursor.off) {
		return nil // already committed
	}
	cur := pos{seg: r.seg, off: r.end}
	if cur.off >= s.segs[i].size && i+1 < len(s.segs) {
		cur = pos{seg: s.segs[i+1].id, off: headerLen}
	}
	if err := s.writeCursor(cur); err != nil {
		return err
	}
	// Count what lies between the old and the new cursor: normally just r.
	n, nbytes := 1, r.end-r.start
	if s.cursor.seg != r.seg || s.cursor.off != r.start {
		n, nbytes = s.countBetween(s.cursor, pos{seg: r.seg, off: r.end})
	}
	s.cursor = cur
	if s.read.seg < cur.seg {
		s.read = cur // the end of a delivered segment is the start of the next
	}
	s.count -= n
	s.bytes -= nbytes
	for len(s.segs) > 1 && s.segs[0].id < cur.seg {
		id := s.segs[0].id
		if s.r != nil && s.rID == id {
			_ = s.r.Close()
			s.r = nil
		}
		if err := os.Remove(s.segPath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("spool: remove delivered segment: %w", err)
		}
		s.segs = s.segs[1:]
	}
	s.broadcast()
	return nil
}

// countBetween counts the records and framed bytes from a to b, for a
// Commit that skips records (the caller committed only the last of
// several).
func (s *Spool) countBetween(a, b pos) (int, int64) {
	n, nbytes := 0, int64(0)
	for _, seg := range s.segs {
		if seg.id < a.seg || seg.id > b.seg {
			continue
		}
		from, to := headerLen, seg.size
		if seg.id == a.seg {
			from = a.off
		}
		if seg.id == b.seg {
			to = b.off
		}
		f, err := os.Open(s.segPath(seg.id))
		if err != nil {
			continue
		}
		for off := from; off < to; {
			next, _, reason := s.readAt(f, off, seg.size, nil)
			if reason != "" {
				break
			}
			n++
			nbytes += next - off
			off = next
		}
		_ = f.Close()
	}
	return n, nbytes
}

// Pending returns the number and framed bytes of the undelivered records.
func (s *Spool) Pending() (records int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count, s.bytes
}

// Segments returns the number of segment files.
func (s *Spool) Segments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.segs)
}

// WaitEmpty waits until every record is committed or ctx ends.
func (s *Spool) WaitEmpty(ctx context.Context) error {
	s.mu.Lock()
	for s.count > 0 && !s.closed {
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		s.mu.Lock()
	}
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return nil
}

// Recovered returns what Open cut from damaged segments.
func (s *Spool) Recovered() []Recovery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recovered)
}

// Dir returns the spool directory.
func (s *Spool) Dir() string { return s.dir }

// Close closes the spool's files; Next and WaitEmpty return ErrClosed.
// Safe to call twice.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.broadcast()
	return s.closeFiles()
}

func (s *Spool) closeFiles() error {
	var errs []error
	if s.w != nil {
		errs = append(errs, s.w.Sync(), s.w.Close())
		s.w = nil
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
		s.r = nil
	}
	return errors.Join(errs...)
}
