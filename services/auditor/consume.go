package auditor

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/retry"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// streamLoop appends one stream's messages to their chains, in stream
// order. It is the only writer of the stream's chains, or, partitioned, of
// those its partition owns: the others' messages are acknowledged without
// a link.
type streamLoop struct {
	stream   string
	consumer string
	source   string
	batch    int
	idle     time.Duration
	js       jetstream.JetStream
	cons     jetstream.Consumer
	w        *Writer
	log      *slog.Logger
	budget   *budget                   // the bytes of the messages held, shared by the loops
	pull     int64                     // the most bytes one pull or read-back takes
	tel      *natsbus.ConsumeTelemetry // a span and counts per message
	in       *instruments
	appended metric.MeasurementOption // stream
	// owns reports whether this auditor's partition owns a chain (nil:
	// every chain); partitioned is set when other partitions exist.
	owns        func(chain string) bool
	partitioned bool
	// pos is the highest stream sequence accounted for and committed:
	// recorded, a duplicate or another partition's (Auditor.Sync, lag).
	pos *atomic.Uint64
	// hooks for tests
	dropAcks func() bool
	aborted  func() bool

	applied uint64
	floor   uint64 // the consumer's ack floor at start
	st      jetstream.Stream
	created time.Time            // the stream's creation time, as last seen
	tips    map[string]link.Head // chain tips of the batches sealed
}

// The auditor's retry policy (backoff): the wait between two attempts to
// commit a batch, to read a stream back, or to reach the ClickHouse sink at
// start doubles from retryFirst to retryMax.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 5 * time.Second
)

var policy = retry.Policy{First: retryFirst, Max: retryMax}

// quickWait is how long a pull waits for more messages once it got the
// ones there (a pull by bytes cannot be a no-wait pull in nats.go).
const quickWait = 10 * time.Millisecond

// backoff runs op until it succeeds or ctx ends, by policy; onFail, when
// set, sees every failure (attempt counts from 1) and the wait before the
// next attempt. It is how the auditor tries again: commits, reads of a
// stream, waiting for the ClickHouse sink.
func backoff(ctx context.Context, op func() error, onFail func(attempt int, wait time.Duration, err error)) bool {
	return policy.Do(ctx, func(context.Context) error { return op() }, nil, onFail) == nil
}

func (l *streamLoop) run(ctx context.Context) {
	l.applied = l.w.Applied(l.stream)
	l.tips = map[string]link.Head{}
	// Sealing the next batch overlaps committing the previous one: a
	// batch is handed to the committer, which writes, then acknowledges,
	// in order.
	work := make(chan sealed, 1)
	var wg sync.WaitGroup
	wg.Go(func() { l.commitLoop(ctx, work) })
	defer func() {
		close(work)
		wg.Wait()
	}()
	if !l.recoverPending(ctx, work) {
		return
	}
	pulls := policy.Backoff()
	for ctx.Err() == nil {
		msgs, held, err := l.fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				l.release(l.begin(ctx, msgs, held))
				return
			}
			count(l.in.fetchErrors, 1)
			l.log.WarnContext(ctx, "pull messages", "stream", l.stream, "err", err)
			pulls.Wait(ctx)
		}
		if len(msgs) == 0 {
			l.budget.give(held)
			if err == nil && !l.catchUp(ctx, work) {
				return
			}
			continue
		}
		pulls.Reset()
		s := l.begin(ctx, msgs, held)
		b, ok := l.seal(ctx, msgs, work)
		if !ok {
			l.release(s)
			return
		}
		s.b, s.upto = b, l.applied
		select {
		case work <- s:
		case <-ctx.Done():
			l.release(s)
			return
		}
	}
}

// sealed is a batch on its way to the committer: its messages, the span
// of handling each (natsbus.ConsumeTelemetry), its links, and the bytes it
// holds of the budget, given back once it is acknowledged or handed back.
// A batch of messages read back from the stream has no messages to
// acknowledge.
type sealed struct {
	b     *Batch
	upto  uint64 // the stream sequence accounted for once it is committed
	bytes int64
	msgs  []jetstream.Msg
	spans []context.Context
	hs    []natsbus.Handling
}

