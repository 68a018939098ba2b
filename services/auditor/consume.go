package auditor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/metric"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// streamLoop appends one stream's messages to their chains, in stream
// order. It is the only writer of the stream's chains.
type streamLoop struct {
	stream   string
	consumer string
	source   string
	batch    int
	idle     time.Duration
	js       jetstream.JetStream
	cons     jetstream.Consumer
	w        *Writer
	stats    *Stats
	log      *slog.Logger
	tel      *natsbus.ConsumeTelemetry // a span and counts per message
	in       *instruments
	appended metric.MeasurementOption // stream
	// hooks for tests
	dropAcks func() bool
	aborted  func() bool

	applied uint64
	floor   uint64 // the consumer's ack floor at start
	st      jetstream.Stream
	tips    map[string]link.Head // chain tips of the batches sealed
}

// retry bounds the wait between two attempts to commit a batch.
const (
	retryFirst = 50 * time.Millisecond
	retryMax   = 5 * time.Second
)

func (l *streamLoop) run(ctx context.Context) {
	l.applied = l.w.Applied(l.stream)
	l.tips = map[string]link.Head{}
	if !l.retry(ctx, func() error { return l.recoverPending(ctx) }) {
		return
	}
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
	wait := retryFirst
	for ctx.Err() == nil {
		msgs, err := l.fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				l.release(l.begin(ctx, msgs))
				return
			}
			l.stats.FetchErrors.Add(1)
			l.log.WarnContext(ctx, "pull messages", "stream", l.stream, "err", err)
			sleep(ctx, wait)
			wait = min(2*wait, retryMax)
		}
		if len(msgs) == 0 {
			continue
		}
		wait = retryFirst
		s := l.begin(ctx, msgs)
		b, ok := l.seal(ctx, msgs)
		if !ok {
			l.release(s)
			return
		}
		s.b = b
		select {
		case work <- s:
		case <-ctx.Done():
			l.release(s)
			return
		}
	}
}

// sealed is a batch on its way to the committer: its messages, the span
// of handling each (natsbus.ConsumeTelemetry), and its links.
type sealed struct {
	b     *Batch
	msgs  []jetstream.Msg
	spans []context.Context
	hs    []natsbus.Handling
}

// begin starts the span of handling each message and counts it consumed.
func (l *streamLoop) begin(ctx context.Context, msgs []jetstream.Msg) sealed {
	s := sealed{msgs: msgs, spans: make([]context.Context, len(msgs)), hs: make([]natsbus.Handling, len(msgs))}
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
		if l.dropAcks != nil && l.dropAcks() {
			for i := range s.msgs {
				l.tel.End(s.spans[i], s.hs[i], natsbus.OutcomeAckFailed, nil)
			}
			continue
		}
		for i, m := range s.msgs {
			if err := m.Ack(); err != nil {
				l.stats.AckErrors.Add(1)
				l.tel.End(s.spans[i], s.hs[i], natsbus.OutcomeAckFailed, err)
				continue
			}
			l.tel.Acked(s.spans[i])
			l.tel.End(s.spans[i], s.hs[i], natsbus.OutcomeAck, nil)
		}
	}
}

// seal turns fetched messages into the batch's links: redeliveries of
// messages already recorded are skipped, and messages missing before one
// (delivered but never handled) are read from the stream first. It
// returns false when ctx ended.
func (l *streamLoop) seal(ctx context.Context, msgs []jetstream.Msg) (*Batch, bool) {
	ordered := make([]*link.Message, 0, len(msgs))
	for _, m := range msgs {
		l.stats.Received.Add(1)
		md, err := m.Metadata()
		if err != nil { // not a JetStream message: cannot happen on a consumer
			continue
		}
		seq := md.Sequence.Stream
		if seq <= l.applied {
			l.stats.Duplicates.Add(1)
			continue
		}
		if from := max(l.applied, l.floor) + 1; seq > from {
			// Messages before this one were delivered but never handled
			// (lost in flight, or taken by a run that crashed): they come
			// first, read from the stream. Their redeliveries, later, are
			// duplicates.
			var got []*link.Message
			if !l.retry(ctx, func() (err error) { got, err = l.fill(ctx, from, seq-1); return err }) {
				return nil, false
			}
			ordered = append(ordered, got...)
		}
		ordered = append(ordered, &link.Message{
			Stream: l.stream, Seq: seq, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(),
			Stored: md.Timestamp, Deliveries: md.NumDelivered, Consumer: l.consumer,
		})
		l.applied = seq
	}
	b := &Batch{Base: l.tips}
	l.w.SealAll(b, ordered, l.source)
	for c, h := range b.Tips() {
		l.tips[c] = h
	}
	return b, true
}

