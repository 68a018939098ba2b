// Package telemetrytest is in-memory telemetry for tests: a Recorder keeps
// every span ended and reads the metrics on demand, so a test asserts on
// the same OpenTelemetry instruments a service exports. Recorders keeps
// one Recorder per component a test package makes, to read a component's
// counters by the component.
package telemetrytest

import (
	"context"
	"iter"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// Recorder is in-memory telemetry: Providers report to it.
type Recorder struct {
	Providers telemetry.Providers
	Spans     *tracetest.SpanRecorder
	Reader    *sdkmetric.ManualReader
}

// New returns a Recorder whose providers are shut down when t ends.
func New(t testing.TB) *Recorder {
	t.Helper()
	r := &Recorder{Spans: tracetest.NewSpanRecorder(), Reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.Spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.Reader))
	t.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	r.Providers = telemetry.Providers{TracerProvider: tp, MeterProvider: mp, Propagator: telemetry.Propagator()}
	return r
}

// Collect reads the metrics now.
func (r *Recorder) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect metrics: %v", err)
	}
	return rm
}

// Sum is the value of the int64 counter name: the sum of its data points
// whose attributes include attrs (all of them, with no attrs).
func (r *Recorder) Sum(t testing.TB, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	return Sum(r.Collect(t), name, attrs...)
}

// Sum is the sum of rm's int64 counter name over the data points whose
// attributes include attrs.
func Sum(rm metricdata.ResourceMetrics, name string, attrs ...attribute.KeyValue) int64 {
	var n int64
	for s := range named[metricdata.Sum[int64]](rm, name) {
		for _, dp := range s.DataPoints {
			if includes(dp.Attributes, attrs) {
				n += dp.Value
			}
		}
	}
	return n
}

// Count is the number of measurements of the float64 histogram name
// over its data points whose attributes include attrs.
func (r *Recorder) Count(t testing.TB, name string, attrs ...attribute.KeyValue) uint64 {
	t.Helper()
	return Count(r.Collect(t), name, attrs...)
}

// Count is the number of measurements of rm's float64 histogram name over
// the data points whose attributes include attrs.
func Count(rm metricdata.ResourceMetrics, name string, attrs ...attribute.KeyValue) uint64 {
	var n uint64
	for h := range named[metricdata.Histogram[float64]](rm, name) {
		for _, dp := range h.DataPoints {
			if includes(dp.Attributes, attrs) {
				n += dp.Count
			}
		}
	}
	return n
}

// Gauge is the value of the int64 gauge name at its first data point
// whose attributes include attrs; ok is false when it has none (nothing
// observed, or its callback unregistered).
func (r *Recorder) Gauge(t testing.TB, name string, attrs ...attribute.KeyValue) (v int64, ok bool) {
	t.Helper()
	return Gauge[int64](r.Collect(t), name, attrs...)
}

// Gauge is the value of rm's gauge name, of values N, at its first data
// point whose attributes include attrs; ok is false when it has none.
func Gauge[N int64 | float64](rm metricdata.ResourceMetrics, name string, attrs ...attribute.KeyValue) (v N, ok bool) {
	for g := range named[metricdata.Gauge[N]](rm, name) {
		for _, dp := range g.DataPoints {
			if includes(dp.Attributes, attrs) {
				return dp.Value, true
			}
		}
	}
	return 0, false
}

// Point is the value of the data point of rm's metric name whose
// attributes are exactly attrs — an int64 counter's or gauge's value, or a
// float64 histogram's count of measurements — and whether there is one.
// Sum, Count and Gauge add up or pick among points whose attributes
// include attrs; Point checks one exact series.
func Point(rm metricdata.ResourceMetrics, name string, attrs ...attribute.KeyValue) (int64, bool) {
	want := attribute.NewSet(attrs...)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					if dp.Attributes.Equals(&want) {
						return dp.Value, true
					}
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					if dp.Attributes.Equals(&want) {
						return dp.Value, true
					}
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					if dp.Attributes.Equals(&want) {
						return int64(dp.Count), true
					}
				}
			}
		}
	}
	return 0, false
}

// named yields the data of rm's metrics called name that are an A.
func named[A metricdata.Aggregation](rm metricdata.ResourceMetrics, name string) iter.Seq[A] {
	return func(yield func(A) bool) {
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if a, ok := m.Data.(A); ok && m.Name == name && !yield(a) {
					return
				}
			}
		}
	}
}

func includes(set attribute.Set, attrs []attribute.KeyValue) bool {
	for _, kv := range attrs {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}
