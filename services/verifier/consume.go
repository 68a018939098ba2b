package verifier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/topology"
	"github.com/runtimetruth/runtimetruth/pkg/platform/eventtrace"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// Batching of the consume loop.
const (
	// maxBatch bounds the snapshots one worker handles together: their
	// latest-record writes and baseline reads are made once per key, their
	// verdicts published without waiting on each in turn.
	maxBatch = 64
	// prefetch is how many messages are pulled ahead of the workers; with
	// the batches in hand it stays within the consumer's MaxAckPending.
	prefetch = topology.MaxAckPending / 2
)

// batchHandler handles a batch of messages and returns one result per
// message, in order: nil (handled: acknowledge), natsbus.Permanent(err)
// (dead-letter and terminate) or another error (redeliver later). spans[i]
// carries the span of handling msgs[i] (what is published for it is a
// child of it).
type batchHandler func(ctx context.Context, msgs []jetstream.Msg, spans []context.Context) []error

// consumer is the verifier's consume loop: natsbus.Consume's contract
// (explicit acknowledgement after the handler, dead letters before a
// terminate, release of the prefetched messages on shutdown, the same
// Stats), but handing the workers batches of whatever has arrived, up to
// maxBatch, instead of single messages. A batch of one costs no wait: a
// worker takes what is there.
type consumer struct {
	cons        jetstream.Consumer
	h           batchHandler
	js          jetstream.JetStream
	source      string
	workers     int
	timeout     time.Duration
	st          *natsbus.Stats
	log         *slog.Logger
	maxDeliver  int
	name        string
	pullExpiry  time.Duration
	retryDelay  func(uint64) time.Duration
	ackTimeout  time.Duration
	maxBatchLen int
	tel         *natsbus.ConsumeTelemetry
}

func newConsumer(cons jetstream.Consumer, h batchHandler, js jetstream.JetStream, source string, workers int,
	timeout time.Duration, st *natsbus.Stats, log *slog.Logger, p telemetry.Providers) *consumer {
	c := &consumer{cons: cons, h: h, js: js, source: source, workers: max(workers, 1), timeout: timeout, st: st, log: log,
		maxDeliver: -1, pullExpiry: natsbus.DefaultPullExpiry, retryDelay: topology.RetryDelay,
		ackTimeout: natsbus.DefaultAckTimeout, maxBatchLen: maxBatch}
	stream := ""
	if info := cons.CachedInfo(); info != nil {
		c.maxDeliver = info.Config.MaxDeliver
		c.name = info.Name
		stream = info.Stream
	}
	c.tel = natsbus.NewConsumeTelemetry(p, stream, c.name)
	return c
}

// run pulls until ctx is done, then lets the workers finish the batches in
// hand and releases the rest.
func (c *consumer) run(ctx context.Context) {
	in := make(chan jetstream.Msg, prefetch)
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() { c.work(ctx, in) })
	}
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		it, err := c.cons.Messages(jetstream.PullMaxMessages(prefetch), jetstream.PullExpiry(c.pullExpiry))
		if err != nil {
			c.fetchError(ctx, "pull", err)
		} else if c.pull(ctx, it, in) {
			backoff = 50 * time.Millisecond
		}
		if ctx.Err() == nil {
			sleep(ctx, backoff)
			backoff = min(2*backoff, 5*time.Second)
		}
	}
	close(in)
	wg.Wait()
}

// pull feeds in from one iterator until ctx is done (then it releases
// what the iterator still holds) or the iterator fails.
func (c *consumer) pull(ctx context.Context, it jetstream.MessagesContext, in chan<- jetstream.Msg) bool {
	got := false
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			switch {
			case ctx.Err() != nil:
				c.release(ctx, it)
				return got
			case errors.Is(err, jetstream.ErrNoHeartbeat):
				c.fetchError(ctx, "heartbeat", err)
				continue
			default:
				it.Stop()
				c.fetchError(ctx, "iterator", err)
				return got
			}
		}
		got = true
		c.st.Received.Add(1)
		select {
		case in <- m:
		case <-ctx.Done():
			c.releaseMsg(ctx, m)
			c.release(ctx, it)
			return got
		}
	}
}

// work takes a batch of what has arrived and handles it; after ctx is
// done it releases what is left in the queue.
func (c *consumer) work(ctx context.Context, in <-chan jetstream.Msg) {
	batch := make([]jetstream.Msg, 0, c.maxBatchLen)
	buf := newBatchBuf(c.maxBatchLen)
	for m := range in {
		if ctx.Err() != nil {
			c.releaseMsg(ctx, m)
			continue
		}
		batch = append(batch[:0], m)
	more:
		for len(batch) < c.maxBatchLen {
			select {
			case m, ok := <-in:
				if !ok {
					break more
				}
				batch = append(batch, m)
			default:
				break more
			}
		}
		c.handle(ctx, batch, buf)
	}
}

// batchBuf is a worker's per-message telemetry state, reused batch after
// batch.
type batchBuf struct {
	spans []context.Context
	hs    []natsbus.Handling
}

func newBatchBuf(n int) *batchBuf {
	return &batchBuf{spans: make([]context.Context, 0, n), hs: make([]natsbus.Handling, 0, n)}
}