// begin starts the span of handling each message and counts it consumed.
func (l *streamLoop) begin(ctx context.Context, msgs []jetstream.Msg, held int64) sealed {
	s := sealed{msgs: msgs, bytes: held, spans: make([]context.Context, len(msgs)), hs: make([]natsbus.Handling, len(msgs))}
	base := context.WithoutCancel(ctx)
	for i, m := range msgs {
		s.spans[i], s.hs[i] = l.tel.Begin(base, m)
	}
	return s
}

// commitLoop commits the batches in order and acknowledges their
// messages; once ctx ends, what is left is given back. A batch's commit has
// a span linked to the spans of its messages.
func (l *streamLoop) commitLoop(ctx context.Context, work <-chan sealed) {
	stopped := false
	for s := range work {
		cctx, span := l.in.commitSpan(ctx, l.stream, linksOf(s.spans))
		if stopped || !l.commit(cctx, s.b) {
			span.End()
			stopped = true
			l.release(s)
			continue
		}
		span.End()
		l.acknowledge(s)
	}
}

// acknowledge acknowledges the messages of a committed batch and gives its
// bytes back.
func (l *streamLoop) acknowledge(s sealed) {
	defer l.budget.give(s.bytes)
	if l.dropAcks != nil && l.dropAcks() {
		for i := range s.msgs {
			l.tel.End(s.spans[i], s.hs[i], natsbus.OutcomeAckFailed, nil)
		}
		return
	}
	for i, m := range s.msgs {
		if err := m.Ack(); err != nil {
			count(l.in.ackErrors, 1)
			l.tel.End(s.spans[i], s.hs[i], natsbus.OutcomeAckFailed, err)
			continue
		}
		l.tel.Acked(s.spans[i])
		l.tel.End(s.spans[i], s.hs[i], natsbus.OutcomeAck, nil)
	}
	l.pos.Store(s.upto)
}

// mine reports whether this auditor's partition owns chain c.
func (l *streamLoop) mine(c string) bool { return l.owns == nil || l.owns(c) }

// seal turns fetched messages into the batch's links: redeliveries of
// messages already recorded are skipped, and messages missing before one
// (delivered but never handled) are read from the stream first
// (readBack), the links sealed before them handed to the committer
// (work) as a batch of their own. Messages of chains another partition
// owns are skipped too, though they count as accounted for (l.applied):
// like duplicates, they are acknowledged with the batch. It returns the
// batch, or false when ctx ended.
func (l *streamLoop) seal(ctx context.Context, msgs []jetstream.Msg, work chan<- sealed) (*Batch, bool) {
	ordered := make([]*link.Message, 0, len(msgs))
	checked := false
	for _, m := range msgs {
		count(l.in.received, 1)
		md, err := m.Metadata()
		if err != nil { // not a JetStream message: cannot happen on a consumer
			continue
		}
		seq := md.Sequence.Stream
		if seq <= l.applied && !checked {
			// A redelivery, or the first message of a stream deleted and
			// re-created (its numbering restarted): the stream tells.
			checked = true
			var reset *link.Message
			if !l.retry(ctx, func() (err error) { reset, err = l.checkReset(ctx); return err }) {
				return nil, false
			}
			if reset != nil {
				ordered = append(ordered, reset)
				l.floor = 0 // the consumer went with the stream
			}
		}
		if seq <= l.applied {
			count(l.in.unlinked, 1, l.in.duplicate)
			continue
		}
		if seq > l.next() {
			// Messages before this one were delivered but never handled
			// (lost in flight, or taken by a run that crashed): they come
			// first, read from the stream. Their redeliveries, later, are
			// duplicates.
			if len(ordered) > 0 {
				b, ok := l.sealBatch(ctx, ordered)
				if !ok || !l.handOver(ctx, work, sealed{b: b, upto: l.applied}) {
					return nil, false
				}
				ordered = ordered[:0:0]
			}
			if !l.readBack(ctx, seq-1, work) {
				return nil, false
			}
		}
		if !l.mine(link.ChainName(l.stream, m.Subject())) {
			count(l.in.unlinked, 1, l.in.otherPartition)
			l.applied = seq
			continue
		}
		ordered = append(ordered, &link.Message{
			Stream: l.stream, Seq: seq, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(),
			Stored: md.Timestamp, Deliveries: md.NumDelivered, Consumer: l.consumer,
		})
		l.applied = seq
	}
	return l.sealBatch(ctx, ordered)
}

