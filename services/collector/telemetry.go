package collector

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// ScopeName is the instrumentation scope of the collector's spans and
// metrics.
const ScopeName = "github.com/runtimetruth/runtimetruth/services/collector"

// Metric names (OpenTelemetry; the Prometheus exposition replaces dots with
// underscores and adds the unit, _seconds or _bytes, and _total to
// counters). Besides these, the collector's natsbus.Publisher counts what
// it delivers: natsbus.MetricPublished (events JetStream acknowledged,
// duplicates included) and natsbus.MetricPublishErrors (failed publish
// attempts, retried with backoff).
const (
	// MetricCollectionDuration is the time one collection took, from the
	// start of the source's work to its events in the spool, by kind (the
	// target's source kind: git, process, systemd, codex, python, node) and
	// status (collected, failed, refused, error: Result.Status). Its count
	// is the collections run; those of status failed spooled a
	// collection.failed event.
	MetricCollectionDuration = "runtimetruth.collection.duration"
	// MetricSpoolDepth is the number of events in the spool, waiting to be
	// published (an observable gauge, read at collection time).
	MetricSpoolDepth = "runtimetruth.collector.spool.depth"
	// MetricSpoolBytes is the size of the events in the spool.
	MetricSpoolBytes = "runtimetruth.collector.spool.size"
	// MetricEventsSpooled counts events written to the spool, by type
	// (the CloudEvents type: a collection's evidence.collected or
	// collection.failed event, and its runnable.modified ones).
	MetricEventsSpooled = "runtimetruth.collector.events.spooled"
	// MetricEventsRefused counts events the spool refused because it was
	// full (spool.max_events, spool.max_bytes), by type: the collection's
	// status is refused, and nothing of it is spooled.
	MetricEventsRefused = "runtimetruth.collector.events.refused"
	// MetricEventsInvalid counts events the codec refused to build, by
	// type (logged): a runnable.modified event is left out of its batch; a
	// collection.failed event leaves its collection with status error.
	MetricEventsInvalid = "runtimetruth.collector.events.invalid"
	// MetricEventsDuplicates counts events JetStream acknowledged as
	// duplicates of one it holds (delivered again after a crash between
	// the acknowledgement and the spool's commit); natsbus.MetricPublished
	// counts them too.
	MetricEventsDuplicates = "runtimetruth.collector.events.duplicates"
	// MetricEventsRejected counts events NATS refused for good (larger
	// than the server or the stream allows, or a bad subject): logged with
	// their id and removed from the spool.
	MetricEventsRejected = "runtimetruth.collector.events.rejected"
	// MetricSpoolErrors counts failed spool operations, by operation
	// (SpoolAppend, SpoolRead, SpoolDecode, SpoolCommit).
	MetricSpoolErrors = "runtimetruth.collector.spool.errors"
	// MetricSpoolRecovered counts the bytes of damaged records cut when
	// the spool was opened (each cut is logged).
	MetricSpoolRecovered = "runtimetruth.collector.spool.recovered"
	// MetricDeliveryLag is the time from spooling the last event delivered
	// to JetStream's acknowledgement of it (a gauge, set at each delivery;
	// not reported before the first).
	MetricDeliveryLag = "runtimetruth.collector.delivery.lag"
	// MetricControlRequests counts collect-now requests received on the
	// collector's own subject (each answered, signed).
	MetricControlRequests = "runtimetruth.collector.control.requests"
	// MetricControlForeign counts requests on another host's subject,
	// dropped unanswered (never expected: the collector subscribes to its
	// own only).
	MetricControlForeign = "runtimetruth.collector.control.foreign"
)

// The operations of MetricSpoolErrors.
const (
	SpoolAppend = "append" // spooling a collection's events
	SpoolRead   = "read"   // reading the next event to deliver
	SpoolDecode = "decode" // a record that is not a message: skipped
	SpoolCommit = "commit" // removing a delivered event
)

// Metric attribute keys.
const (
	AttrKind      = attribute.Key("kind")
	AttrStatus    = attribute.Key("status")
	AttrType      = natsbus.AttrType // an event's CloudEvents type
	AttrOperation = attribute.Key("operation")
)

// instruments are the collector's tracer and metrics: its counters are
// these instruments and nothing else.
type instruments struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	duration metric.Float64Histogram
	lag      metric.Float64Gauge
	meter    metric.Meter

	spooled, refused, invalid, duplicates, rejected metric.Int64Counter
	spoolErrors, recovered, requests, foreign       metric.Int64Counter
}

