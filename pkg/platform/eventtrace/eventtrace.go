// Package eventtrace carries OpenTelemetry trace context through
// CloudEvents on NATS (the traceparent and tracestate extensions, sent as
// ce-traceparent and ce-tracestate headers): a producer injects its span's
// context into an outgoing event or message, and a consumer starts the span
// of handling a message as a child of the producer's span, so that one
// collection can be followed collector → verifier → auditor as one trace.
package eventtrace

import (
	"context"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

func propagator(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p == nil {
		return otel.GetTextMapPropagator()
	}
	return p
}

// Inject puts the span context of ctx into e's traceparent and tracestate
// extensions (nothing when ctx holds no valid span). A nil prop means the
// global propagator.
func Inject(ctx context.Context, prop propagation.TextMapPropagator, e *event.Event) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	propagator(prop).Inject(ctx, binding.TraceCarrier(e))
}

// InjectMsg puts the span context of ctx into the trace headers of a
// message built by events.NewMsg or events.ToNATS, replacing any there;
// nothing when ctx holds no valid span.
func InjectMsg(ctx context.Context, prop propagation.TextMapPropagator, m *nats.Msg) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if m.Header == nil {
		m.Header = nats.Header{}
	}
	propagator(prop).Inject(ctx, binding.TraceHeaderCarrier(m.Header))
}

// HasTraceContext reports whether the message headers carry a traceparent.
func HasTraceContext(h nats.Header) bool {
	return binding.TraceHeaderCarrier(h).Get(binding.ExtTraceparent) != ""
}

// Extract returns ctx with the remote span context carried by the message
// headers h (unchanged when there is none, or it is malformed).
func Extract(ctx context.Context, prop propagation.TextMapPropagator, h nats.Header) context.Context {
	return propagator(prop).Extract(ctx, binding.TraceHeaderCarrier(h))
}

// ExtractEvent is Extract for a decoded event.
func ExtractEvent(ctx context.Context, prop propagation.TextMapPropagator, e *event.Event) context.Context {
	return propagator(prop).Extract(ctx, binding.TraceCarrier(e))
}

// StartConsumer starts the span of handling a received message: a span of
// kind Consumer whose parent is the producer's span named by the message's
// trace headers (a new trace when they are absent or malformed). A span
// handling several messages at once uses Link instead. End the span when
// the message is acknowledged.
func StartConsumer(ctx context.Context, tracer trace.Tracer, prop propagation.TextMapPropagator, h nats.Header, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	remote := trace.SpanContextFromContext(Extract(context.Background(), prop, h))
	opts = append([]trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}, opts...)
	if remote.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
	}
	return tracer.Start(ctx, name, opts...)
}

// Link returns a link to the producer's span named by the message headers,
// for a span that handles several messages at once (a batch); ok is false
// when the headers carry no valid trace context.
func Link(prop propagation.TextMapPropagator, h nats.Header) (trace.Link, bool) {
	remote := trace.SpanContextFromContext(Extract(context.Background(), prop, h))
	return trace.Link{SpanContext: remote}, remote.IsValid()
}

// StartProducer starts the span of publishing message m (kind Producer)
// and injects its context into m's trace headers, unless m already carries
// a trace context (set when the event was created, for a message published
// again from a spool), which is kept. End the span when the publish is
// acknowledged.
func StartProducer(ctx context.Context, tracer trace.Tracer, prop propagation.TextMapPropagator, m *nats.Msg, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	opts = append([]trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}, opts...)
	ctx, span := tracer.Start(ctx, name, opts...)
	if !HasTraceContext(m.Header) {
		InjectMsg(ctx, prop, m)
	}
	return ctx, span
}