// next is the first stream sequence not accounted for.
func (l *streamLoop) next() uint64 { return max(l.applied, l.floor) + 1 }

// readBack links the stream's messages from the first one not accounted
// for up to sequence to, read from the stream a batch (and a pull's bytes,
// taken from the budget first) at a time, each batch handed to the
// committer (work) with the bytes it holds; false when ctx ended.
func (l *streamLoop) readBack(ctx context.Context, to uint64, work chan<- sealed) bool {
	for from := l.next(); from <= to; from = l.next() {
		took, err := l.budget.take(ctx, minPull, l.pull)
		if err != nil {
			return false
		}
		var got []*link.Message
		var n int64
		if !l.retry(ctx, func() (err error) { got, n, err = l.fill(ctx, from, to, took); return err }) {
			l.budget.give(took)
			return false
		}
		l.budget.settle(took, n)
		b, ok := l.sealBatch(ctx, got)
		if !ok {
			l.budget.give(n)
			return false
		}
		if !l.handOver(ctx, work, sealed{b: b, upto: l.applied, bytes: n}) {
			return false
		}
	}
	return true
}

// sealBatch seals msgs into a batch that follows the batches sealed
// before it. Asking a sink whether an event id is in its chain already
// (Writer.SealAll) is retried with backoff; false when ctx ended first.
func (l *streamLoop) sealBatch(ctx context.Context, msgs []*link.Message) (*Batch, bool) {
	msgs = l.expand(msgs)
	var b *Batch
	ok := backoff(ctx, func() error {
		b = &Batch{Base: l.tips}
		return l.w.SealAll(ctx, b, msgs, l.source)
	}, func(_ int, wait time.Duration, err error) {
		if wait == retryFirst || wait == retryMax {
			l.log.WarnContext(ctx, "look up event ids in the audit sink; retrying", "stream", l.stream, "err", err)
		}
	})
	if !ok {
		return nil, false
	}
	for c, h := range b.Tips() {
		l.tips[c] = h
	}
	return b, true
}

// expand puts each notice about the stream (a gap, a reset) in every
// chain of the stream, since the messages it concerns may belong to any:
// the chains recorded so far and those of the messages before it. A
// notice before any chain of the stream goes to the chain of the message
// that follows it, or else of the stream itself (ChainName with no
// subject). Partitioned, only this partition's chains get it (every
// partition reads the whole stream, so each records it in its own); a
// partition with no chain of the stream records it only if it owns the
// stream's own chain.
func (l *streamLoop) expand(msgs []*link.Message) []*link.Message {
	i := slices.IndexFunc(msgs, func(m *link.Message) bool { return m.Notice != nil && m.Chain == "" })
	if i < 0 {
		return msgs
	}
	known := map[string]bool{}
	for c, h := range l.w.Heads() {
		if h.Stream == l.stream {
			known[c] = true
		}
	}
	for c := range l.tips {
		known[c] = true
	}
	out := slices.Clone(msgs[:i])
	for _, m := range out {
		known[link.ChainName(m.Stream, m.Subject)] = true
	}
	for j := i; j < len(msgs); j++ {
		m := msgs[j]
		switch {
		case m.Notice == nil:
			known[link.ChainName(m.Stream, m.Subject)] = true
		case m.Chain != "":
			known[m.Chain] = true
		default:
			if len(known) == 0 {
				c := link.ChainName(l.stream, "")
				if k := slices.IndexFunc(msgs[j:], func(n *link.Message) bool { return n.Notice == nil }); k >= 0 {
					c = link.ChainName(msgs[j+k].Stream, msgs[j+k].Subject)
				}
				if !l.mine(c) {
					l.log.InfoContext(context.Background(), "stream notice left to the partition that owns the stream's chain",
						"stream", l.stream, "chain", c, "notice", m.Notice.Detail)
					continue
				}
				known[c] = true
			}
			for _, c := range slices.Sorted(maps.Keys(known)) {
				n := *m
				n.Chain = c
				out = append(out, &n)
			}
			continue
		}
		out = append(out, m)
	}
	return out
}

