package auditor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// Sink stores links. Write returns once the records are durable in the
// sink (or fails); records arrive in chain order, each following its
// chain's head in the sink.
type Sink interface {
	Name() string
	Write(ctx context.Context, recs []link.Record) error
	Close() error
}

// HeadReader is a sink that knows the last link of each chain it holds.
type HeadReader interface {
	Heads(ctx context.Context) (map[string]link.Head, error)
}

// ChainHeads is a HeadReader that can look up some chains only.
type ChainHeads interface {
	HeadsOf(ctx context.Context, chains []string) (map[string]link.Head, error)
}

// LinkReader is a sink that reads back a chain's links, to bring another
// sink up to date.
type LinkReader interface {
	Links(ctx context.Context, chain string, after uint64, fn func(link.Record) error) error
}

// Settler is a sink whose writes may take effect after the writer gave up
// on them (ClickHouse commits an insert whose client timed out or
// crashed): Settle waits until those have ended, so that heads read next
// are final. The writer settles a sink before reading its heads to resume
// or to retry.
type Settler interface {
	Settle(ctx context.Context) error
}

// SinkSpec is a sink and whether acknowledging waits for it.
type SinkSpec struct {
	Sink Sink
	// Required: a message is acknowledged only once its link is in this
	// sink. A failing sink that is not required is skipped (counted).
	Required bool
}

// ErrFork is returned by Recover when two sinks hold different links at
// the same place of a chain.
var ErrFork = errors.New("audit sinks disagree")

// Writer seals links and writes them to every sink. The chains are
// partitioned between callers (one stream each), so a chain has one
// writer; Writer keeps the committed heads, the links durable in every
// required sink. With Owns it writes only some chains (this auditor's
// partition): the sinks may hold others, which it leaves alone.
type Writer struct {
	h      chain.Hasher
	strict bool
	sinks  []SinkSpec
	log    *slog.Logger
	in     *instruments
	fence  func(context.Context) error
	owns   func(chain string) bool
	ids    *linkedIDs
	idSink Sink // the sink ids are looked up in (LookupIDs); nil: Recover's choice
	allow  *allowances

	mu    sync.Mutex
	heads map[string]link.Head
}

// NewWriter returns a writer over sinks, counting into tel's meter;
// call Recover before appending.
func NewWriter(h chain.Hasher, sinks []SinkSpec, log *slog.Logger, tel telemetry.Providers) *Writer {
	return &Writer{h: h, sinks: sinks, log: lifecycle.Logger(log), in: newInstruments(tel), heads: map[string]link.Head{}, ids: newLinkedIDs()}
}

// Allow bounds what each host's messages add to the chains (see
// AllowanceConfig); call it before appending. Without it, every message is
// linked as it is.
func (w *Writer) Allow(cfg AllowanceConfig) { w.allow = newAllowances(cfg) }

// LookupIDs names the sink the writer asks whether an event id is in a
// chain already (an IDReader among its sinks); call it before Recover.
// Without it, Recover takes the first required sink that reads ids back,
// else the first that does; with none, only the ids sealed recently are
// known (recentIDs), and an id linked before them could be linked again.
func (w *Writer) LookupIDs(s Sink) { w.idSink = s }

// idReader is the sink Recover loads the ids from (see LookupIDs).
func (w *Writer) idReader() IDReader {
	if r, ok := w.idSink.(IDReader); ok {
		return r
	}
	var first IDReader
	for _, s := range w.sinks {
		r, ok := s.Sink.(IDReader)
		if !ok {
			continue
		}
		if s.Required {
			return r
		}
		if first == nil {
			first = r
		}
	}
	return first
}

// Fence sets the check Commit makes before writing anything: a non-nil
// error (this auditor lost its writer lease) fails the commit unwritten.
func (w *Writer) Fence(check func(context.Context) error) { w.fence = check }

// Owns limits the writer to the chains owns accepts (this auditor's
// partition): Recover reads and brings level only those, and Heads reports
// only those. Call it before Recover; nil owns every chain.
func (w *Writer) Owns(owns func(chain string) bool) { w.owns = owns }

// owned reports whether the writer writes chain c.
func (w *Writer) owned(c string) bool { return w.owns == nil || w.owns(c) }

