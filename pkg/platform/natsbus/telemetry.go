package natsbus

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/eventtrace"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// ScopeName is the instrumentation scope of natsbus's spans and metrics.
const ScopeName = "github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"

// Metric names (OpenTelemetry; the Prometheus exposition replaces dots
// with underscores and adds _total to counters and _seconds to the
// duration).
const (
	// MetricReceived counts messages taken from a consumer, by stream and
	// consumer: those handed to a handler and those released at shutdown.
	MetricReceived = "runtimetruth.messages.received"
	// MetricConsumed counts messages handed to a handler, by stream and
	// consumer.
	MetricConsumed = "runtimetruth.messages.consumed"
	// MetricAcked counts messages handled and acknowledged, by stream and
	// consumer.
	MetricAcked = "runtimetruth.messages.acked"
	// MetricNacked counts negative acknowledgements, by stream, consumer
	// and reason ("retry": a retryable error, redelivered after a delay;
	// "release": prefetched but not handled when the loop stopped).
	MetricNacked = "runtimetruth.messages.nacked"
	// MetricDeadLettered counts messages recorded in the DLQ stream and
	// terminated, by stream, consumer and reason ("permanent" or
	// "max_deliver").
	MetricDeadLettered = "runtimetruth.messages.dead_lettered"
	// MetricConsumeErrors counts what failed in a consume loop, by stream,
	// consumer and reason ("panic": a handler panicked or returned a result
	// count other than its batch's, and the batch is retried; "ack": an
	// ack, nak or term was not confirmed; "dead_letter": a dead-letter
	// record could not be written, and the message is retried; "fetch": a
	// pull failed and is made again).
	MetricConsumeErrors = "runtimetruth.messages.consume_errors"
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
		if len(vs) == 1 && len(k) == len(binding.HeaderPrefix)+len(attr) &&
			equalFold(k, binding.HeaderPrefix+attr) {
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

// Outcomes of a handled message (the AttrAck span attribute and the
// handle duration's outcome label).
const (
	OutcomeAck       = "ack"        // handled and acknowledged
	OutcomeNak       = "nak"        // negatively acknowledged (redelivered later)
	OutcomeTerm      = "term"       // dead-lettered and terminated
	OutcomeAckFailed = "ack_failed" // the acknowledgement was not confirmed
)

// Reasons of the nacked, dead_lettered and consume_errors counters.
const (
	ReasonRetry      = "retry"       // nacked: a retryable error, redelivered after a delay
	ReasonRelease    = "release"     // nacked: prefetched, not handled, handed back at shutdown
	ReasonPermanent  = "permanent"   // dead-lettered: the handler returned a Permanent error
	ReasonMaxDeliver = "max_deliver" // dead-lettered: a retryable error on the last delivery
	ReasonPanic      = "panic"       // consume error: a handler panicked
	ReasonAck        = "ack"         // consume error: an acknowledgement was not confirmed
	ReasonDeadLetter = "dead_letter" // consume error: a dead-letter record was not written
	// ReasonDeadLetterFull: consume error: the DLQ stream could not take
	// the record (full); the message was terminated with its reason all
	// the same, rather than redelivered into a full stream for ever.
	ReasonDeadLetterFull = "dead_letter_full"
	ReasonFetch          = "fetch" // consume error: a pull failed
)

// ConsumeTelemetry is the per-message instrumentation of a consumer: the
// span of handling each message (kind consumer, named "process <stream>",
// a child of the producer's span named by the message's trace headers),
// the received, consumed, acked, nacked, dead_lettered and consume_errors
// counters and the handle duration, labelled by stream and consumer.
// Consume and ConsumeBatch use it; a consume loop of its own (one that must
// keep order, say) uses it the same way: Received when a message is taken,
// Begin when it is handed to the handler, Acked, Nacked or DeadLettered as
// it is settled, End once it is, Failed for what goes wrong. It is safe for
// concurrent use, and adds no allocation per message beyond the span's when
// spans are not recorded.
type ConsumeTelemetry struct {
	tracer    trace.Tracer
	prop      propagation.TextMapPropagator
	received  metric.Int64Counter
	consumed  metric.Int64Counter
	acked     metric.Int64Counter
	nacked    metric.Int64Counter
	dead      metric.Int64Counter
	errors    metric.Int64Counter
	duration  metric.Float64Histogram
	stream    string
	consumer  string
	spanName  string
	startOpts []trace.SpanStartOption

	// The measurement options, made once: no allocation per message.
	base                     metric.MeasurementOption
	nackRetry, nackRelease   metric.MeasurementOption
	deadPermanent, deadLast  metric.MeasurementOption
	failed                   map[string]metric.MeasurementOption // by consume-error reason
	outAck, outNak, outTerm  metric.MeasurementOption
	outAckFailed, outUnknown metric.MeasurementOption
}

// NewConsumeTelemetry returns the instrumentation of consumer on stream,
// reporting through p (zero fields: the OpenTelemetry globals).
func NewConsumeTelemetry(p telemetry.Providers, stream, consumer string) *ConsumeTelemetry {
	m := p.Meter(ScopeName)
	t := &ConsumeTelemetry{
		tracer:    p.Tracer(ScopeName),
		prop:      p.TextMapPropagator(),
		stream:    stream,
		consumer:  consumer,
		spanName:  "process " + stream,
		startOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)},
	}
	telemetry.NewCounters(m,
		telemetry.Counter{Dst: &t.received, Name: MetricReceived, Unit: "{message}",
			Description: "Messages taken from the consumer (handled, or released at shutdown)."},
		telemetry.Counter{Dst: &t.consumed, Name: MetricConsumed, Unit: "{message}",
			Description: "Messages handed to a handler."},
		telemetry.Counter{Dst: &t.acked, Name: MetricAcked, Unit: "{message}",
			Description: "Messages handled and acknowledged."},
		telemetry.Counter{Dst: &t.nacked, Name: MetricNacked, Unit: "{message}",
			Description: "Messages negatively acknowledged (retry after a delay, or released at shutdown)."},
		telemetry.Counter{Dst: &t.dead, Name: MetricDeadLettered, Unit: "{message}",
			Description: "Messages recorded in the dead-letter stream and terminated."},
		telemetry.Counter{Dst: &t.errors, Name: MetricConsumeErrors, Unit: "{error}",
			Description: "Consume loop failures: handler panics, unconfirmed acknowledgements, dead-letter records not written, failed pulls."},
	)
	// A histogram that cannot be created is a no-op one, as a counter
	// (telemetry.NewCounters).
	t.duration, _ = m.Float64Histogram(MetricHandleDuration, metric.WithUnit("s"),
		metric.WithDescription("Time a handler took on one message."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20))
	with := func(kv ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{
			AttrStream.String(stream), AttrConsumer.String(consumer)}, kv...)...))
	}
	t.base = with()
	t.nackRetry, t.nackRelease = with(AttrReason.String(ReasonRetry)), with(AttrReason.String(ReasonRelease))
	t.deadPermanent, t.deadLast = with(AttrReason.String(ReasonPermanent)), with(AttrReason.String(ReasonMaxDeliver))
	t.outAck, t.outNak = with(AttrOutcome.String(OutcomeAck)), with(AttrOutcome.String(OutcomeNak))
	t.outTerm, t.outAckFailed = with(AttrOutcome.String(OutcomeTerm)), with(AttrOutcome.String(OutcomeAckFailed))
	t.outUnknown = with(AttrOutcome.String("unknown"))
	t.failed = map[string]metric.MeasurementOption{}
	for _, r := range []string{ReasonPanic, ReasonAck, ReasonDeadLetter, ReasonDeadLetterFull, ReasonFetch} {
		t.failed[r] = with(AttrReason.String(r))
	}
	return t
}