// checkReset reads the stream's state and returns the notice of a reset
// when it went back (see resetOf).
func (l *streamLoop) checkReset(ctx context.Context) (*link.Message, error) {
	info, err := l.st.Info(ctx)
	if err != nil {
		return nil, err
	}
	return l.resetOf(ctx, info), nil
}

// resetOf returns the notice of a stream reset, or nil: the stream was
// deleted and re-created since the chains recorded it, as its last
// sequence is below the one recorded or its creation time changed. The
// stream's new messages are then recorded from its start (applied 0).
func (l *streamLoop) resetOf(ctx context.Context, info *jetstream.StreamInfo) *link.Message {
	recreated := !l.created.IsZero() && !info.Created.Equal(l.created)
	l.created = info.Created
	if l.applied == 0 || (!recreated && info.State.LastSeq >= l.applied) {
		return nil
	}
	l.log.WarnContext(ctx, "stream reset: its sequence went back; recording the new stream from its start",
		"stream", l.stream, "recorded", l.applied, "last", info.State.LastSeq, "created", info.Created)
	m := link.Reset(l.stream, l.consumer, l.applied, info.State.LastSeq, time.Now())
	l.applied = 0
	return m
}

// fill reads the messages stored in the stream from sequence from to to,
// or up to a batch of them, or as long as the next one surely fits
// maxBytes (at least one), and returns them with the bytes they hold
// (msgBytes); l.applied tells how far they go. A notice of the gap stands
// for the ones missing (expired or purged before they were recorded).
// Messages of another partition's chains are read and left out:
// accounted for, not missing.
func (l *streamLoop) fill(ctx context.Context, from, to uint64, maxBytes int64) ([]*link.Message, int64, error) {
	var out []*link.Message
	next, n := from, 0 // the first sequence not accounted for, the messages read
	var size int64
	full := false
	for next <= to && n < l.batch {
		if n > 0 && size+minPull > maxBytes {
			full = true
			break
		}
		raw, err := l.st.GetMsg(ctx, next, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, 0, err
		}
		if raw.Sequence > to {
			break
		}
		if raw.Sequence > next {
			out = append(out, l.gap(ctx, next, raw.Sequence-1))
		}
		n++
		next = raw.Sequence + 1
		if !l.mine(link.ChainName(l.stream, raw.Subject)) {
			count(l.in.unlinked, 1, l.in.otherPartition)
			continue
		}
		size += msgBytes(raw.Subject, "", raw.Header, raw.Data)
		out = append(out, &link.Message{
			Stream: l.stream, Seq: raw.Sequence, Subject: raw.Subject, Header: raw.Header, Data: raw.Data,
			Stored: raw.Time, Consumer: l.consumer,
		})
		count(l.in.recovered, 1)
	}
	if full || n == l.batch {
		to = next - 1
	}
	if next <= to {
		out = append(out, l.gap(ctx, next, to))
	}
	l.applied = max(l.applied, to)
	return out, size, nil
}

// gap returns the notice of stream sequences first to last missing.
func (l *streamLoop) gap(ctx context.Context, first, last uint64) *link.Message {
	l.log.WarnContext(ctx, "messages missing from the stream before they were recorded; recording the gap",
		"stream", l.stream, "first", first, "last", last)
	return link.Gap(l.stream, l.consumer, first, last, time.Now())
}

// retry runs op until it succeeds or ctx ends (backoff), logging each
// failure.
func (l *streamLoop) retry(ctx context.Context, op func() error) bool {
	return backoff(ctx, op, func(_ int, _ time.Duration, err error) {
		l.log.WarnContext(ctx, "read the stream; retrying", "stream", l.stream, "err", err)
	})
}