// Recover reads every sink's heads and brings the sinks that lag behind up
// to date from the one furthest ahead (a crash between two sinks' writes
// leaves them apart); it fails with ErrFork if two sinks disagree. Only
// the chains the writer owns are considered.
func (w *Writer) Recover(ctx context.Context) error {
	heads := make([]map[string]link.Head, len(w.sinks))
	names := map[string]bool{}
	for i, s := range w.sinks {
		hr, ok := s.Sink.(HeadReader)
		if !ok {
			continue
		}
		w.settle(ctx, s.Sink)
		h, err := hr.Heads(ctx)
		if err != nil {
			return fmt.Errorf("read heads of the %s sink: %w", s.Sink.Name(), err)
		}
		mine := make(map[string]link.Head, len(h))
		for c, hd := range h {
			if w.owned(c) {
				mine[c] = hd
				names[c] = true
			}
		}
		heads[i] = mine
	}
	committed := map[string]link.Head{}
	for c := range names {
		lead := -1
		for i, s := range w.sinks {
			if _, ok := s.Sink.(LinkReader); !ok || heads[i] == nil {
				continue
			}
			if lead < 0 || heads[i][c].Seq > heads[lead][c].Seq {
				lead = i
			}
		}
		if lead < 0 {
			continue
		}
		top := heads[lead][c]
		for i, s := range w.sinks {
			if heads[i] == nil || i == lead || heads[i][c].Seq >= top.Seq {
				if heads[i] != nil && heads[i][c].Seq == top.Seq && heads[i][c].Hash != top.Hash {
					return fmt.Errorf("%w: chain %q seq %d is %s in the %s sink but %s in the %s sink", ErrFork,
						c, top.Seq, heads[i][c].Hash, s.Sink.Name(), top.Hash, w.sinks[lead].Sink.Name())
				}
				continue
			}
			n, err := w.catchUp(ctx, w.sinks[lead].Sink, s.Sink, c, heads[i][c])
			if err != nil {
				if !s.Required {
					w.log.WarnContext(ctx, "catch up audit sink", "sink", s.Sink.Name(), "chain", c, "err", err)
					continue
				}
				return err
			}
			count(w.in.caughtUp, n)
			w.log.InfoContext(ctx, "audit sink caught up", "sink", s.Sink.Name(), "chain", c, "links", n, "from", w.sinks[lead].Sink.Name())
		}
		committed[c] = top
	}
	// The sinks are level: the ids of one are those of all.
	r := w.idReader()
	n, err := w.ids.load(ctx, r, w.owned)
	if err != nil {
		return err
	}
	if r == nil {
		w.log.WarnContext(ctx, "no audit sink reads event ids back: an event id is linked once only among the last ones sealed", "recent", recentIDs)
	} else {
		w.log.InfoContext(ctx, "event ids of the audit chains loaded", "sink", r.(Sink).Name(), "ids", n)
	}
	w.mu.Lock()
	w.heads = committed
	w.mu.Unlock()
	return nil
}

// catchUp copies the links of chain c after head from one sink to another.
func (w *Writer) catchUp(ctx context.Context, from, to Sink, c string, head link.Head) (int, error) {
	const chunk = 1000
	var batch []link.Record
	n := 0
	prev := head
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := to.Write(ctx, batch); err != nil {
			return fmt.Errorf("catch up the %s sink from the %s sink: %w", to.Name(), from.Name(), err)
		}
		n += len(batch)
		batch = batch[:0]
		return nil
	}
	err := from.(LinkReader).Links(ctx, c, head.Seq, func(r link.Record) error {
		if r.Seq != prev.Seq+1 || (prev.Seq > 0 && r.Prev != prev.Hash) {
			return fmt.Errorf("%w: chain %q: the %s sink's link %d does not follow the %s sink's head %d (%s)",
				ErrFork, c, from.Name(), r.Seq, to.Name(), prev.Seq, prev.Hash)
		}
		prev = r.Head()
		batch = append(batch, r)
		if len(batch) == chunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, flush()
}

// StrictPayloads makes Seal check every payload as its consumers do
// (link.EntryStrict) instead of the envelope only.
func (w *Writer) StrictPayloads(on bool) { w.strict = on }

// Heads returns the committed heads (of the chains the writer owns).
func (w *Writer) Heads() map[string]link.Head {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]link.Head, len(w.heads))
	for k, v := range w.heads {
		out[k] = v
	}
	return out
}

