package telemetrytest

import (
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// Recorders keeps the Recorder of each component a test package made with
// Make, so that a test reads a component's metrics from the component
// alone. The zero value is ready to use, and safe for concurrent use.
type Recorders[K comparable] struct {
	m sync.Map // K → *Recorder
}

// Make calls newComponent with the providers of a new Recorder (shut down
// when t ends) and, when it succeeds, keeps that Recorder as the
// component's.
func (r *Recorders[K]) Make(t testing.TB, newComponent func(telemetry.Providers) (K, error)) (K, error) {
	t.Helper()
	rec := New(t)
	k, err := newComponent(rec.Providers)
	if err == nil {
		r.m.Store(k, rec)
	}
	return k, err
}

// Sum is Recorder.Sum on k's Recorder: the value of its int64 counter
// name over the data points whose attributes include attrs. The test fails
// when k was not made by Make.
func (r *Recorders[K]) Sum(t testing.TB, k K, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	rec, ok := r.m.Load(k)
	if !ok {
		t.Fatalf("%T was not made by Recorders.Make", k)
	}
	return rec.(*Recorder).Sum(t, name, attrs...)
}
