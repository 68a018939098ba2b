package natsbus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

const source = "/verifier/test"

// bus starts a JetStream server with the topology in place.
func bus(t *testing.T) (context.Context, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	_, url := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, url)
	require.NoError(t, topology.Ensure(ctx, js, 1))
	return ctx, js
}

// evidence builds the n-th evidence event of a host.
func evidence(t testing.TB, host string, n int) *nats.Msg {
	t.Helper()
	s := snapshot.New(snapshot.Target{Kind: "systemd.unit", Identifier: "agent.service"}, snapshot.Record{
		Plane: snapshot.Live, Kind: "systemd.unit",
		Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
		Data:   snapshot.Data{"main_pid": snapshot.Int(int64(n))},
	})
	p, err := events.NewEvidenceCollected(host, s, time.Minute)
	require.NoError(t, err)
	m, _, err := binding.NewMsg(events.Source("collector", host), p)
	require.NoError(t, err)
	return m
}

func publish(ctx context.Context, t *testing.T, js jetstream.JetStream, n int) []*jetstream.PubAck {
	t.Helper()
	acks := make([]*jetstream.PubAck, n)
	for i := range n {
		ack, err := js.PublishMsg(ctx, evidence(t, "web-01", i))
		require.NoError(t, err)
		acks[i] = ack
	}
	return acks
}

func verifierConsumer(ctx context.Context, t *testing.T, js jetstream.JetStream) jetstream.Consumer {
	t.Helper()
	c, err := js.Consumer(ctx, topology.StreamEvidence, topology.ConsumerVerifier)
	require.NoError(t, err)
	return c
}

// retryConsumer is the verifier's consumer without its redelivery
// backoff, named name, delivering at most maxDeliver times. With a BackOff,
// the server measures a NakWithDelay from the backoff step rather than the
// ack wait, so the second and later retries would wait half a minute.
func retryConsumer(ctx context.Context, t *testing.T, js jetstream.JetStream, name string, maxDeliver int) jetstream.Consumer {
	t.Helper()
	cfg := topology.New(1).Consumers[0].Config
	cfg.Durable, cfg.MaxDeliver, cfg.BackOff = name, maxDeliver, nil
	c, err := js.CreateOrUpdateConsumer(ctx, topology.StreamEvidence, cfg)
	require.NoError(t, err)
	return c
}

// run starts Consume in the background; the returned stop cancels it and
// waits for it to return.
func run(ctx context.Context, t *testing.T, cons jetstream.Consumer, h natsbus.Handler, o natsbus.Options) (stop func()) {
	t.Helper()
	return background(ctx, t, func(ctx context.Context) error { return natsbus.Consume(ctx, cons, h, o) })
}

// runBatch starts ConsumeBatch in the background, as run starts Consume.
func runBatch(ctx context.Context, t *testing.T, cons jetstream.Consumer, h natsbus.BatchHandler, o natsbus.Options) (stop func()) {
	t.Helper()
	return background(ctx, t, func(ctx context.Context) error { return natsbus.ConsumeBatch(ctx, cons, h, o) })
}

