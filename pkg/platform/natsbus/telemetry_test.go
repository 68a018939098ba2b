package natsbus_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/eventtrace"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// recorder is in-memory telemetry: every span ended, and metrics on demand.
type recorder struct{ *telemetrytest.Recorder }

func newRecorder(t *testing.T) *recorder { return &recorder{telemetrytest.New(t)} }

// sum returns the value of a counter's data point with exactly attrs.
func (r *recorder) sum(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	rm := r.Collect(t)
	want := attribute.NewSet(attrs...)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			s, ok := m.Data.(metricdata.Sum[int64])
			require.True(t, ok, "%s is an int64 sum", name)
			for _, dp := range s.DataPoints {
				if dp.Attributes.Equals(&want) {
					return dp.Value
				}
			}
		}
	}
	return 0
}

func (r *recorder) histogramCount(t *testing.T, name string, attrs ...attribute.KeyValue) uint64 {
	t.Helper()
	rm := r.Collect(t)
	want := attribute.NewSet(attrs...)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, dp := range h.DataPoints {
					if dp.Attributes.Equals(&want) {
						return dp.Count
					}
				}
			}
		}
	}
	return 0
}

func (r *recorder) ended(kind trace.SpanKind, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.Spans.Ended() {
		if s.SpanKind() == kind && s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestConsumeTracesAndCounts publishes three events from a "collector"
// span through a Publisher and consumes them: one is acknowledged, one is
// retried once then acknowledged, one is dead-lettered. Each handled
// message is a span continuing the producer's trace, and the counters
// say what happened, by stream and consumer.
func TestConsumeTracesAndCounts(t *testing.T) {
	ctx, js := bus(t)
	cons := retryConsumer(ctx, t, js, "traced", 10)
	rec := newRecorder(t)
	pub := natsbus.NewPublisher(js, rec.Providers)

	collectCtx, collect := rec.Providers.TracerProvider.Tracer("collector").Start(ctx, "collect")
	var ids []string
	for i := range 3 {
		m := evidence(t, "web-01", i)
		ids = append(ids, m.Header.Get(binding.HeaderMsgID))
		ack, err := pub.PublishRetrying(collectCtx, m, jetstream.WithMsgID(ids[i]))
		require.NoError(t, err)
		assert.Equal(t, topology.StreamEvidence, ack.Stream)
	}
	collect.End()

	var mu sync.Mutex
	handled := map[string]trace.SpanContext{}
	st := rec.Recorder
	o := options(js, st)
	run(ctx, t, cons, func(hctx context.Context, m jetstream.Msg) error {
		id := m.Headers().Get(binding.HeaderMsgID)
		md, err := m.Metadata()
		require.NoError(t, err)
		mu.Lock()
		handled[id] = trace.SpanContextFromContext(hctx)
		mu.Unlock()
		switch {
		case id == ids[1] && md.NumDelivered == 1:
			return errors.New("store unavailable")
		case id == ids[2]:
			return natsbus.Permanent(errors.New("unknown target"))
		}
		return nil
	}, o)
	eventually(t, counter(t, st, acked, 2))
	eventually(t, counter(t, st, deadLettered, 1))
	settled(ctx, t, cons)

	typ := events.TypeEvidenceCollected
	sc := []attribute.KeyValue{natsbus.AttrStream.String(topology.StreamEvidence), natsbus.AttrConsumer.String("traced")}
	with := func(kv ...attribute.KeyValue) []attribute.KeyValue {
		return append(append([]attribute.KeyValue{}, sc...), kv...)
	}
	assert.Equal(t, int64(3), rec.sum(t, natsbus.MetricPublished,
		natsbus.AttrStream.String(topology.StreamEvidence), natsbus.AttrType.String(typ)))
	assert.Equal(t, int64(4), rec.sum(t, natsbus.MetricConsumed, sc...), "three messages, one twice")
	assert.Equal(t, int64(2), rec.sum(t, natsbus.MetricAcked, sc...))
	assert.Equal(t, int64(1), rec.sum(t, natsbus.MetricNacked, with(natsbus.AttrReason.String("retry"))...))
	assert.Equal(t, int64(1), rec.sum(t, natsbus.MetricDeadLettered, with(natsbus.AttrReason.String("permanent"))...))
	assert.Equal(t, uint64(2), rec.histogramCount(t, natsbus.MetricHandleDuration, with(natsbus.AttrOutcome.String("ack"))...))
	assert.Equal(t, uint64(1), rec.histogramCount(t, natsbus.MetricHandleDuration, with(natsbus.AttrOutcome.String("nak"))...))
	assert.Equal(t, uint64(1), rec.histogramCount(t, natsbus.MetricHandleDuration, with(natsbus.AttrOutcome.String("term"))...))

	producers := rec.ended(trace.SpanKindProducer, "publish "+typ)
	require.Len(t, producers, 3)
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, p := range producers {
		assert.Equal(t, collect.SpanContext().SpanID(), p.Parent().SpanID(), "publishing is part of the collection")
		byID[spanAttr(p, "messaging.message.id")] = p
	}
	consumers := rec.ended(trace.SpanKindConsumer, "process "+topology.StreamEvidence)
	require.Len(t, consumers, 4)
	acks := map[string]int{}
	for _, c := range consumers {
		id := spanAttr(c, "messaging.message.id")
		p, ok := byID[id]
		require.True(t, ok, "a consumer span for a published message")
		assert.Equal(t, collect.SpanContext().TraceID(), c.SpanContext().TraceID(), "one trace from collection to handling")
		assert.Equal(t, p.SpanContext().SpanID(), c.Parent().SpanID(), "the handling span is a child of the publish span")
		assert.True(t, c.Parent().IsRemote())
		assert.Equal(t, typ, spanAttr(c, "cloudevents.event_type"))
		assert.Equal(t, "traced", spanAttr(c, "messaging.consumer.group.name"))
		ack := spanAttr(c, natsbus.AttrAck)
		acks[ack]++
		if ack != "ack" {
			assert.Equal(t, codes.Error, c.Status().Code)
		}
	}
	assert.Equal(t, map[string]int{"ack": 2, "nak": 1, "term": 1}, acks)
	mu.Lock()
	for id, sc := range handled {
		assert.Equal(t, collect.SpanContext().TraceID(), sc.TraceID(), "the handler's context carries the span of %s", id)
	}
	mu.Unlock()

	// The dead-letter record continues the trace of the handling span.
	s, err := js.Stream(ctx, topology.StreamDLQ)
	require.NoError(t, err)
	raw, err := s.GetMsg(ctx, 1)
	require.NoError(t, err)
	e, err := binding.FromNATS(raw.Header, raw.Data)
	require.NoError(t, err, "the injected trace context passes the strict codec")
	dctx := eventtrace.ExtractEvent(ctx, rec.Providers.Propagator, &e)
	assert.Equal(t, collect.SpanContext().TraceID(), trace.SpanContextFromContext(dctx).TraceID())

	// It is published through the Publisher: its own producer span, a
	// child of the handling span of the message it records, and counted.
	dead := rec.ended(trace.SpanKindProducer, "publish "+events.TypeEventRejected)
	require.Len(t, dead, 1)
	assert.Equal(t, trace.SpanContextFromContext(dctx).SpanID(), dead[0].SpanContext().SpanID(), "the record carries its publish span")
	assert.Equal(t, handled[ids[2]].SpanID(), dead[0].Parent().SpanID())
	assert.Equal(t, int64(1), rec.sum(t, natsbus.MetricPublished,
		natsbus.AttrStream.String(topology.StreamDLQ), natsbus.AttrType.String(events.TypeEventRejected)))
}

// TestPublishKeepsAnExistingTraceContext: a message that already carries
// a trace context (set when the event was made, before a spool) keeps it.
func TestPublishKeepsAnExistingTraceContext(t *testing.T) {
	ctx, js := bus(t)
	rec := newRecorder(t)
	pub := natsbus.NewPublisher(js, rec.Providers)

	octx, origin := rec.Providers.TracerProvider.Tracer("t").Start(ctx, "collect")
	m := evidence(t, "web-02", 1)
	eventtrace.InjectMsg(octx, rec.Providers.Propagator, m)
	origin.End()
	want := binding.TraceHeaderCarrier(m.Header).Get(binding.ExtTraceparent)
	require.NotEmpty(t, want)

	_, err := pub.Publish(ctx, m)
	require.NoError(t, err)
	assert.Equal(t, want, binding.TraceHeaderCarrier(m.Header).Get(binding.ExtTraceparent))

	// Without a stream for the subject, the publish fails and is counted.
	bad := evidence(t, "web-02", 2)
	bad.Subject = "nostream.here"
	_, err = pub.Publish(ctx, bad)
	require.Error(t, err)
	assert.Equal(t, int64(1), rec.sum(t, natsbus.MetricPublishErrors, natsbus.AttrType.String(events.TypeEvidenceCollected)))
}
