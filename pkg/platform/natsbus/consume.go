package natsbus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Handler handles one message. It returns nil once the message is durably
// handled (Consume then acknowledges it and waits for the server to
// confirm), a Permanent error when the message will never be handled
// (Consume dead-letters and terminates it), or any other error to have it
// redelivered later (Consume naks it with a delay, and dead-letters it on
// its last allowed delivery).
//
// ctx carries the message's span and ends after Options.HandlerTimeout; it
// is not cancelled when Consume is asked to stop, so that the message in
// hand is finished.
type Handler func(ctx context.Context, msg jetstream.Msg) error

// BatchHandler handles a batch of messages and returns one result per
// message, in order, each meaning what a Handler's result means for its
// message. msgCtxs[i] carries the span of handling msgs[i] (what is
// published for it should be a child of it). ctx and every msgCtxs[i] end
// after Options.HandlerTimeout, for the whole batch; they are not
// cancelled when ConsumeBatch is asked to stop.
type BatchHandler func(ctx context.Context, msgs []jetstream.Msg, msgCtxs []context.Context) []error

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: retrying the message cannot help (it is
// malformed, or names something that will never exist). Permanent(nil) is
// nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	_, ok := errors.AsType[*permanentError](err)
	return ok
}

// Defaults of Options.
const (
	DefaultHandlerTimeout = 20 * time.Second
	DefaultAckTimeout     = 5 * time.Second
	DefaultPullExpiry     = 5 * time.Second
	DefaultMaxBatch       = 64
)

// Options configure Consume and ConsumeBatch.
type Options struct {
	// JetStream publishes the dead-letter records (required).
	JetStream jetstream.JetStream
	// Source is the CloudEvents source of the dead-letter records, e.g.
	// events.Source("verifier", host) (required).
	Source string
	// Concurrency is how many messages (ConsumeBatch: batches) are handled
	// at once (default 1). Handlers must then tolerate messages of one
	// subject handled out of order.
	Concurrency int
	// MaxBatch bounds the messages ConsumeBatch hands the handler at once
	// (default DefaultMaxBatch). A free worker takes what has arrived, up
	// to MaxBatch, and never waits for more: a lone message is a batch of
	// one. Consume ignores it.
	MaxBatch int
	// Prefetch is how many messages are pulled ahead of the handlers
	// (default 2 × Concurrency, at least 8 and at least MaxBatch).
	// Prefetched messages count against the consumer's MaxAckPending and
	// their ack wait runs; ConsumeBatch also queues up to Prefetch
	// messages for its workers to batch.
	Prefetch int
	// PullExpiry is how long one pull request waits on the server
	// (default DefaultPullExpiry); the server sends a heartbeat every half
	// of it, and a pull lost to a leader change is noticed after two
	// missed heartbeats and replaced.
	PullExpiry time.Duration
	// HandlerTimeout bounds one handler call (default
	// DefaultHandlerTimeout), for a whole batch; keep it below the
	// consumer's AckWait.
	HandlerTimeout time.Duration
	// RetryDelay is the NakWithDelay delay after a retryable error, given
	// the number of deliveries so far (default topology.RetryDelay).
	RetryDelay func(delivered uint64) time.Duration
	// Tenant names the party a message belongs to (the verifier: the
	// host in its subject). With TenantRetries, a tenant's messages
	// waiting for a retry are at most TenantRetries at a time in this
	// loop: each such message holds a slot of the consumer's
	// MaxAckPending, which every tenant shares, through its retry delay,
	// so a retryable failure beyond the budget is dead-lettered and
	// terminated with ErrRetryBudget instead, and one tenant's failing
	// messages cannot fill the window for the others. A retry counts
	// until its message is settled again, or retryHeld after it was
	// nak'ed (the message may be redelivered to another instance).
	Tenant        func(jetstream.Msg) string
	TenantRetries int
	// Duties, when set, is told how dead-lettering goes
	// (DutyDeadLetters): failing while the DLQ stream is full, so that the
	// service's readiness says so.
	Duties *health.Duties
	// Logger logs pull errors (never one line per message); default
	// discards.
	Logger *slog.Logger
	// Telemetry receives a span per handled message (a child of the
	// producer's span named by the event's traceparent), the received,
	// consumed, acked, nacked, dead_lettered and consume_errors counters
	// and the handle duration (see the Metric constants); zero fields mean
	// the OpenTelemetry globals.
	Telemetry telemetry.Providers
}