// handle runs the handler on a batch and settles every message as its
// result says; the acknowledgements go out together. Each message has its
// span and counts (natsbus.ConsumeTelemetry), as under natsbus.Consume.
func (c *consumer) handle(ctx context.Context, batch []jetstream.Msg, buf *batchBuf) {
	base := context.WithoutCancel(ctx)
	spans, hs := buf.spans[:0], buf.hs[:0]
	for _, m := range batch {
		sctx, h := c.tel.Begin(base, m)
		spans, hs = append(spans, sctx), append(hs, h)
	}
	defer func() {
		clear(spans) // let the spans and messages go
		clear(hs)
		buf.spans, buf.hs = spans[:0], hs[:0]
	}()
	hctx, cancel := context.WithTimeout(base, c.timeout)
	results := c.call(hctx, batch, spans)
	cancel()

	actx, cancel := context.WithTimeout(base, c.ackTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, m := range batch {
		err, sctx, h := results[i], spans[i], hs[i]
		switch {
		case err == nil:
			wg.Go(func() {
				if aerr := natsbus.Retry(actx, m.DoubleAck); aerr != nil {
					c.st.AckErrors.Add(1)
					c.tel.End(sctx, h, natsbus.OutcomeAckFailed, fmt.Errorf("ack: %w", aerr))
					return
				}
				c.st.Acked.Add(1)
				c.tel.Acked(sctx)
				c.tel.End(sctx, h, natsbus.OutcomeAck, nil)
			})
		case natsbus.IsPermanent(err) || c.last(m):
			dctx, cancel := context.WithTimeout(sctx, c.timeout)
			outcome := natsbus.OutcomeNak
			if c.deadLetter(dctx, m, err) {
				outcome = natsbus.OutcomeTerm
			}
			cancel()
			c.tel.End(sctx, h, outcome, err)
		default:
			c.retry(sctx, m)
			c.tel.End(sctx, h, natsbus.OutcomeNak, err)
		}
	}
	wg.Wait()
}

// call runs the handler; a panic fails the whole batch, to be retried.
func (c *consumer) call(ctx context.Context, batch []jetstream.Msg, spans []context.Context) (results []error) {
	defer func() {
		if r := recover(); r != nil {
			c.st.Panics.Add(1)
			err := fmt.Errorf("handler panic: %v", r)
			results = make([]error, len(batch))
			for i := range results {
				results[i] = err
			}
		}
	}()
	results = c.h(ctx, batch, spans)
	if len(results) != len(batch) {
		panic(fmt.Sprintf("verifier: %d results for %d messages", len(results), len(batch)))
	}
	return results
}

// release stops pulling and hands back what was prefetched.
func (c *consumer) release(ctx context.Context, it jetstream.MessagesContext) {
	it.Drain()
	for {
		m, err := it.Next(jetstream.NextMaxWait(2 * time.Second))
		if err != nil {
			it.Stop()
			return
		}
		c.st.Received.Add(1)
		c.releaseMsg(ctx, m)
	}
}

func (c *consumer) releaseMsg(ctx context.Context, m jetstream.Msg) {
	if c.last(m) {
		// A Nak would use up its last delivery unrecorded.
		c.handle(ctx, []jetstream.Msg{m}, newBatchBuf(1))
		return
	}
	if err := m.Nak(); err != nil {
		c.st.AckErrors.Add(1)
		return
	}
	c.st.Released.Add(1)
	c.tel.Nacked(ctx, natsbus.ReasonRelease)
}

func (c *consumer) fetchError(ctx context.Context, what string, err error) {
	c.st.FetchErrors.Add(1)
	c.log.WarnContext(ctx, "pull messages", "consumer", c.name, "what", what, "err", err)
}

func deliveries(m jetstream.Msg) uint64 {
	md, err := m.Metadata()
	if err != nil {
		return 1
	}
	return md.NumDelivered
}

func (c *consumer) last(m jetstream.Msg) bool {
	return topology.Last(jetstream.ConsumerConfig{MaxDeliver: c.maxDeliver}, deliveries(m))
}

func (c *consumer) retry(ctx context.Context, m jetstream.Msg) {
	if err := m.NakWithDelay(c.retryDelay(deliveries(m))); err != nil {
		c.st.AckErrors.Add(1)
		return
	}
	c.st.Retried.Add(1)
	c.tel.Nacked(ctx, natsbus.ReasonRetry)
}

// deadLetter publishes the message's dead-letter record (the id derived as
// natsbus.DeadLetterID, the trace context of ctx), then terminates it, and
// reports whether it did; a record that cannot be published leaves the
// message to be retried.
func (c *consumer) deadLetter(ctx context.Context, m jetstream.Msg, cause error) bool {
	rec, err := events.Reject(m, cause)
	if err != nil {
		c.st.DeadLetterErrors.Add(1)
		c.retry(ctx, m)
		return false
	}
	dm, _, err := events.NewMsg(c.source, rec, events.WithID(natsbus.DeadLetterID(rec.Stream, rec.Consumer, rec.StreamSequence)))
	if err == nil {
		eventtrace.InjectMsg(ctx, c.tel.Propagator(), dm)
		err = publishRetrying(ctx, c.js, dm)
	}
	if err != nil {
		c.st.DeadLetterErrors.Add(1)
		c.retry(ctx, m)
		return false
	}
	if err := m.TermWithReason(string(rec.Reason)); err != nil {
		c.st.AckErrors.Add(1)
		return false
	}
	c.st.DeadLettered.Add(1)
	permanent := natsbus.IsPermanent(cause)
	if permanent {
		c.st.Permanent.Add(1)
	}
	c.tel.DeadLettered(ctx, permanent)
	return true
}

// publishRetrying publishes m until the server stores it (or reports a
// duplicate) or ctx ends.
func publishRetrying(ctx context.Context, js jetstream.JetStream, m *nats.Msg) error {
	delay := 20 * time.Millisecond
	for {
		err := publish(ctx, js, m)
		if err == nil || ctx.Err() != nil || errors.Is(err, nats.ErrConnectionClosed) {
			return err
		}
		sleep(ctx, delay)
		delay = min(2*delay, time.Second)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