// Handling is one message in hand, from Begin to End.
type Handling struct {
	span  trace.Span
	began time.Time
}

// Span returns the message's span.
func (h Handling) Span() trace.Span { return h.span }

// Begin starts handling m: it counts it consumed and starts its span, a
// child of the producer's span named by m's trace headers (a new trace
// when there is none). The returned context carries the span: spans and
// publishes made under it are part of the message's trace.
func (t *ConsumeTelemetry) Begin(ctx context.Context, m jetstream.Msg) (context.Context, Handling) {
	h := m.Headers()
	if remote := trace.SpanContextFromContext(eventtrace.Extract(context.Background(), t.prop, h)); remote.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
	}
	ctx, span := t.tracer.Start(ctx, t.spanName, t.startOpts...)
	if span.IsRecording() {
		span.SetAttributes(
			attrSystem.String("nats"),
			attrOperation.String("process"),
			attrDestination.String(m.Subject()),
			attrGroup.String(t.consumer),
		)
		if id := h.Get(binding.HeaderMsgID); id != "" {
			span.SetAttributes(attrMessageID.String(id), attrEventID.String(id))
		}
		if typ := header(h, "type"); typ != "" {
			span.SetAttributes(attrEventType.String(typ))
		}
		if md, err := m.Metadata(); err == nil {
			span.SetAttributes(attrSequence.Int64(int64(md.Sequence.Stream)), attrDeliveries.Int64(int64(md.NumDelivered)))
		}
	}
	t.consumed.Add(ctx, 1, t.base)
	return ctx, Handling{span: span, began: time.Now()}
}

