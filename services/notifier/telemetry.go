package notifier

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// ScopeName is the instrumentation scope of the notifier's metrics.
const ScopeName = "github.com/runtimetruth/runtimetruth/services/notifier"

// Metric names (OpenTelemetry; the Prometheus exposition replaces dots
// with underscores and adds _total to counters).
const (
	// MetricAlerts counts alerts by state: fired, or resolved (firing
	// now is fired minus resolved).
	MetricAlerts = "runtimetruth.notifier.alerts"
	// MetricSent counts alerts Alertmanager took (firing ones are sent
	// again every resend interval).
	MetricSent = "runtimetruth.notifier.sent"
	// MetricFailed counts requests to Alertmanager that failed; MetricRetried
	// the sends after a failure (every resend interval until one is
	// taken).
	MetricFailed  = "runtimetruth.notifier.send_failures"
	MetricRetried = "runtimetruth.notifier.retries"
	// MetricUndecodable counts events that did not decode (acknowledged,
	// changing no alert).
	MetricUndecodable = "runtimetruth.notifier.undecodable"
	// MetricWebhookSent counts alert changes a webhook receiver took;
	// MetricWebhookFailed its failed requests; MetricWebhookDropped the
	// changes not queued because the receiver held its share
	// (MaxOutbox).
	MetricWebhookSent    = "runtimetruth.notifier.webhook.sent"
	MetricWebhookFailed  = "runtimetruth.notifier.webhook.failures"
	MetricWebhookDropped = "runtimetruth.notifier.webhook.dropped"
)

// AttrState is MetricAlerts' attribute: fired or resolved.
const AttrState = attribute.Key("state")

// instruments are the notifier's counters.
type instruments struct {
	alerts, sent, failed, retried, undecodable metric.Int64Counter
	webhookSent, webhookFailed, webhookDropped metric.Int64Counter
	fired, resolved                            metric.MeasurementOption
}

func newInstruments(p telemetry.Providers) *instruments {
	in := &instruments{
		fired:    metric.WithAttributeSet(attribute.NewSet(AttrState.String("fired"))),
		resolved: metric.WithAttributeSet(attribute.NewSet(AttrState.String("resolved"))),
	}
	telemetry.NewCounters(p.Meter(ScopeName),
		telemetry.Counter{Dst: &in.alerts, Name: MetricAlerts, Unit: "{alert}", Description: "Alerts fired and resolved, by state."},
		telemetry.Counter{Dst: &in.sent, Name: MetricSent, Unit: "{alert}", Description: "Alerts Alertmanager took."},
		telemetry.Counter{Dst: &in.failed, Name: MetricFailed, Unit: "{request}", Description: "Requests to Alertmanager that failed."},
		telemetry.Counter{Dst: &in.retried, Name: MetricRetried, Unit: "{request}", Description: "Requests to Alertmanager after one failed."},
		telemetry.Counter{Dst: &in.undecodable, Name: MetricUndecodable, Unit: "{message}",
			Description: "Events that did not decode: acknowledged, no alert changed."},
		telemetry.Counter{Dst: &in.webhookSent, Name: MetricWebhookSent, Unit: "{alert}", Description: "Alert changes a webhook receiver took."},
		telemetry.Counter{Dst: &in.webhookFailed, Name: MetricWebhookFailed, Unit: "{request}", Description: "Webhook requests that failed."},
		telemetry.Counter{Dst: &in.webhookDropped, Name: MetricWebhookDropped, Unit: "{alert}",
			Description: "Alert changes not queued: the receiver held its share."},
	)
	return in
}