// Consume pulls messages from cons and hands each to h, then decides the
// acknowledgement explicitly:
//
//   - nil: acknowledge and wait for the server's confirmation
//     (DoubleAck), so a handled message is not redelivered;
//   - Permanent(err): publish the dead-letter record (events.Reject) to
//     rt.dlq.<stream> with a deterministic id, then terminate the message;
//   - another error: NakWithDelay(RetryDelay(deliveries)), or, on the last
//     delivery the consumer allows (topology.Last), dead-letter and
//     terminate it as above.
//
// A dead-letter record that cannot be published leaves the message to be
// retried: nothing is terminated unrecorded. A handler panic is recovered
// and counted, and treated as a retryable error.
//
// Consume returns when ctx is done: it stops pulling, lets the handlers
// finish the messages in hand, releases the prefetched ones (Nak without
// delay; one on its last delivery is handled instead, so that it is not
// lost), and returns nil. Pull errors are counted and retried with
// backoff; they do not end Consume.
func Consume(ctx context.Context, cons jetstream.Consumer, h Handler, opts Options) error {
	if h == nil {
		return errors.New("natsbus: consume needs a consumer and a handler")
	}
	opts.MaxBatch = 1
	return ConsumeBatch(ctx, cons, func(_ context.Context, msgs []jetstream.Msg, msgCtxs []context.Context) []error {
		return []error{h(msgCtxs[0], msgs[0])}
	}, opts)
}