// commit writes the batch, retrying with backoff until it succeeds or ctx
// ends; the messages stay unacknowledged meanwhile (the backlog waits in
// the stream).
func (l *streamLoop) commit(ctx context.Context, b *Batch) bool {
	return backoff(ctx, func() error {
		if err := l.w.Commit(ctx, b); err != nil {
			return err
		}
		l.in.appended.Add(ctx, int64(len(b.Recs)), l.appended)
		if b.Duplicates > 0 {
			l.in.duplicates.Add(ctx, int64(b.Duplicates), l.appended)
		}
		return nil
	}, func(_ int, wait time.Duration, err error) {
		count(l.in.retries, 1)
		if wait == retryFirst || wait == retryMax {
			l.log.WarnContext(ctx, "append to the audit chain; retrying", "stream", l.stream, "links", len(b.Recs), "err", err)
		}
	})
}

// release hands back messages that were not committed, for a prompt
// redelivery (the next run also reads them from the stream at start), and
// ends their spans.
func (l *streamLoop) release(s sealed) {
	defer l.budget.give(s.bytes)
	aborted := l.aborted != nil && l.aborted()
	for i, m := range s.msgs {
		outcome := natsbus.OutcomeNak
		if !aborted {
			if err := m.Nak(); err != nil {
				count(l.in.ackErrors, 1)
				outcome = natsbus.OutcomeAckFailed
			} else {
				l.tel.Nacked(s.spans[i], natsbus.ReasonRelease)
			}
		}
		l.tel.End(s.spans[i], s.hs[i], outcome, nil)
	}
}

// fetch pulls the next messages, at most l.batch of them and at most the
// bytes it takes from the budget first (between minPull and a pull's
// worth, waiting until minPull is free): what is there at once, or else it
// waits up to idle for one and takes what followed it. It returns the
// messages and the bytes of the budget they hold.
//
// Every pull ends when the server says so (FetchMaxWait: the server's
// expiry, the client waiting a second past it), never on a deadline of
// the client's own, not even at Shutdown. The server counts a pull's wait
// from when the request reaches it: a client that gave up on its own
// clock first (FetchContext's deadline, 10% of the wait ahead of the
// server's) left a pull the server still filled when the request arrived
// that late, with a message nobody read, unacknowledged until the
// consumer's ack wait redelivered it (and linked only when a later message
// showed the gap). Shutdown thus waits for the pull in hand, at most idle.
func (l *streamLoop) fetch(ctx context.Context) ([]jetstream.Msg, int64, error) {
	took, err := l.budget.take(ctx, minPull, l.pull)
	if err != nil {
		return nil, 0, err
	}
	wait := min(quickWait, l.idle)
	msgs, err := collect(l.cons.Fetch(l.batch, jetstream.FetchMaxBytes(int(took)), jetstream.FetchMaxWait(wait)))
	if len(msgs) == 0 && err == nil {
		// Idle: wait for one message, holding only what it can need.
		l.budget.give(took - minPull)
		took = minPull
		msgs, err = collect(l.cons.Fetch(1, jetstream.FetchMaxWait(l.idle)))
		if len(msgs) == 1 && err == nil && l.batch > 1 {
			took += l.budget.tryTake(l.pull - took)
			if rest := took - bytesOf(msgs); rest >= pullOverhead {
				var more []jetstream.Msg
				more, err = collect(l.cons.Fetch(l.batch-1, jetstream.FetchMaxBytes(int(rest)), jetstream.FetchMaxWait(wait)))
				msgs = append(msgs, more...)
			}
		}
	}
	held := bytesOf(msgs)
	l.budget.settle(took, held)
	return msgs, held, err
}

// bytesOf is the size of msgs as the server counts it (msgBytes).
func bytesOf(msgs []jetstream.Msg) int64 {
	var n int64
	for _, m := range msgs {
		n += msgBytes(m.Subject(), m.Reply(), m.Headers(), m.Data())
	}
	return n
}

