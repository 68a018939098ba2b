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
	// MetricReceived counts messages taken from the streams
	// (redeliveries included).
	MetricReceived = "runtimetruth.audit.messages.received"
	// MetricUnlinked counts messages acknowledged without a link, by
	// reason: ReasonDuplicate (the stream message is in its chain
	// already: a redelivery), ReasonOtherPartition (its chain is another
	// partition's, Config.Partitions), ReasonOverAllowance (its host is
	// over its allowance, AllowanceConfig: a notice stands for it) or
	// ReasonDrained (a message of the
	// unpartitioned consumer that partition 0 drains: counted when its
	// drain hands it back to be acknowledged, before the server confirms;
	// natsbus's MetricAcked, by that consumer, counts the confirmed
	// acknowledgements). Messages whose event id is linked already are
	// MetricDuplicateIDs.
	MetricUnlinked = "runtimetruth.audit.messages.unlinked"
	// MetricRecovered counts messages read back from a stream because
	// the consumer delivered them and they were never recorded: taken by a
	// previous run (at start), lost on the way before a later message, or
	// delivered to a pull nats.go had given up (after an empty pull).
	MetricRecovered = "runtimetruth.audit.messages.recovered"
	// MetricRejections counts rejection records linked (messages that are
	// not valid events, recorded as such).
	MetricRejections = "runtimetruth.audit.rejections"
	// MetricBatches counts batches committed to every required sink.
	MetricBatches = "runtimetruth.audit.batches"
	// MetricCommitRetries counts commits tried again after a required
	// sink failed.
	MetricCommitRetries = "runtimetruth.audit.commit.retries"
	// MetricSinkErrors counts failed sink writes, by sink.
	MetricSinkErrors = "runtimetruth.audit.sink.errors"
	// MetricSinkSkipped counts links an optional sink missed, by sink.
	MetricSinkSkipped = "runtimetruth.audit.sink.skipped"
	// MetricSinkCaughtUp counts links copied at start into a sink that
	// lagged behind the others.
	MetricSinkCaughtUp = "runtimetruth.audit.sink.caught_up"
	// MetricSinkWaits counts failed attempts to bring the sinks up (the
	// ClickHouse sink unreachable): the auditor waits for them.
	MetricSinkWaits = "runtimetruth.audit.sink.waits"
	// MetricCheckpoints counts checkpoints sent.
	MetricCheckpoints = "runtimetruth.audit.checkpoints"
	// MetricFetchErrors counts failed pulls; MetricAckErrors failed
	// acknowledgements.
	MetricFetchErrors = "runtimetruth.audit.fetch.errors"
	MetricAckErrors   = "runtimetruth.audit.ack.errors"
	// MetricLeaseLost counts writer leases lost: the auditor stopped
	// writing (restart it to wait as a standby).
	MetricLeaseLost = "runtimetruth.audit.lease.lost"
)

// The reasons of MetricUnlinked.
const (
	ReasonDuplicate      = "duplicate"
	ReasonOtherPartition = "other_partition"
	ReasonDrained        = "drained"
	ReasonOverAllowance  = "over_allowance"
)

// Metric attribute keys.
const (
	AttrChain  = attribute.Key("chain")
	AttrStream = attribute.Key("stream")
	AttrReason = attribute.Key("reason")
	AttrSink   = attribute.Key("sink")
)

// lagTimeout bounds the stream info requests of one collection of
// MetricLag.
const lagTimeout = 2 * time.Second

// instruments are the auditor's tracer and metrics: its counters are these
// instruments and nothing else.
type instruments struct {
	p          telemetry.Providers
	tracer     trace.Tracer
	appended   metric.Int64Counter
	duplicates metric.Int64Counter
	meter      metric.Meter

	received, unlinked, recovered, rejections, batches, retries metric.Int64Counter
	sinkErrors, sinkSkipped, caughtUp, sinkWaits, checkpoints   metric.Int64Counter
	fetchErrors, ackErrors, leaseLost                           metric.Int64Counter
	duplicate, otherPartition, drained, overAllowance           metric.MeasurementOption
}

// count adds n to c (without a context of its own: counters need none).
func count(c metric.Int64Counter, n int, opts ...metric.AddOption) {
	c.Add(context.Background(), int64(n), opts...)
}

func sinkAttr(name string) metric.AddOption {
	return metric.WithAttributes(AttrSink.String(name))
}

func newInstruments(p telemetry.Providers) *instruments {
	m := p.Meter(ScopeName)
	in := &instruments{p: p, tracer: p.Tracer(ScopeName), meter: m}
	telemetry.NewCounters(m, []telemetry.Counter{
		{Dst: &in.appended, Name: MetricAppended, Unit: "{link}", Description: "Links committed to every required audit sink."},
		{Dst: &in.duplicates, Name: MetricDuplicateIDs, Unit: "{message}", Description: "Messages acknowledged without a link: their event id is in their audit chain already."},
		{Dst: &in.received, Name: MetricReceived, Unit: "{message}", Description: "Messages taken from the audited streams, redeliveries included."},
		{Dst: &in.unlinked, Name: MetricUnlinked, Unit: "{message}", Description: "Messages acknowledged without a link, by reason."},
		{Dst: &in.recovered, Name: MetricRecovered, Unit: "{message}", Description: "Messages read back from a stream that the consumer delivered and were never recorded."},
		{Dst: &in.rejections, Name: MetricRejections, Unit: "{link}", Description: "Rejection records linked: messages that are not valid events."},
		{Dst: &in.batches, Name: MetricBatches, Unit: "{batch}", Description: "Batches committed to every required audit sink."},
		{Dst: &in.retries, Name: MetricCommitRetries, Unit: "{commit}", Description: "Commits tried again after a required audit sink failed."},
		{Dst: &in.sinkErrors, Name: MetricSinkErrors, Unit: "{write}", Description: "Failed audit sink writes, by sink."},
		{Dst: &in.sinkSkipped, Name: MetricSinkSkipped, Unit: "{link}", Description: "Links an optional audit sink missed, by sink."},
		{Dst: &in.caughtUp, Name: MetricSinkCaughtUp, Unit: "{link}", Description: "Links copied at start into an audit sink that lagged."},
		{Dst: &in.sinkWaits, Name: MetricSinkWaits, Unit: "{attempt}", Description: "Failed attempts to bring the audit sinks up."},
		{Dst: &in.checkpoints, Name: MetricCheckpoints, Unit: "{checkpoint}", Description: "Audit checkpoints sent."},
		{Dst: &in.fetchErrors, Name: MetricFetchErrors, Unit: "{pull}", Description: "Failed pulls from the audited streams."},
		{Dst: &in.ackErrors, Name: MetricAckErrors, Unit: "{ack}", Description: "Failed acknowledgements of audited messages."},
		{Dst: &in.leaseLost, Name: MetricLeaseLost, Unit: "{lease}", Description: "Writer leases lost: the auditor stopped writing."},
	}...)
	in.duplicate = metric.WithAttributes(AttrReason.String(ReasonDuplicate))
	in.otherPartition = metric.WithAttributes(AttrReason.String(ReasonOtherPartition))
	in.drained = metric.WithAttributes(AttrReason.String(ReasonDrained))
	in.overAllowance = metric.WithAttributes(AttrReason.String(ReasonOverAllowance))
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
