package auditor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// ScopeName is the instrumentation scope of the auditor's spans and
// metrics.
const ScopeName = "github.com/runtimetruth/runtimetruth/services/auditor"

// Metric names (OpenTelemetry; the Prometheus exposition replaces dots with
// underscores and adds _total to counters).
const (
	// MetricChainHead is the sequence number of each chain's committed
	// head link (in every required sink), by chain and stream.
	MetricChainHead = "runtimetruth.audit.chain.head"
	// MetricLag is, per audited stream, how many messages the stream holds
	// past the last one in the chains: the stream's last sequence minus the
	// highest stream sequence committed. Every chain of the stream is at
	// most that far behind (a stream's chains have one writer, in stream
	// order). Read from the server at collection time; not reported when
	// the server cannot be asked.
	MetricLag = "runtimetruth.audit.lag"
	// MetricAppended counts links committed, by stream.
	MetricAppended = "runtimetruth.audit.links.appended"
	// MetricDuplicateIDs counts messages acknowledged without a link
	// because their CloudEvent id is in their chain already (the same
	// event published again, or redelivered as a new stream message after
	// JetStream forgot its Nats-Msg-Id), by stream.
	MetricDuplicateIDs = "runtimetruth.audit.duplicate_ids"
	// MetricInflight is the bytes of the messages the auditor holds:
	// pulled or read back from the streams, not yet acknowledged (at most
	// about Config.MaxInflightBytes).
	MetricInflight = "runtimetruth.audit.inflight"
)

// Metric attribute keys.
const (
	AttrChain  = attribute.Key("chain")
	AttrStream = attribute.Key("stream")
)

// lagTimeout bounds the stream info requests of one collection of
// MetricLag.
const lagTimeout = 2 * time.Second

// instruments are the auditor's tracer and metrics.
type instruments struct {
	p          telemetry.Providers
	tracer     trace.Tracer
	appended   metric.Int64Counter
	duplicates metric.Int64Counter
	meter      metric.Meter
}

func newInstruments(p telemetry.Providers) *instruments {
	m := p.Meter(ScopeName)
	in := &instruments{p: p, tracer: p.Tracer(ScopeName), meter: m}
	// An instrument that cannot be created is a no-op one; the SDK reports
	// why through otel.Handle.
	in.appended, _ = m.Int64Counter(MetricAppended, metric.WithUnit("{link}"),
		metric.WithDescription("Links committed to every required audit sink."))
	in.duplicates, _ = m.Int64Counter(MetricDuplicateIDs, metric.WithUnit("{message}"),
		metric.WithDescription("Messages acknowledged without a link: their event id is in their audit chain already."))
	return in
}

// observe registers the chain head and lag gauges over w's committed heads
// and js's streams, and the gauge of the bytes held of b.
func (in *instruments) observe(w *Writer, pos map[string]*atomic.Uint64, b *budget, js jetstream.JetStream, streams []string) (metric.Registration, error) {
	head, err := in.meter.Int64ObservableGauge(MetricChainHead, metric.WithUnit("{link}"),
		metric.WithDescription("Sequence number of each audit chain's committed head link."))
	if err != nil {
		return nil, err
	}
	lag, err := in.meter.Int64ObservableGauge(MetricLag, metric.WithUnit("{message}"),
		metric.WithDescription("Messages a stream holds past the last one in its audit chains."))
	if err != nil {
		return nil, err
	}
	inflight, err := in.meter.Int64ObservableGauge(MetricInflight, metric.WithUnit("By"),
		metric.WithDescription("Bytes of the messages the auditor holds, pulled and not yet acknowledged."))
	if err != nil {
		return nil, err
	}
	return in.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		o.ObserveInt64(inflight, b.held())
		for c, h := range w.Heads() {
			o.ObserveInt64(head, int64(h.Seq), metric.WithAttributes(AttrChain.String(c), AttrStream.String(h.Stream)))
		}
		ctx, cancel := context.WithTimeout(ctx, lagTimeout)
		defer cancel()
		for _, s := range streams {
			info, err := streamInfo(ctx, js, s)
			if err != nil {
				continue
			}
			last, applied := info.State.LastSeq, position(w, pos, s)
			n := int64(0)
			if last > applied {
				n = int64(last - applied)
			}
			o.ObserveInt64(lag, n, metric.WithAttributes(AttrStream.String(s)))
		}
		return nil
	}, head, lag, inflight)
}

func streamInfo(ctx context.Context, js jetstream.JetStream, name string) (*jetstream.StreamInfo, error) {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, err
	}
	return st.CachedInfo(), nil
}

// commitSpan starts the span of committing a batch of a stream: linked to
// the spans of the messages it appends (each message's own span, from
// natsbus.ConsumeTelemetry, is a child of its producer's).
func (in *instruments) commitSpan(ctx context.Context, stream string, links []trace.Link) (context.Context, trace.Span) {
	return in.tracer.Start(ctx, "append "+stream, trace.WithSpanKind(trace.SpanKindInternal), trace.WithLinks(links...))
}

// linksOf returns links to the spans of handling a batch's messages, or nil
// when spans are not recorded.
func linksOf(spans []context.Context) []trace.Link {
	if len(spans) == 0 || !trace.SpanFromContext(spans[0]).IsRecording() {
		return nil
	}
	out := make([]trace.Link, 0, len(spans))
	for _, ctx := range spans {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			out = append(out, trace.Link{SpanContext: sc})
		}
	}
	return out
}