// Head returns a chain's committed head.
func (w *Writer) Head(c string) link.Head {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.heads[c]
}

// Applied returns the highest stream sequence recorded from stream in the
// chains the writer owns.
func (w *Writer) Applied(stream string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var top uint64
	for _, h := range w.heads {
		if h.Stream == stream {
			top = max(top, h.StreamSeq)
		}
	}
	return top
}

// Batch is a group of records written together, remembering which sinks
// already hold them across retries.
type Batch struct {
	Recs []link.Record
	// Base, when set, holds chain tips that come before the batch (the
	// batches sealed but not yet committed); Seal follows them before the
	// committed heads.
	Base map[string]link.Head
	// Duplicates counts the messages SealAll left out: their event id is
	// in their chain already (or earlier in the batch).
	Duplicates int
	done       []bool
	attempts   []int
	tip        map[string]link.Head
}

// Tips returns the last link of each chain in the batch.
func (b *Batch) Tips() map[string]link.Head { return b.tip }

// Seal appends the link of m to the batch (see SealAll) and returns it;
// false when m's event id is in its chain already.
func (w *Writer) Seal(ctx context.Context, b *Batch, m *link.Message, source string) (link.Record, bool, error) {
	n := len(b.Recs)
	if err := w.SealAll(ctx, b, []*link.Message{m}, source); err != nil || len(b.Recs) == n {
		return link.Record{}, false, err
	}
	return b.Recs[len(b.Recs)-1], true, nil
}

// prepareChunk is how many messages one goroutine prepares at a time.
const prepareChunk = 32

// SealAll appends the links of msgs to the batch, in order: each follows
// the batch's earlier link of its chain, else Base's, else the chain's
// committed head. The messages are checked and canonicalized in parallel;
// a message whose event cannot be recorded as it is becomes a rejection.
//
// A message whose CloudEvent id its chain holds already (a link in the
// sinks, sealed before, or earlier in msgs) is left out and counted
// (Batch.Duplicates, MetricDuplicateIDs): each id is linked once per
// chain, however often and however late it is delivered. Auditor-made
// records are never left out. SealAll fails, leaving b as it was, only
// when a sink must be asked about an id and cannot answer.
func (w *Writer) SealAll(ctx context.Context, b *Batch, msgs []*link.Message, source string) error {
	if b.tip == nil {
		b.tip = map[string]link.Head{}
	}
	prep := make([]link.Prepared, len(msgs))
	if workers := min(runtime.GOMAXPROCS(0), (len(msgs)+prepareChunk-1)/prepareChunk); workers <= 1 {
		for i, m := range msgs {
			prep[i] = link.Prepare(m, source, w.strict)
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					lo := int(next.Add(prepareChunk)) - prepareChunk
					if lo >= len(msgs) {
						return
					}
					for i := lo; i < min(lo+prepareChunk, len(msgs)); i++ {
						prep[i] = link.Prepare(msgs[i], source, w.strict)
					}
				}
			})
		}
		wg.Wait()
	}
	keys := make([]idKey, 0, len(prep))
	for _, p := range prep {
		if !p.Meta.Rejected && p.Meta.ID != "" {
			keys = append(keys, idKey{p.Chain, p.Meta.ID})
		}
	}
	linked, err := w.ids.known(ctx, keys)
	if err != nil {
		return err
	}
	sealed := keys[:0]
	for i, p := range prep {
		k := idKey{p.Chain, p.Meta.ID}
		if !p.Meta.Rejected && p.Meta.ID != "" && linked[k] {
			b.Duplicates++
			continue
		}
		if w.allow != nil {
			d, ended, started := w.allow.admit(msgs[i], len(p.Bytes))
			if ended != nil {
				w.seal(b, link.Prepare(unrecordedNotice(msgs[i], ended), source, false))
			}
			switch d {
			case admitCompact:
				p = link.PrepareOverAllowance(msgs[i], source)
			case admitNone:
				if started {
					w.seal(b, link.Prepare(w.allow.overAllowance(msgs[i]), source, false))
				}
				count(w.in.unlinked, 1, w.in.overAllowance)
				continue
			}
		}
		if !p.Meta.Rejected && p.Meta.ID != "" {
			linked[k] = true // once in this batch too
			sealed = append(sealed, k)
		}
		w.seal(b, p)
	}
	w.ids.add(sealed)
	return nil
}