func newInstruments(p telemetry.Providers) *instruments {
	m := p.Meter(ScopeName)
	in := &instruments{tracer: p.Tracer(ScopeName), prop: p.TextMapPropagator(), meter: m}
	// An instrument that cannot be created is a no-op one; the SDK reports
	// why through otel.Handle.
	in.duration, _ = m.Float64Histogram(MetricCollectionDuration, metric.WithUnit("s"),
		metric.WithDescription("Time one collection took, from the source's work to its events in the spool."),
		metric.WithExplicitBucketBoundaries(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
	in.lag, _ = m.Float64Gauge(MetricDeliveryLag, metric.WithUnit("s"),
		metric.WithDescription("Time from spooling the last event delivered to its acknowledgement by JetStream."))
	for _, c := range []struct {
		c          *metric.Int64Counter
		name, unit string
		desc       string
	}{
		{&in.spooled, MetricEventsSpooled, "{event}", "Events written to the spool, by type."},
		{&in.refused, MetricEventsRefused, "{event}", "Events refused because the spool was full, by type."},
		{&in.invalid, MetricEventsInvalid, "{event}", "Events the codec refused to build, by type."},
		{&in.duplicates, MetricEventsDuplicates, "{event}", "Events JetStream acknowledged as duplicates of one it holds."},
		{&in.rejected, MetricEventsRejected, "{event}", "Events NATS refused for good, removed from the spool."},
		{&in.spoolErrors, MetricSpoolErrors, "{error}", "Failed spool operations, by operation."},
		{&in.recovered, MetricSpoolRecovered, "By", "Bytes of damaged records cut when the spool was opened."},
		{&in.requests, MetricControlRequests, "{request}", "Collect-now requests received on the collector's own subject."},
		{&in.foreign, MetricControlForeign, "{request}", "Collect-now requests on another host's subject, dropped."},
	} {
		*c.c, _ = m.Int64Counter(c.name, metric.WithUnit(c.unit), metric.WithDescription(c.desc))
	}
	return in
}

// countEvents adds msgs to c, by type.
func countEvents(ctx context.Context, c metric.Int64Counter, msgs []spooled) {
	for _, m := range msgs {
		c.Add(ctx, 1, ofType(m.typ))
	}
}

// ofType is the measurement option of an event of CloudEvents type typ.
func ofType(typ string) metric.AddOption {
	return metric.WithAttributes(AttrType.String(typ))
}

// spoolError counts a failed spool operation op.
func (in *instruments) spoolError(ctx context.Context, op string) {
	in.spoolErrors.Add(ctx, 1, metric.WithAttributes(AttrOperation.String(op)))
}

// startCollection starts the span of one collection of a target; its
// context goes into the collection's events, so the trace continues in the
// verifier and the auditor.
func (in *instruments) startCollection(ctx context.Context, name, kind string) (context.Context, trace.Span) {
	ctx, span := in.tracer.Start(ctx, "collect "+kind, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("runtimetruth.target.name", name), AttrKind.String(kind))
	}
	return ctx, span
}

// endCollection records a collection's result on its span and histogram.
func (in *instruments) endCollection(ctx context.Context, span trace.Span, began time.Time, res Result, err error) {
	if span.IsRecording() {
		span.SetAttributes(AttrStatus.String(res.Status), attribute.String("runtimetruth.event.id", res.EventID))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
	in.duration.Record(ctx, time.Since(began).Seconds(), metric.WithAttributes(AttrKind.String(res.Kind), AttrStatus.String(res.Status)))
}

// observeSpool registers the spool gauges, reading pending (the spool's
// events and bytes, ok false when it is not open).
func (in *instruments) observeSpool(pending func() (events int, bytes int64, ok bool)) (metric.Registration, error) {
	depth, err := in.meter.Int64ObservableGauge(MetricSpoolDepth, metric.WithUnit("{event}"),
		metric.WithDescription("Events in the spool, waiting to be published."))
	if err != nil {
		return nil, err
	}
	size, err := in.meter.Int64ObservableGauge(MetricSpoolBytes, metric.WithUnit("By"),
		metric.WithDescription("Bytes of the events in the spool."))
	if err != nil {
		return nil, err
	}
	return in.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		n, b, ok := pending()
		if !ok {
			return nil
		}
		o.ObserveInt64(depth, int64(n))
		o.ObserveInt64(size, b)
		return nil
	}, depth, size)
}