func collect(b jetstream.MessageBatch, err error) ([]jetstream.Msg, error) {
	if err != nil {
		return nil, err
	}
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	err = b.Error()
	if errors.Is(err, jetstream.ErrNoMessages) {
		err = nil
	}
	return out, err
}

// recoverPending links, from the stream, the messages a previous run
// took but did not record: those delivered to the consumer after the last
// one in the chain (readBack). Their redeliveries, later, are duplicates.
// This keeps the chain in stream order across a crash, when the consumer
// would otherwise deliver newer messages before redelivering these. False
// when ctx ended.
func (l *streamLoop) recoverPending(ctx context.Context, work chan<- sealed) bool {
	var info *jetstream.ConsumerInfo
	if !l.retry(ctx, func() (err error) {
		if info, err = l.cons.Info(ctx); err != nil {
			return err
		}
		l.st, err = l.js.Stream(ctx, l.stream)
		return err
	}) {
		return false
	}
	reset := l.resetOf(ctx, l.st.CachedInfo())
	// Messages up to the consumer's ack floor were acknowledged; the
	// floor keeps a new chain store from recording the stream's past. Once
	// the chains hold some of the stream, though, it is no bound: it moves
	// past messages purged before they were delivered, which are then a
	// gap to record.
	//
	// Partitioned, the chains tell less: their last link says how far this
	// partition recorded its own chains, not how far it went through the
	// stream (other partitions' messages leave no trace in them), so the
	// floor stays a bound. The price: messages purged while this
	// partition was away, before its consumer delivered them, are not
	// recorded as a gap (README "Limits").
	l.floor = info.AckFloor.Stream
	if l.applied > 0 && !l.partitioned {
		l.floor = 0
	}
	l.pos.Store(l.next() - 1)
	if reset != nil {
		b, ok := l.sealBatch(ctx, []*link.Message{reset})
		if !ok || !l.handOver(ctx, work, sealed{b: b, upto: l.next() - 1}) {
			return false
		}
	}
	to := info.Delivered.Stream
	if first := l.st.CachedInfo().State.FirstSeq; first > 0 {
		// Messages gone from the stream before anyone took them (expired
		// or purged while the auditor was away): their gap is recorded now.
		to = max(to, first-1)
	}
	if l.next() > to {
		return true
	}
	l.log.InfoContext(ctx, "recovering messages taken but not recorded", "stream", l.stream, "from", l.next(), "to", to)
	return l.readBack(ctx, to, work)
}

// catchUp links, once a pull came back empty, the messages the consumer
// delivered that never reached this loop. A pull that reaches the server
// after nats.go gave it up (the wait and a second after it was sent, on
// the auditor's clock: a busy server or network) is filled all the same,
// and what it is filled with goes to nobody. Left alone, those messages
// would wait unlinked for the ack wait's redelivery or, on a busy
// stream, for a later message to show their gap; read from the stream
// (readBack), they are linked now, and their redeliveries, later, are
// duplicates. The consumer's state is asked for once per empty pull (the
// idle wait, Config.IdleWait); false when ctx ended.
func (l *streamLoop) catchUp(ctx context.Context, work chan<- sealed) bool {
	info, err := l.cons.Info(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		count(l.in.fetchErrors, 1)
		l.log.WarnContext(ctx, "read the consumer's state", "stream", l.stream, "err", err)
		return true // asked again after the next empty pull
	}
	to := info.Delivered.Stream
	if to < l.next() {
		return true
	}
	l.log.InfoContext(ctx, "linking messages the consumer delivered that never arrived", "stream", l.stream,
		"from", l.next(), "to", to)
	return l.readBack(ctx, to, work)
}

// handOver hands s to the committer (work); false, with its bytes given
// back, when ctx ended first.
func (l *streamLoop) handOver(ctx context.Context, work chan<- sealed, s sealed) bool {
	select {
	case work <- s:
		return true
	case <-ctx.Done():
		l.budget.give(s.bytes)
		return false
	}
}
