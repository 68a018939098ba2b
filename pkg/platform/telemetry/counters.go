package telemetry

import "go.opentelemetry.io/otel/metric"

// Counter describes one of the counters NewCounters makes.
type Counter struct {
	// Dst receives the counter.
	Dst *metric.Int64Counter
	// Name, Unit and Description are the instrument's ("{message}" is a
	// unit of messages).
	Name, Unit, Description string
}

// NewCounters makes each of counters on m and stores it in its Dst. A
// counter that cannot be made is a no-op one: the SDK reports why through
// otel.Handle, and the service runs on without that metric.
func NewCounters(m metric.Meter, counters ...Counter) {
	for _, c := range counters {
		*c.Dst, _ = m.Int64Counter(c.Name, metric.WithUnit(c.Unit), metric.WithDescription(c.Description))
	}
}