// Received counts a message taken from the consumer.
func (t *ConsumeTelemetry) Received(ctx context.Context) { t.received.Add(ctx, 1, t.base) }

// Failed counts a consume loop failure; reason is ReasonPanic, ReasonAck,
// ReasonDeadLetter or ReasonFetch.
func (t *ConsumeTelemetry) Failed(ctx context.Context, reason string) {
	opt, ok := t.failed[reason]
	if !ok {
		opt = t.base
	}
	t.errors.Add(ctx, 1, opt)
}

// Acked counts a message acknowledged (the server confirmed it).
func (t *ConsumeTelemetry) Acked(ctx context.Context) { t.acked.Add(ctx, 1, t.base) }

// Nacked counts a negative acknowledgement; reason is ReasonRetry or
// ReasonRelease.
func (t *ConsumeTelemetry) Nacked(ctx context.Context, reason string) {
	opt := t.nackRetry
	if reason == ReasonRelease {
		opt = t.nackRelease
	}
	t.nacked.Add(ctx, 1, opt)
}

// DeadLettered counts a message recorded in the dead-letter stream and
// terminated; permanent tells a Permanent error from a retryable one on the
// last delivery.
func (t *ConsumeTelemetry) DeadLettered(ctx context.Context, permanent bool) {
	opt := t.deadLast
	if permanent {
		opt = t.deadPermanent
	}
	t.dead.Add(ctx, 1, opt)
}

// End records the outcome of a message (OutcomeAck, OutcomeNak, OutcomeTerm
// or OutcomeAckFailed) and its error on its span, records the handle
// duration since Begin, and ends the span.
func (t *ConsumeTelemetry) End(ctx context.Context, h Handling, outcome string, err error) {
	if h.span.IsRecording() {
		h.span.SetAttributes(AttrAck.String(outcome))
		if err != nil {
			h.span.RecordError(err)
			h.span.SetStatus(codes.Error, err.Error())
		}
	}
	var opt metric.MeasurementOption
	switch outcome {
	case OutcomeAck:
		opt = t.outAck
	case OutcomeNak:
		opt = t.outNak
	case OutcomeTerm:
		opt = t.outTerm
	case OutcomeAckFailed:
		opt = t.outAckFailed
	default:
		opt = t.outUnknown
	}
	t.duration.Record(ctx, time.Since(h.began).Seconds(), opt)
	h.span.End()
}

// Publisher publishes encoded events to JetStream with a producer span
// each, the span's trace context in the event (unless the message already
// carries one), and the published and publish_errors counters. It is safe
// for concurrent use.
type Publisher struct {
	js        jetstream.JetStream
	tracer    trace.Tracer
	prop      propagation.TextMapPropagator
	published metric.Int64Counter
	errors    metric.Int64Counter
	startOpts []trace.SpanStartOption

	// types caches, by event type, the span name and the measurement
	// options: no allocation per message.
	mu    sync.RWMutex
	types map[string]*pubType
}

// maxPubTypes bounds the types a Publisher caches.
const maxPubTypes = 256

// pubType is what a Publisher made once for an event type.
type pubType struct {
	typ    string
	name   string                              // "publish <type>"
	errOpt metric.MeasurementOption            // type
	opts   map[string]metric.MeasurementOption // by stream: stream, type
}

// typeOf returns the cached pubType of m's event type (its subject when it
// has none).
func (p *Publisher) typeOf(m *nats.Msg) *pubType {
	typ := header(m.Header, "type")
	key := typ
	if key == "" {
		key = m.Subject
	}
	p.mu.RLock()
	t, ok := p.types[key]
	p.mu.RUnlock()
	if ok {
		return t
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.types[key]; ok {
		return t
	}
	t = &pubType{typ: typ, name: "publish " + key, opts: map[string]metric.MeasurementOption{},
		errOpt: metric.WithAttributeSet(attribute.NewSet(AttrType.String(typ)))}
	if len(p.types) < maxPubTypes { // catalog types; subjects of untyped messages stop being cached
		p.types[key] = t
	}
	return t
}

// publishedOpt returns the measurement option of a message of t stored in
// stream.
func (p *Publisher) publishedOpt(t *pubType, stream string) metric.MeasurementOption {
	p.mu.RLock()
	opt, ok := t.opts[stream]
	p.mu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(attribute.NewSet(AttrStream.String(stream), AttrType.String(t.typ)))
	p.mu.Lock()
	t.opts[stream] = opt
	p.mu.Unlock()
	return opt
}

// NewPublisher returns a Publisher on js reporting through p (zero fields:
// the OpenTelemetry globals).
func NewPublisher(js jetstream.JetStream, p telemetry.Providers) *Publisher {
	m := p.Meter(ScopeName)
	pub := &Publisher{js: js, tracer: p.Tracer(ScopeName), prop: p.TextMapPropagator(),
		startOpts: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}, types: map[string]*pubType{}}
	telemetry.NewCounters(m,
		telemetry.Counter{Dst: &pub.published, Name: MetricPublished, Unit: "{message}",
			Description: "Events stored by JetStream (or recognized as duplicates)."},
		telemetry.Counter{Dst: &pub.errors, Name: MetricPublishErrors, Unit: "{message}",
			Description: "Event publishes that failed."},
	)
	return pub
}

