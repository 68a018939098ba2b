package attestor

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/eventtrace"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// ScopeName is the instrumentation scope of the attestor's spans and
// metrics.
const ScopeName = "github.com/runtimetruth/runtimetruth/services/attestor"

// Metric names (OpenTelemetry; the Prometheus exposition replaces dots with
// underscores and adds _total to counters).
const (
	// MetricRequests counts sign requests received (those refused while
	// shutting down included).
	MetricRequests = "runtimetruth.attestor.requests"
	// MetricSignatures counts sign requests answered with an attestation
	// signed, stored and announced, by mode (key, keyless or custom).
	MetricSignatures = "runtimetruth.attestor.signatures"
	// MetricSignFailures counts sign requests answered with an error, by
	// mode and reason: request (not a valid request), baseline (no such
	// baseline, or not the one reviewed), announce (signed and stored, but
	// the event was not published), sign (signing or storing failed).
	MetricSignFailures = "runtimetruth.attestor.signature_failures"
)

// Metric attribute keys.
const (
	AttrMode   = attribute.Key("mode")
	AttrReason = attribute.Key("reason")
)

// Failure reasons of MetricSignFailures.
const (
	FailRequest  = "request"
	FailBaseline = "baseline"
	FailAnnounce = "announce"
	FailSign     = "sign"
)

// errInvalidRequest marks a request that does not decode.
var errInvalidRequest = errors.New("invalid sign request")

// instruments are the attestor's tracer and metrics.
type instruments struct {
	p       telemetry.Providers
	tracer  trace.Tracer
	prop    propagation.TextMapPropagator
	reqs    metric.Int64Counter
	signed  metric.Int64Counter
	failed  metric.Int64Counter
	mode    string
	okOpt   metric.MeasurementOption
	failOpt map[string]metric.MeasurementOption
}

func newInstruments(p telemetry.Providers, mode string) *instruments {
	m := p.Meter(ScopeName)
	in := &instruments{p: p, tracer: p.Tracer(ScopeName), prop: p.TextMapPropagator(), mode: mode,
		okOpt: metric.WithAttributeSet(attribute.NewSet(AttrMode.String(mode))), failOpt: map[string]metric.MeasurementOption{}}
	for _, r := range []string{FailRequest, FailBaseline, FailAnnounce, FailSign} {
		in.failOpt[r] = metric.WithAttributeSet(attribute.NewSet(AttrMode.String(mode), AttrReason.String(r)))
	}
	telemetry.NewCounters(m,
		telemetry.Counter{Dst: &in.reqs, Name: MetricRequests, Unit: "{request}", Description: "Sign requests received."},
		telemetry.Counter{Dst: &in.signed, Name: MetricSignatures, Unit: "{signature}",
			Description: "Baselines signed, stored and announced."},
		telemetry.Counter{Dst: &in.failed, Name: MetricSignFailures, Unit: "{request}",
			Description: "Sign requests answered with an error, by reason."},
	)
	return in
}

// received counts a sign request.
func (in *instruments) received(ctx context.Context) { in.reqs.Add(ctx, 1, in.okOpt) }

// startRequest starts the span of a sign request (kind server), a child of
// the requester's span when the request carries trace headers.
func (in *instruments) startRequest(ctx context.Context, m *nats.Msg) (context.Context, trace.Span) {
	if m.Header != nil {
		if remote := trace.SpanContextFromContext(eventtrace.Extract(context.Background(), in.prop, m.Header)); remote.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
		}
	}
	return in.tracer.Start(ctx, "sign "+m.Subject, trace.WithSpanKind(trace.SpanKindServer))
}

// endRequest counts a request's outcome and ends its span.
func (in *instruments) endRequest(ctx context.Context, span trace.Span, target events.Target, err error) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("runtimetruth.target", target.String()), AttrMode.String(in.mode))
	}
	if err == nil {
		in.signed.Add(ctx, 1, in.okOpt)
		span.End()
		return
	}
	reason := FailSign
	switch {
	case errors.Is(err, errInvalidRequest):
		reason = FailRequest
	case errors.Is(err, ErrBaseline):
		reason = FailBaseline
	case errors.Is(err, ErrNotAnnounced):
		reason = FailAnnounce
	}
	in.failed.Add(ctx, 1, in.failOpt[reason])
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
	span.End()
}
