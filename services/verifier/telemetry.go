package verifier

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// ScopeName is the instrumentation scope of the verifier's metrics.
const ScopeName = "github.com/runtimetruth/runtimetruth/services/verifier"

// Metric names (OpenTelemetry; the Prometheus exposition replaces dots with
// underscores and adds _total to counters).
const (
	// MetricVerdicts counts verdicts published (a redelivered snapshot's
	// verdict, dropped as a duplicate, is not counted again), by status:
	// pass, drift or error.
	MetricVerdicts = "runtimetruth.verdicts"
	// MetricDrift counts drift verdicts by target_kind and target (see
	// MaxDriftTargets).
	MetricDrift = "runtimetruth.verifier.drift"
	// MetricRejected counts evidence refused as not authentic, by reason
	// (Config.Enrollment).
	MetricRejected = "runtimetruth.verifier.evidence.rejected"
	// MetricDuplicates counts redelivered snapshots whose verdict was
	// already published (none is published again).
	MetricDuplicates = "runtimetruth.verifier.duplicates"
	// MetricStale counts latest-verdict writes skipped because the bucket
	// held a newer snapshot's verdict for the host and target: the verdict
	// is published, the latest snapshot and verdict are kept (older
	// snapshots of the same batch are not counted).
	MetricStale = "runtimetruth.verifier.stale"
)

// Metric attribute keys.
const (
	AttrStatus     = attribute.Key("status")
	AttrTargetKind = attribute.Key("target_kind")
	AttrTarget     = attribute.Key("target")
	AttrReason     = attribute.Key("reason")
)

// MaxDriftTargets bounds the target label of MetricDrift: the first
// MaxDriftTargets targets that drift (per process) get their own series,
// labelled with the target as KIND:IDENTIFIER; later ones are counted under
// target="other" (target_kind stays exact; it is bounded by the catalog of
// collector kinds). The drift of every target, without bound, is in the
// verdict events and the audit tables.
const MaxDriftTargets = 200

// OtherTarget is the target label of drift beyond MaxDriftTargets.
const OtherTarget = "other"

// metrics are the verifier's own instruments.
type metrics struct {
	verdicts metric.Int64Counter
	drift    metric.Int64Counter
	rejected metric.Int64Counter
	dups     metric.Int64Counter
	stale    metric.Int64Counter
	byStatus map[events.Status]metric.MeasurementOption

	mu      sync.Mutex
	targets map[events.Target]metric.MeasurementOption
}

func newMetrics(p telemetry.Providers) *metrics {
	m := p.Meter(ScopeName)
	t := &metrics{byStatus: map[events.Status]metric.MeasurementOption{}, targets: map[events.Target]metric.MeasurementOption{}}
	telemetry.NewCounters(m,
		telemetry.Counter{Dst: &t.verdicts, Name: MetricVerdicts, Unit: "{verdict}", Description: "Verdicts published, by status."},
		telemetry.Counter{Dst: &t.drift, Name: MetricDrift, Unit: "{verdict}",
			Description: "Drift verdicts, by target kind and target (the first 200 targets; the rest as target=\"other\")."},
		telemetry.Counter{Dst: &t.rejected, Name: MetricRejected, Unit: "{event}",
			Description: "Evidence refused as not authentic (it changes no verdict), by reason."},
		telemetry.Counter{Dst: &t.dups, Name: MetricDuplicates, Unit: "{event}",
			Description: "Redelivered snapshots whose verdict was already published."},
		telemetry.Counter{Dst: &t.stale, Name: MetricStale, Unit: "{write}",
			Description: "Latest-verdict writes skipped: the bucket held a newer snapshot's verdict."},
	)
	for _, s := range []events.Status{events.StatusPass, events.StatusDrift, events.StatusError} {
		t.byStatus[s] = metric.WithAttributeSet(attribute.NewSet(AttrStatus.String(string(s))))
	}
	return t
}

// reject counts evidence refused for reason.
func (t *metrics) reject(ctx context.Context, reason string) {
	t.rejected.Add(ctx, 1, metric.WithAttributes(AttrReason.String(reason)))
}

// duplicate counts a redelivered snapshot already verified.
func (t *metrics) duplicate(ctx context.Context) { t.dups.Add(ctx, 1) }

// staleWrite counts a latest-verdict write skipped for a newer one.
func (t *metrics) staleWrite(ctx context.Context) { t.stale.Add(ctx, 1) }

// verdict counts a published verdict of status about target.
func (t *metrics) verdict(ctx context.Context, status events.Status, target events.Target) {
	opt, ok := t.byStatus[status]
	if !ok {
		opt = t.byStatus[events.StatusError]
	}
	t.verdicts.Add(ctx, 1, opt)
	if status == events.StatusDrift {
		t.drift.Add(ctx, 1, t.driftOpt(target))
	}
}

func (t *metrics) driftOpt(target events.Target) metric.MeasurementOption {
	t.mu.Lock()
	defer t.mu.Unlock()
	if opt, ok := t.targets[target]; ok {
		return opt
	}
	label := target.String()
	key := target
	if len(t.targets) >= MaxDriftTargets {
		label, key = OtherTarget, events.Target{Kind: target.Kind, Identifier: "\x00" + OtherTarget}
		if opt, ok := t.targets[key]; ok {
			return opt
		}
	}
	opt := metric.WithAttributeSet(attribute.NewSet(AttrTargetKind.String(target.Kind), AttrTarget.String(label)))
	t.targets[key] = opt
	return opt
}