// ConsumeBatch is Consume for a handler that handles several messages
// together (sharing its reads, writes or publish acknowledgements): each
// of Options.Concurrency workers takes whatever has arrived, up to
// Options.MaxBatch messages, hands them to h, and settles each message by
// its result as Consume does (the acknowledgements of a batch go out
// together). Each message has its own span and counts. A panic, or a
// result count other than the batch's, is a retryable error for every
// message of the batch.
func ConsumeBatch(ctx context.Context, cons jetstream.Consumer, h BatchHandler, opts Options) error {
	if cons == nil || h == nil {
		return errors.New("natsbus: consume needs a consumer and a handler")
	}
	if opts.JetStream == nil {
		return errors.New("natsbus: consume needs Options.JetStream to publish dead letters")
	}
	if opts.Source == "" {
		return errors.New("natsbus: consume needs Options.Source for dead-letter records")
	}
	if opts.Concurrency < 1 {
		opts.Concurrency = 1
	}
	if opts.MaxBatch < 1 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.Prefetch < 1 {
		opts.Prefetch = max(2*opts.Concurrency, 8, opts.MaxBatch)
	}
	if opts.PullExpiry <= 0 {
		opts.PullExpiry = DefaultPullExpiry
	}
	if opts.HandlerTimeout <= 0 {
		opts.HandlerTimeout = DefaultHandlerTimeout
	}
	if opts.RetryDelay == nil {
		opts.RetryDelay = topology.RetryDelay
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &loop{cons: cons, h: h, o: opts, maxDeliver: -1, retrying: map[string]map[uint64]time.Time{}}
	stream := ""
	if info := cons.CachedInfo(); info != nil {
		c.maxDeliver = info.Config.MaxDeliver
		c.name = info.Name
		stream = info.Stream
	}
	c.tel = NewConsumeTelemetry(opts.Telemetry, stream, c.name)
	c.pub = NewPublisher(opts.JetStream, opts.Telemetry)
	return c.run(ctx)
}

type loop struct {
	cons       jetstream.Consumer
	h          BatchHandler
	o          Options
	maxDeliver int
	name       string
	tel        *ConsumeTelemetry
	pub        *Publisher // of the dead-letter records

	rmu      sync.Mutex
	retrying map[string]map[uint64]time.Time // tenant → stream sequence → when nak'ed (Options.TenantRetries)

	// fullAt is when a dead letter was last refused by a full DLQ (unix
	// nanoseconds; 0: never): only a record sent after it clears the duty.
	fullAt atomic.Int64
}

// ErrRetryBudget is why a message whose handling failed with a retryable
// error is dead-lettered rather than retried: its tenant already has
// Options.TenantRetries messages waiting for a retry.
var ErrRetryBudget = errors.New("retry budget of its tenant spent")

// retryHeld is how long a nak'ed message counts against its tenant's
// retry budget at most: past the longest retry delay and an ack wait, it
// was redelivered, here or to another instance.
const retryHeld = 2 * time.Minute

// spend reports whether m's tenant may have m retried, and counts it
// when so; a loop without a budget always may.
func (c *loop) spend(m jetstream.Msg) bool {
	tenant, seq, ok := c.tenantOf(m)
	if !ok {
		return true
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	held := c.retrying[tenant]
	now := time.Now()
	for s, at := range held {
		if now.Sub(at) > retryHeld {
			delete(held, s)
		}
	}
	if _, again := held[seq]; !again && len(held) >= c.o.TenantRetries {
		return false
	}
	if held == nil {
		held = map[uint64]time.Time{}
		c.retrying[tenant] = held
	}
	held[seq] = now
	return true
}

// settled gives back the retry m held, if any.
func (c *loop) settled(m jetstream.Msg) {
	tenant, seq, ok := c.tenantOf(m)
	if !ok {
		return
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	if held := c.retrying[tenant]; held != nil {
		delete(held, seq)
		if len(held) == 0 {
			delete(c.retrying, tenant)
		}
	}
}

func (c *loop) tenantOf(m jetstream.Msg) (string, uint64, bool) {
	if c.o.Tenant == nil || c.o.TenantRetries <= 0 {
		return "", 0, false
	}
	md, err := m.Metadata()
	if err != nil {
		return "", 0, false
	}
	return c.o.Tenant(m), md.Sequence.Stream, true
}

// run pulls until ctx is done, then lets the workers finish the batches in
// hand and release what is queued.
func (c *loop) run(ctx context.Context) error {
	queue := 0 // one by one: a worker takes the message the puller offers
	if c.o.MaxBatch > 1 {
		queue = c.o.Prefetch // a worker batches what is queued
	}
	work := make(chan jetstream.Msg, queue)
	var wg sync.WaitGroup
	for range c.o.Concurrency {
		wg.Go(func() { c.work(ctx, work) })
	}
	defer func() {
		close(work)
		wg.Wait()
	}()

	backoff := pullPolicy.Backoff()
	for ctx.Err() == nil {
		it, err := c.cons.Messages(jetstream.PullMaxMessages(c.o.Prefetch), jetstream.PullExpiry(c.o.PullExpiry))
		if err != nil {
			c.fetchError(ctx, "pull", err)
			backoff.Wait(ctx)
			continue
		}
		if c.pull(ctx, it, work) {
			backoff.Reset()
		}
		if ctx.Err() == nil {
			backoff.Wait(ctx)
		}
	}
	return nil
}

// pull feeds the workers from one iterator until ctx is done (then it
// releases the prefetched messages) or the iterator fails. It reports
// whether it received any message.
func (c *loop) pull(ctx context.Context, it jetstream.MessagesContext, work chan<- jetstream.Msg) bool {
	got := false
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			switch {
			case ctx.Err() != nil:
				c.release(ctx, it)
				return got
			case errors.Is(err, jetstream.ErrNoHeartbeat):
				// The iterator recovers on its own: it pulls again.
				c.fetchError(ctx, "heartbeat", err)
				continue
			default:
				it.Stop()
				c.fetchError(ctx, "iterator", err)
				return got
			}
		}
		got = true
		c.tel.Received(ctx)
		select {
		case work <- m:
		case <-ctx.Done():
			c.releaseMsg(ctx, m)
			c.release(ctx, it)
			return got
		}
	}
}

// work takes a batch of what has arrived, never waiting for more, and
// handles it; after ctx is done it releases what is left in the queue.
func (c *loop) work(ctx context.Context, in <-chan jetstream.Msg) {
	b := newBatch(c.o.MaxBatch)
	for m := range in {
		if ctx.Err() != nil {
			c.releaseMsg(ctx, m)
			continue
		}
		b.msgs = append(b.msgs, m)
	more:
		for len(b.msgs) < c.o.MaxBatch {
			select {
			case m, ok := <-in:
				if !ok {
					break more
				}
				b.msgs = append(b.msgs, m)
			default:
				break more
			}
		}
		c.handle(ctx, b)
	}
}

// release stops pulling and hands back what was prefetched.
func (c *loop) release(ctx context.Context, it jetstream.MessagesContext) {
	it.Drain()
	for {
		m, err := it.Next(jetstream.NextMaxWait(2 * time.Second))
		if err != nil {
			it.Stop()
			return
		}
		c.tel.Received(ctx)
		c.releaseMsg(ctx, m)
	}
}

func (c *loop) releaseMsg(ctx context.Context, m jetstream.Msg) {
	if c.last(m) {
		// A Nak would use up its last delivery unrecorded.
		b := newBatch(1)
		b.msgs = append(b.msgs, m)
		c.handle(ctx, b)
		return
	}
	if err := m.Nak(); err != nil {
		c.tel.Failed(ctx, ReasonAck)
		return
	}
	c.tel.Nacked(ctx, ReasonRelease)
}

func (c *loop) fetchError(ctx context.Context, what string, err error) {
	c.tel.Failed(ctx, ReasonFetch)
	c.o.Logger.WarnContext(ctx, "pull messages", "consumer", c.name, "what", what, "err", err)
}

func deliveries(m jetstream.Msg) uint64 {
	md, err := m.Metadata()
	if err != nil {
		return 1
	}
	return md.NumDelivered
}

func (c *loop) last(m jetstream.Msg) bool {
	return topology.Last(jetstream.ConsumerConfig{MaxDeliver: c.maxDeliver}, deliveries(m))
}

// batch is the messages a worker has in hand, with their contexts and
// handling; a worker reuses it batch after batch.
type batch struct {
	msgs []jetstream.Msg
	ctxs []context.Context
	hs   []Handling
}

func newBatch(n int) *batch {
	return &batch{msgs: make([]jetstream.Msg, 0, n), ctxs: make([]context.Context, 0, n), hs: make([]Handling, 0, n)}
}

// handle runs the handler on b's messages, each inside its span, settles
// every message as its result says, the settlements at once, and empties
// b.
func (c *loop) handle(ctx context.Context, b *batch) {
	base := context.WithoutCancel(ctx)
	hctx, cancel := context.WithTimeout(base, c.o.HandlerTimeout)
	for _, m := range b.msgs {
		mctx, h := c.tel.Begin(hctx, m)
		b.ctxs, b.hs = append(b.ctxs, mctx), append(b.hs, h)
	}
	results := c.call(hctx, b.msgs, b.ctxs)
	cancel()

	actx, cancel := context.WithTimeout(base, DefaultAckTimeout)
	var wg sync.WaitGroup
	for i := 1; i < len(b.msgs); i++ {
		wg.Go(func() { c.settle(b.ctxs[i], actx, b.msgs[i], b.hs[i], results[i]) })
	}
	c.settle(b.ctxs[0], actx, b.msgs[0], b.hs[0], results[0])
	wg.Wait()
	cancel()

	clear(b.msgs) // let the messages and spans go
	clear(b.ctxs)
	clear(b.hs)
	b.msgs, b.ctxs, b.hs = b.msgs[:0], b.ctxs[:0], b.hs[:0]
}

// call runs the handler; a panic, or a result count other than the
// batch's, fails every message of the batch, to be retried.
func (c *loop) call(ctx context.Context, msgs []jetstream.Msg, msgCtxs []context.Context) (results []error) {
	defer func() {
		if r := recover(); r != nil {
			c.tel.Failed(ctx, ReasonPanic)
			err := fmt.Errorf("handler panic: %v", r)
			results = make([]error, len(msgs))
			for i := range results {
				results[i] = err
			}
		}
	}()
	results = c.h(ctx, msgs, msgCtxs)
	if len(results) != len(msgs) {
		panic(fmt.Sprintf("%d results for %d messages", len(results), len(msgs)))
	}
	return results
}

// settle acknowledges m as its handler's result err says (the ack within
// actx) and ends its handling; ctx carries m's span.
func (c *loop) settle(ctx, actx context.Context, m jetstream.Msg, h Handling, err error) {
	outcome := OutcomeNak
	switch {
	case err == nil:
		if aerr := Retry(actx, m.DoubleAck); aerr != nil {
			c.tel.Failed(ctx, ReasonAck)
			err, outcome = fmt.Errorf("ack: %w", aerr), OutcomeAckFailed
			break
		}
		outcome = OutcomeAck
		c.tel.Acked(ctx)
	case IsPermanent(err) || c.last(m) || !c.spend(m):
		if !IsPermanent(err) && !c.last(m) {
			err = fmt.Errorf("%w (%d messages waiting for a retry): %w", ErrRetryBudget, c.o.TenantRetries, err)
		}
		// ctx ended with the handler's time; the record gets its own.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.o.HandlerTimeout)
		defer cancel()
		if c.deadLetter(dctx, m, err) {
			outcome = OutcomeTerm
		}
	default:
		c.retry(ctx, m)
	}
	if outcome != OutcomeNak {
		c.settled(m)
	}
	c.tel.End(ctx, h, outcome, err)
}

func (c *loop) retry(ctx context.Context, m jetstream.Msg) {
	if err := m.NakWithDelay(c.o.RetryDelay(deliveries(m))); err != nil {
		c.tel.Failed(ctx, ReasonAck)
		return
	}
	c.tel.Nacked(ctx, ReasonRetry)
}

// deadLetter publishes the message's dead-letter record (carrying the
// trace context of ctx), then terminates it, and reports whether it did.
// The record's id derives from the stream, consumer and sequence, so a
// record published again (the Term was lost) is dropped as a duplicate.
func (c *loop) deadLetter(ctx context.Context, m jetstream.Msg, cause error) bool {
	rec, err := binding.Reject(m, cause)
	if err != nil {
		c.tel.Failed(ctx, ReasonDeadLetter)
		c.retry(ctx, m)
		return false
	}
	dm, _, err := binding.NewMsg(c.o.Source, rec, binding.WithID(DeadLetterID(rec.Stream, rec.Consumer, rec.StreamSequence)))
	sent := time.Now().UnixNano()
	if err == nil {
		err = publishRetrying(ctx, c.pub, dm)
	}
	if StreamFull(err) {
		// Kept out of a full DLQ, never redelivered into it for ever: the
		// message is terminated with its reason, and the loss counted
		// and reported (Options.Duties: DutyDeadLetters).
		c.tel.Failed(ctx, ReasonDeadLetterFull)
		c.fullAt.Store(time.Now().UnixNano())
		c.report(ctx, fmt.Errorf("the dead-letter stream is full: %w", err))
		if terr := m.TermWithReason(string(rec.Reason)); terr != nil {
			c.tel.Failed(ctx, ReasonAck)
			return false
		}
		return true
	}
	if err != nil {
		c.tel.Failed(ctx, ReasonDeadLetter)
		c.retry(ctx, m)
		return false
	}
	if sent > c.fullAt.Load() {
		// Kept, and sent after the last one a full DLQ refused (a record
		// sent before it, by another worker, says nothing of the DLQ now).
		c.report(ctx, nil)
	}
	if err := m.TermWithReason(string(rec.Reason)); err != nil {
		c.tel.Failed(ctx, ReasonAck)
		return false
	}
	c.tel.DeadLettered(ctx, IsPermanent(cause))
	return true
}

// DutyDeadLetters is the duty of keeping dead letters (Options.Duties):
// failing while the last record could not be kept for a full DLQ.
const DutyDeadLetters = "dead letters"

// report tells Options.Duties how the last dead letter went.
func (c *loop) report(ctx context.Context, err error) {
	if c.o.Duties != nil {
		c.o.Duties.Report(ctx, DutyDeadLetters, err)
	}
}

// DeadLetterID is the id of the dead-letter record of a stream's message
// as rejected by a consumer: a UUIDv5 of the three.
func DeadLetterID(stream, consumer string, seq uint64) string {
	return events.DeadLetterIDs.ID(stream, consumer, strconv.FormatUint(seq, 10))
}

// publishRetrying publishes m through pub until the server stores it (or
// reports a duplicate) or ctx ends; any error is retried, as nothing may be
// terminated unrecorded.
func publishRetrying(ctx context.Context, pub *Publisher, m *nats.Msg) error {
	return deadPostPolicy.Do(ctx, func(ctx context.Context) error {
		_, err := pub.PublishRetrying(ctx, m)
		return err
	}, func(err error) bool { return !errors.Is(err, nats.ErrConnectionClosed) && !StreamFull(err) }, nil)
}