// fill reads the messages stored in the stream from sequence from to to,
// skipping the ones deleted.
func (l *streamLoop) fill(ctx context.Context, from, to uint64) ([]*link.Message, error) {
	var out []*link.Message
	for seq := from; seq <= to; {
		raw, err := l.st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if raw.Sequence > to {
			break
		}
		out = append(out, &link.Message{
			Stream: l.stream, Seq: raw.Sequence, Subject: raw.Subject, Header: raw.Header, Data: raw.Data,
			Stored: raw.Time, Consumer: l.consumer,
		})
		seq = raw.Sequence + 1
	}
	l.stats.Recovered.Add(uint64(len(out)))
	l.applied = max(l.applied, to)
	return out, nil
}

// retry runs op until it succeeds or ctx ends.
func (l *streamLoop) retry(ctx context.Context, op func() error) bool {
	wait := retryFirst
	for {
		err := op()
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		l.log.WarnContext(ctx, "read the stream; retrying", "stream", l.stream, "err", err)
		sleep(ctx, wait)
		wait = min(2*wait, retryMax)
	}
}

// commit writes the batch, retrying with backoff until it succeeds or ctx
// ends; the messages stay unacknowledged meanwhile (the backlog waits in
// the stream).
func (l *streamLoop) commit(ctx context.Context, b *Batch) bool {
	wait := retryFirst
	for {
		err := l.w.Commit(ctx, b)
		if err == nil {
			l.in.appended.Add(ctx, int64(len(b.Recs)), l.appended)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		l.stats.Retries.Add(1)
		if wait == retryFirst || wait == retryMax {
			l.log.WarnContext(ctx, "append to the audit chain; retrying", "stream", l.stream, "links", len(b.Recs), "err", err)
		}
		sleep(ctx, wait)
		wait = min(2*wait, retryMax)
	}
}

// release hands back messages that were not committed, for a prompt
// redelivery (the next run also reads them from the stream at start), and
// ends their spans.
func (l *streamLoop) release(s sealed) {
	aborted := l.aborted != nil && l.aborted()
	for i, m := range s.msgs {
		outcome := natsbus.OutcomeNak
		if !aborted {
			if err := m.Nak(); err != nil {
				l.stats.AckErrors.Add(1)
				outcome = natsbus.OutcomeAckFailed
			} else {
				l.tel.Nacked(s.spans[i], natsbus.ReasonRelease)
			}
		}
		l.tel.End(s.spans[i], s.hs[i], outcome, nil)
	}
}

// fetch pulls the next messages: what is there at once, or else waits up
// to idle for one and takes what followed it.
func (l *streamLoop) fetch(ctx context.Context) ([]jetstream.Msg, error) {
	msgs, err := collect(l.cons.FetchNoWait(l.batch))
	if len(msgs) > 0 || err != nil {
		return msgs, err
	}
	fctx, cancel := context.WithTimeout(ctx, l.idle)
	defer cancel()
	one, err := collect(l.cons.Fetch(1, jetstream.FetchContext(fctx)))
	if err != nil || len(one) == 0 {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = nil
		}
		return one, err
	}
	if l.batch == 1 {
		return one, nil
	}
	more, err := collect(l.cons.FetchNoWait(l.batch - 1))
	return append(one, more...), err
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

// recoverPending appends, from the stream, the messages a previous run
// took but did not record: those delivered to the consumer after the last
// one in the chain. Their redeliveries, later, are duplicates. This keeps
// the chain in stream order across a crash, when the consumer would
// otherwise deliver newer messages before redelivering these.
func (l *streamLoop) recoverPending(ctx context.Context) error {
	info, err := l.cons.Info(ctx)
	if err != nil {
		return err
	}
	if l.st, err = l.js.Stream(ctx, l.stream); err != nil {
		return err
	}
	l.floor = info.AckFloor.Stream
	from := max(l.floor, l.applied) + 1
	to := info.Delivered.Stream
	if from > to {
		return nil
	}
	l.log.InfoContext(ctx, "recovering messages taken but not recorded", "stream", l.stream, "from", from, "to", to)
	for from <= to {
		end := min(to, from+uint64(l.batch)-1)
		got, err := l.fill(ctx, from, end)
		if err != nil {
			return err
		}
		b := &Batch{Base: l.tips}
		l.w.SealAll(b, got, l.source)
		for c, h := range b.Tips() {
			l.tips[c] = h
		}
		if !l.commit(ctx, b) {
			return ctx.Err()
		}
		from = end + 1
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