func background(ctx context.Context, t *testing.T, consume func(context.Context) error) (stop func()) {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- consume(cctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Fatal("Consume did not return after cancel")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func options(js jetstream.JetStream, rec *telemetrytest.Recorder) natsbus.Options {
	return natsbus.Options{
		JetStream:  js,
		Source:     source,
		Telemetry:  rec.Providers,
		RetryDelay: func(uint64) time.Duration { return 10 * time.Millisecond },
	}
}

func eventually(t *testing.T, f func() error) {
	t.Helper()
	natstest.CheckFor(t, 15*time.Second, 10*time.Millisecond, f)
}

// count is a consume loop counter: an instrument and the attributes that
// select its data points.
type count struct {
	label string
	name  string
	attrs []attribute.KeyValue
}

func reason(name, r string) count {
	return count{label: r, name: name, attrs: []attribute.KeyValue{natsbus.AttrReason.String(r)}}
}

var (
	received         = count{label: "received", name: natsbus.MetricReceived}
	acked            = count{label: "acked", name: natsbus.MetricAcked}
	retried          = reason(natsbus.MetricNacked, natsbus.ReasonRetry)
	released         = reason(natsbus.MetricNacked, natsbus.ReasonRelease)
	deadLettered     = count{label: "dead-lettered", name: natsbus.MetricDeadLettered}
	permanent        = reason(natsbus.MetricDeadLettered, natsbus.ReasonPermanent)
	panics           = reason(natsbus.MetricConsumeErrors, natsbus.ReasonPanic)
	ackErrors        = reason(natsbus.MetricConsumeErrors, natsbus.ReasonAck)
	deadLetterErrors = reason(natsbus.MetricConsumeErrors, natsbus.ReasonDeadLetter)
)

// of is c's value in rec.
func (c count) of(t testing.TB, rec *telemetrytest.Recorder) uint64 {
	t.Helper()
	return uint64(rec.Sum(t, c.name, c.attrs...))
}

// counter checks that c reached want in rec.
func counter(t testing.TB, rec *telemetrytest.Recorder, c count, want uint64) func() error {
	return func() error {
		if got := c.of(t, rec); got != want {
			return fmt.Errorf("%s = %d, want %d", c.label, got, want)
		}
		return nil
	}
}

// settled waits until the consumer has nothing pending or unacknowledged.
func settled(ctx context.Context, t *testing.T, cons jetstream.Consumer) {
	t.Helper()
	eventually(t, func() error {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
			return fmt.Errorf("pending %d, ack pending %d, redelivered %d", info.NumPending, info.NumAckPending, info.NumRedelivered)
		}
		return nil
	})
}

// deadLetters reads every record of the DLQ stream.
func deadLetters(ctx context.Context, t *testing.T, js jetstream.JetStream) []events.EventRejected {
	t.Helper()
	var out []events.EventRejected
	for _, raw := range natstest.Stored(ctx, t, js, topology.StreamDLQ) {
		e, err := binding.FromNATS(raw.Header, raw.Data)
		require.NoError(t, err)
		rec, err := binding.Decode[events.EventRejected](e)
		require.NoError(t, err)
		assert.Equal(t, natsbus.DeadLetterID(rec.Stream, rec.Consumer, rec.StreamSequence), e.ID(), "the record's id is derived from the message")
		assert.Equal(t, source, e.Source())
		out = append(out, rec)
	}
	return out
}

func TestPermanent(t *testing.T) {
	assert.NoError(t, natsbus.Permanent(nil))
	base := errors.New("bad")
	err := fmt.Errorf("handle: %w", natsbus.Permanent(base))
	assert.True(t, natsbus.IsPermanent(err))
	assert.ErrorIs(t, err, base)
	assert.Equal(t, "handle: bad", err.Error())
	assert.False(t, natsbus.IsPermanent(base))
	assert.False(t, natsbus.IsPermanent(nil))
}

func TestConsumeNeedsOptions(t *testing.T) {
	ctx, js := bus(t)
	cons := verifierConsumer(ctx, t, js)
	h := func(context.Context, jetstream.Msg) error { return nil }
	bh := func(_ context.Context, msgs []jetstream.Msg, _ []context.Context) []error {
		return make([]error, len(msgs))
	}
	o := natsbus.Options{JetStream: js, Source: source}
	require.Error(t, natsbus.Consume(ctx, nil, h, o))
	require.Error(t, natsbus.Consume(ctx, cons, nil, o))
	require.Error(t, natsbus.ConsumeBatch(ctx, nil, bh, o))
	require.Error(t, natsbus.ConsumeBatch(ctx, cons, nil, o))
	for _, o := range []natsbus.Options{{Source: source}, {JetStream: js}} {
		require.Error(t, natsbus.Consume(ctx, cons, h, o))
		require.Error(t, natsbus.ConsumeBatch(ctx, cons, bh, o))
	}
}

func TestConsumeAcksHandledMessages(t *testing.T) {
	ctx, js := bus(t)
	cons := verifierConsumer(ctx, t, js)
	publish(ctx, t, js, 20)

	st := telemetrytest.New(t)
	var mu sync.Mutex
	seen := map[string]int{}
	o := options(js, st)
	o.Concurrency = 4
	stop := run(ctx, t, cons, func(_ context.Context, m jetstream.Msg) error {
		mu.Lock()
		defer mu.Unlock()
		seen[m.Headers().Get(binding.HeaderMsgID)]++
		return nil
	}, o)
	eventually(t, counter(t, st, acked, 20))
	settled(ctx, t, cons)
	stop()

	assert.Len(t, seen, 20)
	for id, n := range seen {
		assert.Equal(t, 1, n, "message %s handled once", id)
	}
	assert.Zero(t, retried.of(t, st)+deadLettered.of(t, st)+ackErrors.of(t, st)+panics.of(t, st))
	assert.Empty(t, deadLetters(ctx, t, js))
}

func TestConsumeRetriesRetryableErrors(t *testing.T) {
	ctx, js := bus(t)
	cons := retryConsumer(ctx, t, js, "retrying", 10)
	publish(ctx, t, js, 1)

	st := telemetrytest.New(t)
	var mu sync.Mutex
	var deliveries []uint64
	run(ctx, t, cons, func(_ context.Context, m jetstream.Msg) error {
		md, err := m.Metadata()
		require.NoError(t, err)
		mu.Lock()
		deliveries = append(deliveries, md.NumDelivered)
		mu.Unlock()
		if md.NumDelivered < 3 {
			return errors.New("store unavailable")
		}
		return nil
	}, options(js, st))
	eventually(t, counter(t, st, acked, 1))
	settled(ctx, t, cons)
	assert.Equal(t, uint64(2), retried.of(t, st))
	mu.Lock()
	assert.Equal(t, []uint64{1, 2, 3}, deliveries)
	mu.Unlock()
	assert.Empty(t, deadLetters(ctx, t, js))
}

func TestConsumeDeadLettersPermanentErrors(t *testing.T) {
	ctx, js := bus(t)
	cons := verifierConsumer(ctx, t, js)
	good := evidence(t, "web-01", 1)
	bad := &nats.Msg{Subject: good.Subject, Header: nats.Header{}, Data: good.Data}
	for k, v := range good.Header {
		bad.Header[k] = v
	}
	bad.Header.Set("ce-type", events.TypePrefix+"evidence.collected.v9")
	ack, err := js.PublishMsg(ctx, bad)
	require.NoError(t, err)
	_, err = js.PublishMsg(ctx, evidence(t, "web-01", 2))
	require.NoError(t, err)

	st := telemetrytest.New(t)
	run(ctx, t, cons, func(_ context.Context, m jetstream.Msg) error {
		if _, _, err := binding.Read[events.EvidenceCollected](m); err != nil {
			return natsbus.Permanent(fmt.Errorf("decode: %w", err))
		}
		return nil
	}, options(js, st))
	eventually(t, counter(t, st, deadLettered, 1))
	eventually(t, counter(t, st, acked, 1))
	settled(ctx, t, cons)
	assert.Equal(t, uint64(1), permanent.of(t, st))
	assert.Zero(t, retried.of(t, st))

	recs := deadLetters(ctx, t, js)
	require.Len(t, recs, 1)
	rec := recs[0]
	assert.Equal(t, topology.StreamEvidence, rec.Stream)
	assert.Equal(t, topology.ConsumerVerifier, rec.Consumer)
	assert.Equal(t, ack.Sequence, rec.StreamSequence)
	assert.Equal(t, uint64(1), rec.Deliveries)
	assert.Equal(t, events.ReasonUnknownType, rec.Reason, "the codec's reason survives Permanent")
	assert.Contains(t, rec.Error, "decode: ")
	assert.Equal(t, events.TypePrefix+"evidence.collected.v9", rec.Envelope.Type)
}

func TestConsumeDeadLettersOnTheLastDelivery(t *testing.T) {
	ctx, js := bus(t)
	cons := retryConsumer(ctx, t, js, "three-tries", 3)
	acks := publish(ctx, t, js, 1)

	st := telemetrytest.New(t)
	var calls atomic.Int32
	run(ctx, t, cons, func(context.Context, jetstream.Msg) error {
		calls.Add(1)
		return errors.New("baseline store unavailable")
	}, options(js, st))
	eventually(t, counter(t, st, deadLettered, 1))
	settled(ctx, t, cons)
	assert.Equal(t, int32(3), calls.Load())
	assert.Equal(t, uint64(2), retried.of(t, st))
	assert.Zero(t, permanent.of(t, st))

	recs := deadLetters(ctx, t, js)
	require.Len(t, recs, 1)
	assert.Equal(t, "three-tries", recs[0].Consumer)
	assert.Equal(t, acks[0].Sequence, recs[0].StreamSequence)
	assert.Equal(t, uint64(3), recs[0].Deliveries)
	assert.Equal(t, events.ReasonPermanent, recs[0].Reason)
	assert.Equal(t, "baseline store unavailable", recs[0].Error)
}

func TestConsumeRecoversHandlerPanics(t *testing.T) {
	ctx, js := bus(t)
	cons := retryConsumer(ctx, t, js, "retrying", 10)
	publish(ctx, t, js, 1)

	st := telemetrytest.New(t)
	var calls atomic.Int32
	run(ctx, t, cons, func(context.Context, jetstream.Msg) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return nil
	}, options(js, st))
	eventually(t, counter(t, st, acked, 1))
	assert.Equal(t, uint64(1), panics.of(t, st))
	assert.Equal(t, uint64(1), retried.of(t, st))
}

