package natsbus_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// TestConsumeBatch hands a batch handler ten messages that are waiting:
// after the first batch, a worker takes the queued ones up to MaxBatch.
// Each message is settled by its own result (one acknowledged, one
// dead-lettered, one retried and then acknowledged) and has its own span,
// the one its context carries.
func TestConsumeBatch(t *testing.T) {
	ctx, js := bus(t)
	cons := retryConsumer(ctx, t, js, "batched", 10)
	acks := publish(ctx, t, js, 10)
	rec := newRecorder(t)

	st := rec.Recorder
	var mu sync.Mutex
	var sizes []int
	spans := map[trace.SpanID]string{} // span of a message's context → message id
	o := options(js, st)
	o.MaxBatch, o.Prefetch = 4, 16
	runBatch(ctx, t, cons, func(ctx context.Context, msgs []jetstream.Msg, msgCtxs []context.Context) []error {
		mu.Lock()
		first := len(sizes) == 0
		sizes = append(sizes, len(msgs))
		mu.Unlock()
		if first { // let the rest arrive and queue up
			eventually(t, counter(t, st, received, 10))
		}
		_, ok := ctx.Deadline()
		assert.True(t, ok, "the batch has the handler timeout")
		out := make([]error, len(msgs))
		for i, m := range msgs {
			md, err := m.Metadata()
			require.NoError(t, err)
			_, ok := msgCtxs[i].Deadline()
			assert.True(t, ok, "a message's context has the handler timeout")
			mu.Lock()
			spans[trace.SpanContextFromContext(msgCtxs[i]).SpanID()] = m.Headers().Get(binding.HeaderMsgID)
			mu.Unlock()
			switch {
			case md.Sequence.Stream == acks[2].Sequence:
				out[i] = natsbus.Permanent(errors.New("malformed"))
			case md.Sequence.Stream == acks[3].Sequence && md.NumDelivered == 1:
				out[i] = errors.New("store unavailable")
			}
		}
		return out
	}, o)
	eventually(t, counter(t, st, acked, 9))
	eventually(t, counter(t, st, deadLettered, 1))
	settled(ctx, t, cons)
	assert.Equal(t, uint64(1), retried.of(t, st))
	assert.Equal(t, uint64(1), permanent.of(t, st))
	recs := deadLetters(ctx, t, js)
	require.Len(t, recs, 1)
	assert.Equal(t, acks[2].Sequence, recs[0].StreamSequence)

	mu.Lock()
	defer mu.Unlock()
	require.GreaterOrEqual(t, len(sizes), 2)
	assert.Equal(t, 4, sizes[1], "a full batch of what was queued")
	total := 0
	for _, n := range sizes {
		assert.LessOrEqual(t, n, 4)
		total += n
	}
	assert.Equal(t, 11, total, "ten messages, one twice")

	sc := []attribute.KeyValue{natsbus.AttrStream.String(topology.StreamEvidence), natsbus.AttrConsumer.String("batched")}
	assert.Equal(t, int64(11), rec.sum(t, natsbus.MetricConsumed, sc...))
	assert.Equal(t, int64(9), rec.sum(t, natsbus.MetricAcked, sc...))
	consumers := rec.ended(trace.SpanKindConsumer, "process "+topology.StreamEvidence)
	require.Len(t, consumers, 11)
	assert.Len(t, spans, 11)
	for _, c := range consumers {
		assert.Equal(t, spanAttr(c, "messaging.message.id"), spans[c.SpanContext().SpanID()],
			"the message's context carries its span")
	}
}

// A panic, or a result count other than the batch's, fails every message
// of the batch, to be retried.
func TestConsumeBatchFailsTheWholeBatch(t *testing.T) {
	for name, fail := range map[string]func([]jetstream.Msg) []error{
		"panic":         func([]jetstream.Msg) []error { panic("boom") },
		"short results": func(msgs []jetstream.Msg) []error { return make([]error, len(msgs)-1) },
	} {
		t.Run(name, func(t *testing.T) {
			ctx, js := bus(t)
			cons := retryConsumer(ctx, t, js, "retrying", 10)
			publish(ctx, t, js, 5)

			st := telemetrytest.New(t)
			var failed atomic.Int64
			runBatch(ctx, t, cons, func(_ context.Context, msgs []jetstream.Msg, _ []context.Context) []error {
				if failed.CompareAndSwap(0, int64(len(msgs))) {
					return fail(msgs)
				}
				return make([]error, len(msgs))
			}, options(js, st))
			eventually(t, counter(t, st, acked, 5))
			settled(ctx, t, cons)
			assert.Equal(t, uint64(1), panics.of(t, st))
			assert.Equal(t, uint64(failed.Load()), retried.of(t, st))
		})
	}
}