// seal appends p's link to the batch, after the batch's earlier link of
// its chain, else Base's, else the chain's committed head.
func (w *Writer) seal(b *Batch, p link.Prepared) {
	head, ok := b.tip[p.Chain]
	if !ok {
		if head, ok = b.Base[p.Chain]; !ok {
			head = w.Head(p.Chain)
		}
	}
	r := p.Seal(w.h, head)
	if r.Meta.Rejected {
		count(w.in.rejections, 1)
	}
	b.tip[p.Chain] = r.Head()
	b.Recs = append(b.Recs, r)
}

// Commit writes the batch to every sink that does not hold it yet, in
// parallel, and on success makes its links the committed heads. Call it
// again after a failure: a sink that failed is first asked for its heads
// (if it knows them), so that links it did store are not written twice.
func (w *Writer) Commit(ctx context.Context, b *Batch) error {
	if len(b.Recs) == 0 {
		return nil
	}
	if w.fence != nil {
		if err := w.fence(ctx); err != nil {
			return err
		}
	}
	if b.done == nil {
		b.done = make([]bool, len(w.sinks))
		b.attempts = make([]int, len(w.sinks))
	}
	errs := make([]error, len(w.sinks))
	var wg sync.WaitGroup
	for i, s := range w.sinks {
		if b.done[i] {
			continue
		}
		wg.Go(func() {
			recs := b.Recs
			if b.attempts[i] > 0 {
				var err error
				if recs, err = w.missing(ctx, s.Sink, recs); err != nil {
					errs[i] = err
					return
				}
			}
			b.attempts[i]++
			if len(recs) > 0 {
				errs[i] = s.Sink.Write(ctx, recs)
			}
		})
	}
	wg.Wait()
	var failed []error
	for i, s := range w.sinks {
		if b.done[i] {
			continue
		}
		if errs[i] == nil {
			b.done[i] = true
			continue
		}
		count(w.in.sinkErrors, 1, sinkAttr(s.Sink.Name()))
		if !s.Required {
			b.done[i] = true
			count(w.in.sinkSkipped, len(b.Recs), sinkAttr(s.Sink.Name()))
			w.log.WarnContext(ctx, "optional audit sink failed; links skipped", "sink", s.Sink.Name(), "links", len(b.Recs), "err", errs[i])
			continue
		}
		failed = append(failed, fmt.Errorf("%s sink: %w", s.Sink.Name(), errs[i]))
	}
	if len(failed) > 0 {
		return errors.Join(failed...)
	}
	w.mu.Lock()
	for c, h := range b.tip {
		w.heads[c] = h
	}
	w.mu.Unlock()
	count(w.in.batches, 1)
	return nil
}

// settle waits for a Settler sink's writes in flight. A sink that cannot
// tell (a role without access to ClickHouse's system.processes) is read as
// it is, with a warning.
func (w *Writer) settle(ctx context.Context, s Sink) {
	st, ok := s.(Settler)
	if !ok {
		return
	}
	if err := st.Settle(ctx); err != nil && ctx.Err() == nil {
		w.log.WarnContext(ctx, "audit sink: cannot wait for writes in flight; reading its heads as they are", "sink", s.Name(), "err", err)
	}
}

// missing drops the records a sink already holds (a write that failed
// after it stored them, or timed out).
func (w *Writer) missing(ctx context.Context, s Sink, recs []link.Record) ([]link.Record, error) {
	var heads map[string]link.Head
	var err error
	w.settle(ctx, s)
	switch hr := s.(type) {
	case ChainHeads:
		chains := map[string]bool{}
		var list []string
		for _, r := range recs {
			if !chains[r.Chain] {
				chains[r.Chain] = true
				list = append(list, r.Chain)
			}
		}
		heads, err = hr.HeadsOf(ctx, list)
	case HeadReader:
		heads, err = hr.Heads(ctx)
	default:
		return recs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read heads: %w", err)
	}
	out := recs[:0:0]
	for _, r := range recs {
		if r.Seq > heads[r.Chain].Seq {
			out = append(out, r)
		}
	}
	return out, nil
}

// Close closes every sink.
func (w *Writer) Close() error {
	var errs []error
	for _, s := range w.sinks {
		if err := s.Sink.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the %s sink: %w", s.Sink.Name(), err))
		}
	}
	return errors.Join(errs...)
}
