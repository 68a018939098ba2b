package eventtrace_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/eventtrace"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

func message(t *testing.T) *nats.Msg {
	t.Helper()
	s := snapshot.New(snapshot.Target{Kind: "systemd.unit", Identifier: "agent.service"}, snapshot.Record{
		Plane: snapshot.Live, Kind: "systemd.unit",
		Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
		Data:   snapshot.Data{"main_pid": snapshot.Int(1)},
	})
	p, err := events.NewEvidenceCollected("web-01", s, time.Minute)
	require.NoError(t, err)
	m, _, err := binding.NewMsg(events.Source("collector", "web-01"), p)
	require.NoError(t, err)
	return m
}

func TestProducerToConsumer(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	prop := telemetry.Propagator()
	tracer := tp.Tracer("t")

	m := message(t)
	assert.False(t, eventtrace.HasTraceContext(m.Header))
	_, prod := eventtrace.StartProducer(context.Background(), tracer, prop, m, "publish")
	prod.End()
	require.True(t, eventtrace.HasTraceContext(m.Header))

	// The message with its trace context still decodes strictly.
	e, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(t, err)
	assert.Equal(t, binding.TraceCarrier(&e).Get(binding.ExtTraceparent), binding.TraceHeaderCarrier(m.Header).Get(binding.ExtTraceparent))

	_, cons := eventtrace.StartConsumer(context.Background(), tracer, prop, m.Header, "process")
	cons.End()
	got := spans.Ended()[1]
	assert.Equal(t, trace.SpanKindConsumer, got.SpanKind())
	assert.Equal(t, prod.SpanContext().TraceID(), got.SpanContext().TraceID())
	assert.Equal(t, prod.SpanContext().SpanID(), got.Parent().SpanID())

	link, ok := eventtrace.Link(prop, m.Header)
	require.True(t, ok)
	assert.Equal(t, prod.SpanContext().SpanID(), link.SpanContext.SpanID())

	// An event built from the consumer's context continues the trace.
	ctx := eventtrace.ExtractEvent(context.Background(), prop, &e)
	var out = e.Clone()
	out.SetExtension(binding.ExtTraceparent, nil)
	ctx, child := tracer.Start(ctx, "verify")
	eventtrace.Inject(ctx, prop, &out)
	child.End()
	assert.Contains(t, binding.TraceCarrier(&out).Get(binding.ExtTraceparent), prod.SpanContext().TraceID().String())
}

func TestConsumerWithoutOrWithBadTraceContext(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	prop := telemetry.Propagator()
	for name, h := range map[string]nats.Header{
		"none":      {},
		"malformed": {"ce-traceparent": []string{"00-zz-yy-01"}},
		"twice":     {"ce-traceparent": []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, span := eventtrace.StartConsumer(context.Background(), tp.Tracer("t"), prop, h, "process")
			defer span.End()
			assert.True(t, span.SpanContext().IsValid(), "a new trace")
			_, ok := eventtrace.Link(prop, h)
			assert.False(t, ok)
		})
	}
}

func TestHeaderCarrier(t *testing.T) {
	h := nats.Header{"CE-Traceparent": []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
	c := binding.TraceHeaderCarrier(h)
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", c.Get("traceparent"), "names match in any case")
	assert.Equal(t, []string{binding.ExtTraceparent}, c.Keys())

	c.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01")
	assert.Len(t, h, 1, "the old header under another case is replaced")
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01", h.Get("ce-traceparent"))

	c.Set("traceparent", "not a traceparent")
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01", c.Get("traceparent"), "a value the codec would reject is ignored")
	c.Set("tracestate", "congo=t61rcWkgMzE")
	assert.Equal(t, "congo=t61rcWkgMzE", c.Get("TraceState"))
	c.Set("baggage", "k=v")
	assert.Empty(t, c.Get("baggage"), "only the trace context extensions")
	assert.ElementsMatch(t, []string{binding.ExtTraceparent, binding.ExtTracestate}, c.Keys())
}
