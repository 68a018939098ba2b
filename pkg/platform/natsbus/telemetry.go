package natsbus

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/eventtrace"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// ScopeName is the instrumentation scope of natsbus's spans and metrics.
const ScopeName = "github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"

// Metric names (OpenTelemetry; the Prometheus exposition replaces dots
// with underscores and adds _total to counters and _seconds to the
// duration).
const (
	// MetricConsumed counts messages handed to a handler, by stream and
	// consumer.
	MetricConsumed = "runtimetruth.messages.consumed"
	// MetricAcked counts messages handled and acknowledged, by stream and
	// consumer.
	MetricAcked = "runtimetruth.messages.acked"
	// MetricNacked counts negative acknowledgements, by stream, consumer
	// and reason ("retry": a retryable error, redelivered after a delay;
	// "release": prefetched but not handled when Consume stopped).
	MetricNacked = "runtimetruth.messages.nacked"
	// MetricDeadLettered counts messages recorded in the DLQ stream and
	// terminated, by stream, consumer and reason ("permanent" or
	// "max_deliver").
	MetricDeadLettered = "runtimetruth.messages.dead_lettered"
	// MetricHandleDuration is the time a handler took, by stream, consumer
	// and outcome ("ack", "nak", "term", or "ack_failed" when the
	// acknowledgement was not confirmed and the server will redeliver).
	MetricHandleDuration = "runtimetruth.message.handle.duration"
	// MetricPublished counts events the server stored (or recognized as
	// duplicates), by stream and CloudEvents type.
	MetricPublished = "runtimetruth.messages.published"
	// MetricPublishErrors counts publishes that failed, by CloudEvents
	// type.
	MetricPublishErrors = "runtimetruth.messages.publish_errors"
)

// Metric attribute keys.
const (
	AttrStream   = attribute.Key("stream")
	AttrConsumer = attribute.Key("consumer")
	AttrReason   = attribute.Key("reason")
	AttrOutcome  = attribute.Key("outcome")
	AttrType     = attribute.Key("type")
)

// Span attribute keys (OpenTelemetry messaging semantic conventions, plus
// the CloudEvents ones).
const (
	attrSystem      = attribute.Key("messaging.system")
	attrOperation   = attribute.Key("messaging.operation.type")
	attrDestination = attribute.Key("messaging.destination.name")
	attrGroup       = attribute.Key("messaging.consumer.group.name")
	attrMessageID   = attribute.Key("messaging.message.id")
	attrEventID     = attribute.Key("cloudevents.event_id")
	attrEventType   = attribute.Key("cloudevents.event_type")
	attrSequence    = attribute.Key("messaging.nats.stream.sequence")
	attrDeliveries  = attribute.Key("messaging.nats.delivery_count")
	// AttrAck is the span attribute recording the acknowledgement a
	// handled message got: "ack", "nak", "term" or "ack_failed".
	AttrAck = attribute.Key("runtimetruth.ack")
)

// header returns the decoded value of a "ce-" attribute header.
func header(h nats.Header, attr string) string {
	for k, vs := range h {
		if len(vs) == 1 && len(k) == len(events.HeaderPrefix)+len(attr) &&
			equalFold(k, events.HeaderPrefix+attr) {
			return vs[0]
		}
	}
	return ""
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// consumeTelemetry holds the instruments of one Consume call.
type consumeTelemetry struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	consumed metric.Int64Counter
	acked    metric.Int64Counter
	nacked   metric.Int64Counter
	dead     metric.Int64Counter
	duration metric.Float64Histogram
	attrs    attribute.Set // stream, consumer
	stream   string
	consumer string
}

