package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// MetricDutyFailures counts the runs of a periodic duty that failed, by
// duty (OpenTelemetry; runtimetruth_duty_failures_total in Prometheus).
const MetricDutyFailures = "runtimetruth.duty.failures"

// AttrDuty is the duty attribute of MetricDutyFailures.
const AttrDuty = attribute.Key("duty")

// Duties are the periodic duties of a service that nothing else would
// notice stopping: a sweep that turns silence into a verdict, a watch
// that keeps a view, a checkpoint. Each reports the outcome of every run
// (Report); while the last run of one failed, Ready fails naming it and
// why, so /readyz answers 503 (a Duties is a health.Checker), and every
// failed run is counted. A duty that has not run yet is ready.
type Duties struct {
	failures metric.Int64Counter

	mu     sync.Mutex
	failed map[string]error // duty → the error of its last run, when it failed
}

// NewDuties returns the duties of a service, counting failures on m.
func NewDuties(m metric.Meter) *Duties {
	d := &Duties{failed: map[string]error{}}
	d.failures, _ = m.Int64Counter(MetricDutyFailures, metric.WithUnit("{run}"),
		metric.WithDescription("Runs of a periodic duty that failed, by duty; /readyz fails while its last run did."))
	return d
}

// Report records the outcome of one run of duty: nil when it did its
// work, else why not.
func (d *Duties) Report(ctx context.Context, duty string, err error) {
	if err != nil {
		d.failures.Add(ctx, 1, metric.WithAttributes(AttrDuty.String(duty)))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		delete(d.failed, duty)
		return
	}
	d.failed[duty] = err
}

// Ready implements Checker: nil unless the last run of a duty failed;
// then an error naming each such duty and its error.
func (d *Duties) Ready(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	names := make([]string, 0, len(d.failed))
	for name := range d.failed {
		names = append(names, name)
	}
	slices.Sort(names)
	errs := make([]error, len(names))
	for i, name := range names {
		errs[i] = fmt.Errorf("%s failing: %w", name, d.failed[name])
	}
	return errors.Join(errs...)
}
