package collector

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// ScopeName is the instrumentation scope of the collector's spans and
// metrics.
const ScopeName = "github.com/runtimetruth/runtimetruth/services/collector"

// Metric names (OpenTelemetry; the Prometheus exposition replaces dots with
// underscores and adds the unit: _seconds, _bytes).
const (
	// MetricCollectionDuration is the time one collection took, from the
	// start of the source's work to its events in the spool, by kind (the
	// target's source kind: git, process, systemd, codex, python, node) and
	// status (collected, failed, refused, error: Result.Status).
	MetricCollectionDuration = "runtimetruth.collection.duration"
	// MetricSpoolDepth is the number of events in the spool, waiting to be
	// published (an observable gauge, read at collection time).
	MetricSpoolDepth = "runtimetruth.collector.spool.depth"
	// MetricSpoolBytes is the size of the events in the spool.
	MetricSpoolBytes = "runtimetruth.collector.spool.size"
)

// Metric attribute keys.
const (
	AttrKind   = attribute.Key("kind")
	AttrStatus = attribute.Key("status")
)

// instruments are the collector's tracer and metrics.
type instruments struct {
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	duration metric.Float64Histogram
	meter    metric.Meter
}

func newInstruments(p telemetry.Providers) *instruments {
	m := p.Meter(ScopeName)
	in := &instruments{tracer: p.Tracer(ScopeName), prop: p.TextMapPropagator(), meter: m}
	// An instrument that cannot be created is a no-op one; the SDK reports
	// why through otel.Handle.
	in.duration, _ = m.Float64Histogram(MetricCollectionDuration, metric.WithUnit("s"),
		metric.WithDescription("Time one collection took, from the source's work to its events in the spool."),
		metric.WithExplicitBucketBoundaries(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
	return in
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