// A dead letter that cannot be recorded is never terminated: the message
// is retried until the record is stored.
func TestConsumeKeepsMessagesWhoseDeadLetterFails(t *testing.T) {
	ctx, js := bus(t)
	cons := retryConsumer(ctx, t, js, "retrying", -1)
	require.NoError(t, js.DeleteStream(ctx, topology.StreamDLQ))
	publish(ctx, t, js, 1)

	st := telemetrytest.New(t)
	o := options(js, st)
	o.HandlerTimeout = 200 * time.Millisecond
	run(ctx, t, cons, func(context.Context, jetstream.Msg) error {
		return natsbus.Permanent(errors.New("malformed"))
	}, o)
	eventually(t, func() error {
		if deadLetterErrors.of(t, st) < 2 {
			return errors.New("no failed dead-letter publish yet")
		}
		return nil
	})
	assert.Zero(t, deadLettered.of(t, st))
	require.NoError(t, topology.Ensure(ctx, js, 1))
	eventually(t, counter(t, st, deadLettered, 1))
	settled(ctx, t, cons)
	assert.Len(t, deadLetters(ctx, t, js), 1)
}

// On cancel, the loop finishes the messages in hand and releases the
// prefetched (and, batching, queued) ones at once: another instance gets
// them without waiting for the ack wait.
func TestConsumeDrainsOnCancel(t *testing.T) {
	for _, maxBatch := range []int{1, 4} { // Consume; ConsumeBatch, up to 4 at once
		t.Run(fmt.Sprintf("batches of %d", maxBatch), func(t *testing.T) {
			ctx, js := bus(t)
			cons := verifierConsumer(ctx, t, js)
			publish(ctx, t, js, 30)

			st := telemetrytest.New(t)
			var inHand atomic.Int32
			held := make(chan struct{})
			finish := make(chan struct{})
			handled := sync.Map{}
			h := func(_ context.Context, msgs []jetstream.Msg, _ []context.Context) []error {
				if inHand.CompareAndSwap(0, int32(len(msgs))) {
					close(held)
					<-finish
				}
				for _, m := range msgs {
					handled.Store(m.Headers().Get(binding.HeaderMsgID), true)
				}
				return make([]error, len(msgs))
			}
			o := options(js, st)
			o.Prefetch, o.MaxBatch = 16, maxBatch
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				if maxBatch > 1 {
					done <- natsbus.ConsumeBatch(cctx, cons, h, o)
					return
				}
				done <- natsbus.Consume(cctx, cons, func(ctx context.Context, m jetstream.Msg) error {
					return h(ctx, []jetstream.Msg{m}, nil)[0]
				}, o)
			}()
			<-held
			n := uint64(inHand.Load())
			eventually(t, func() error {
				if received.of(t, st) <= n {
					return errors.New("nothing prefetched yet")
				}
				return nil
			})
			cancel() // with messages in hand
			close(finish)
			require.NoError(t, <-done)
			assert.Equal(t, n, acked.of(t, st), "the messages in hand are finished")
			assert.Equal(t, received.of(t, st)-n, released.of(t, st), "every prefetched message is released")

			st2 := telemetrytest.New(t)
			run(ctx, t, cons, func(_ context.Context, m jetstream.Msg) error {
				handled.Store(m.Headers().Get(binding.HeaderMsgID), true)
				return nil
			}, options(js, st2))
			// Every message the first consumer received was released
			// (above), so the second gets them at once. One the server
			// sent as the pull was being cancelled, after the drain had
			// ended, can still be stranded until the ack wait (rare; seen
			// once under CI load): nothing is lost, it comes later.
			natstest.CheckFor(t, topology.AckWait+10*time.Second, 10*time.Millisecond, counter(t, st2, acked, 30-n))
			settled(ctx, t, cons)
			count := 0
			handled.Range(func(any, any) bool { count++; return true })
			assert.Equal(t, 30, count)
		})
	}
}