func newConsumeTelemetry(p telemetry.Providers, stream, consumer string) *consumeTelemetry {
	m := p.Meter(ScopeName)
	t := &consumeTelemetry{
		tracer:   p.Tracer(ScopeName),
		prop:     p.TextMapPropagator(),
		attrs:    attribute.NewSet(AttrStream.String(stream), AttrConsumer.String(consumer)),
		stream:   stream,
		consumer: consumer,
	}
	// An instrument that cannot be created is a no-op one; the SDK reports
	// why through otel.Handle.
	t.consumed, _ = m.Int64Counter(MetricConsumed, metric.WithUnit("{message}"),
		metric.WithDescription("Messages handed to a handler."))
	t.acked, _ = m.Int64Counter(MetricAcked, metric.WithUnit("{message}"),
		metric.WithDescription("Messages handled and acknowledged."))
	t.nacked, _ = m.Int64Counter(MetricNacked, metric.WithUnit("{message}"),
		metric.WithDescription("Messages negatively acknowledged (retry after a delay, or released at shutdown)."))
	t.dead, _ = m.Int64Counter(MetricDeadLettered, metric.WithUnit("{message}"),
		metric.WithDescription("Messages recorded in the dead-letter stream and terminated."))
	t.duration, _ = m.Float64Histogram(MetricHandleDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a handler took on one message."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20))
	return t
}

func (t *consumeTelemetry) with(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributes(append(t.attrs.ToSlice(), kv...)...)
}

// start starts the span of handling m.
func (t *consumeTelemetry) start(ctx context.Context, m jetstream.Msg) (context.Context, trace.Span) {
	h := m.Headers()
	attrs := []attribute.KeyValue{
		attrSystem.String("nats"),
		attrOperation.String("process"),
		attrDestination.String(m.Subject()),
		attrGroup.String(t.consumer),
	}
	if id := h.Get(events.HeaderMsgID); id != "" {
		attrs = append(attrs, attrMessageID.String(id), attrEventID.String(id))
	}
	if typ := header(h, "type"); typ != "" {
		attrs = append(attrs, attrEventType.String(typ))
	}
	if md, err := m.Metadata(); err == nil {
		attrs = append(attrs, attrSequence.Int64(int64(md.Sequence.Stream)), attrDeliveries.Int64(int64(md.NumDelivered)))
	}
	return eventtrace.StartConsumer(ctx, t.tracer, t.prop, h, "process "+t.stream, trace.WithAttributes(attrs...))
}

// end records the outcome of handling m on its span and ends it.
func (t *consumeTelemetry) end(ctx context.Context, span trace.Span, began time.Time, ack string, err error) {
	span.SetAttributes(AttrAck.String(ack))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	t.duration.Record(ctx, time.Since(began).Seconds(), t.with(AttrOutcome.String(ack)))
	span.End()
}

// Publisher publishes encoded events to JetStream with a producer span
// each, the span's trace context in the event (unless the message already
// carries one), and the published and publish_errors counters.
type Publisher struct {
	js        jetstream.JetStream
	tracer    trace.Tracer
	prop      propagation.TextMapPropagator
	published metric.Int64Counter
	errors    metric.Int64Counter
}

// NewPublisher returns a Publisher on js reporting through p (zero fields:
// the OpenTelemetry globals).
func NewPublisher(js jetstream.JetStream, p telemetry.Providers) *Publisher {
	m := p.Meter(ScopeName)
	pub := &Publisher{js: js, tracer: p.Tracer(ScopeName), prop: p.TextMapPropagator()}
	pub.published, _ = m.Int64Counter(MetricPublished, metric.WithUnit("{message}"),
		metric.WithDescription("Events stored by JetStream (or recognized as duplicates)."))
	pub.errors, _ = m.Int64Counter(MetricPublishErrors, metric.WithUnit("{message}"),
		metric.WithDescription("Event publishes that failed."))
	return pub
}

// Publish publishes m (built by events.NewMsg or events.ToNATS) and waits
// for the stream's acknowledgement. It is one attempt: wrap it in Retry, or
// use PublishRetrying, to ride out a leader change. The producer span is
// named "publish <event type>".
func (p *Publisher) Publish(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	typ := header(m.Header, "type")
	name := typ
	if name == "" {
		name = m.Subject
	}
	ctx, span := eventtrace.StartProducer(ctx, p.tracer, p.prop, m, "publish "+name, trace.WithAttributes(
		attrSystem.String("nats"),
		attrOperation.String("send"),
		attrDestination.String(m.Subject),
		attrMessageID.String(m.Header.Get(events.HeaderMsgID)),
		attrEventType.String(typ),
	))
	defer span.End()
	ack, err := p.js.PublishMsg(ctx, m, opts...)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		p.errors.Add(ctx, 1, metric.WithAttributes(AttrType.String(typ)))
		return nil, err
	}
	span.SetAttributes(attrSequence.Int64(int64(ack.Sequence)), attribute.Bool("messaging.nats.duplicate", ack.Duplicate),
		attribute.String("messaging.nats.stream", ack.Stream))
	p.published.Add(ctx, 1, metric.WithAttributes(AttrStream.String(ack.Stream), AttrType.String(typ)))
	return ack, nil
}

// PublishRetrying is Publish under Retry: it rides out timeouts, missing
// responders and reconnects until ctx ends. Each attempt has its own span;
// the message keeps the trace context the first attempt gave it. m must
// carry a Nats-Msg-Id (events.NewMsg sets it) so a repeat is de-duplicated.
func (p *Publisher) PublishRetrying(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	var ack *jetstream.PubAck
	err := Retry(ctx, func(ctx context.Context) (err error) {
		ack, err = p.Publish(ctx, m, opts...)
		return err
	})
	return ack, err
}