// JetStream returns the JetStream the publisher publishes to.
func (p *Publisher) JetStream() jetstream.JetStream { return p.js }

// start starts the producer span of m as eventtrace.StartProducer does.
func (p *Publisher) start(ctx context.Context, m *nats.Msg) (context.Context, trace.Span, *pubType) {
	t := p.typeOf(m)
	ctx, span := p.tracer.Start(ctx, t.name, p.startOpts...)
	if span.IsRecording() {
		span.SetAttributes(
			attrSystem.String("nats"),
			attrOperation.String("send"),
			attrDestination.String(m.Subject),
			attrMessageID.String(m.Header.Get(binding.HeaderMsgID)),
			attrEventType.String(t.typ),
		)
	}
	if !eventtrace.HasTraceContext(m.Header) {
		eventtrace.InjectMsg(ctx, p.prop, m)
	}
	return ctx, span, t
}

// finish records the result of publishing a message of type typ on its
// span and counters, and ends the span.
func (p *Publisher) finish(ctx context.Context, span trace.Span, t *pubType, ack *jetstream.PubAck, err error) {
	defer span.End()
	if err != nil {
		if span.IsRecording() {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		p.errors.Add(ctx, 1, t.errOpt)
		return
	}
	if span.IsRecording() {
		span.SetAttributes(attrSequence.Int64(int64(ack.Sequence)), attribute.Bool("messaging.nats.duplicate", ack.Duplicate),
			attribute.String("messaging.nats.stream", ack.Stream))
	}
	p.published.Add(ctx, 1, p.publishedOpt(t, ack.Stream))
}

// Publish publishes m (built by events.NewMsg or events.ToNATS) and waits
// for the stream's acknowledgement. It is one attempt: wrap it in Retry, or
// use PublishRetrying, to ride out a leader change. The producer span is
// named "publish <event type>".
func (p *Publisher) Publish(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	ctx, span, t := p.start(ctx, m)
	ack, err := p.js.PublishMsg(ctx, m, opts...)
	if err != nil {
		ack = nil
	}
	p.finish(ctx, span, t, ack, err)
	return ack, err
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

// Outgoing is one message of PublishAll.
type Outgoing struct {
	// Ctx is the context the message's span is a child of (nil:
	// PublishAll's ctx), e.g. the span of handling the message it answers.
	Ctx context.Context
	// Msg is the message, built by events.NewMsg or events.ToNATS, with a
	// Nats-Msg-Id.
	Msg *nats.Msg
	// Ack and Err are the result: the stream's acknowledgement, or why
	// the message was not stored.
	Ack *jetstream.PubAck
	Err error

	span trace.Span
	typ  *pubType
	fut  jetstream.PubAckFuture
}

// PublishAll publishes the messages without waiting on each in turn, then
// waits for every acknowledgement; a message the stream did not
// acknowledge is published again, one by one, under Retry until ctx ends
// (the stream drops a copy it stored, by Nats-Msg-Id). Each message has
// its producer span, from its first send to its acknowledgement, and counts
// as Publish counts it. The results are in out's Ack and Err.
func (p *Publisher) PublishAll(ctx context.Context, out []Outgoing) {
	for i := range out {
		o := &out[i]
		pctx := o.Ctx
		if pctx == nil {
			pctx = ctx
		}
		_, o.span, o.typ = p.start(pctx, o.Msg)
		if f, err := p.js.PublishMsgAsync(o.Msg); err == nil {
			o.fut = f
		}
	}
	for i := range out {
		o := &out[i]
		if f := o.fut; f != nil {
			o.fut = nil
			select {
			case ack := <-f.Ok():
				o.Ack, o.Err = ack, nil
				p.finish(ctx, o.span, o.typ, ack, nil)
				continue
			case <-f.Err(): //nolint:errcheck // retried one by one below, where its error is kept
			case <-ctx.Done():
			}
		}
		o.Err = Retry(ctx, func(ctx context.Context) (err error) {
			o.Ack, err = p.js.PublishMsg(ctx, o.Msg)
			return err
		})
		if o.Err != nil {
			o.Ack = nil
		}
		p.finish(ctx, o.span, o.typ, o.Ack, o.Err)
	}
}