func TestDeadLetterID(t *testing.T) {
	a := natsbus.DeadLetterID("EVIDENCE", "verifier", 7)
	assert.Equal(t, a, natsbus.DeadLetterID("EVIDENCE", "verifier", 7))
	assert.NotEqual(t, a, natsbus.DeadLetterID("EVIDENCE", "auditor", 7))
	assert.NotEqual(t, a, natsbus.DeadLetterID("EVIDENCE", "verifier", 8))
	assert.Len(t, a, 36)
}

// TestConsumeBoundsATenantsRetries: one tenant (here a host) whose every
// message fails with a retryable error may hold at most TenantRetries
// messages waiting for a retry; the rest are dead-lettered at once with
// ErrRetryBudget, so the consumer's window (MaxAckPending, shared by
// every tenant) stays open and another tenant's messages are handled.
// Without the budget the failing tenant's nak'ed messages fill the
// window through their retry delay and nothing else is delivered.
func TestConsumeBoundsATenantsRetries(t *testing.T) {
	ctx, js := bus(t)
	cfg := topology.New(1).Consumers[0].Config
	cfg.Durable, cfg.MaxDeliver, cfg.MaxAckPending = "budget", 10, 8
	cons, err := js.CreateOrUpdateConsumer(ctx, topology.StreamEvidence, cfg)
	require.NoError(t, err)
	const bad = 20
	for i := range bad {
		_, err := js.PublishMsg(ctx, evidence(t, "bad", i))
		require.NoError(t, err)
	}
	for i := range 3 {
		_, err := js.PublishMsg(ctx, evidence(t, "good", i))
		require.NoError(t, err)
	}
	st := telemetrytest.New(t)
	o := options(js, st)
	o.RetryDelay = func(uint64) time.Duration { return time.Minute } // a retry holds its slot
	o.Tenant = func(m jetstream.Msg) string { return strings.Split(m.Subject(), ".")[2] }
	o.TenantRetries = 2
	run(ctx, t, cons, func(_ context.Context, m jetstream.Msg) error {
		if strings.Contains(m.Subject(), ".bad.") {
			return errors.New("store unavailable")
		}
		return nil
	}, o)
	eventually(t, counter(t, st, acked, 3))
	eventually(t, counter(t, st, deadLettered, bad-2))
	assert.Equal(t, uint64(2), retried.of(t, st), "the budget's retries")
	for _, r := range deadLetters(ctx, t, js) {
		assert.Contains(t, r.OriginalSubject, ".bad.")
		assert.Contains(t, r.Error, natsbus.ErrRetryBudget.Error())
		assert.Contains(t, r.Error, "store unavailable")
	}
}
