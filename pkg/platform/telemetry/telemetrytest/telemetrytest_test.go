package telemetrytest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
)

func TestSumCountGauge(t *testing.T) {
	r := telemetrytest.New(t)
	m := r.Providers.Meter("test")
	a, b := attribute.String("k", "a"), attribute.String("k", "b")
	ctx := context.Background()

	c, err := m.Int64Counter("c")
	require.NoError(t, err)
	c.Add(ctx, 2, metric.WithAttributes(a))
	c.Add(ctx, 3, metric.WithAttributes(b, attribute.Bool("x", true)))
	assert.Equal(t, int64(5), r.Sum(t, "c"))
	assert.Equal(t, int64(3), r.Sum(t, "c", b))
	assert.Zero(t, r.Sum(t, "c", attribute.String("k", "none")))

	h, err := m.Float64Histogram("h")
	require.NoError(t, err)
	h.Record(ctx, 0.5, metric.WithAttributes(a))
	h.Record(ctx, 7, metric.WithAttributes(a))
	h.Record(ctx, 1, metric.WithAttributes(b))
	assert.Equal(t, uint64(3), r.Count(t, "h"))
	assert.Equal(t, uint64(2), r.Count(t, "h", a))
	assert.Zero(t, r.Count(t, "c"), "a counter is no histogram")

	_, ok := r.Gauge(t, "g")
	assert.False(t, ok, "not observed")
	g, err := m.Int64ObservableGauge("g")
	require.NoError(t, err)
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, 4, metric.WithAttributes(a))
		o.ObserveInt64(g, 9, metric.WithAttributes(b))
		return nil
	}, g)
	require.NoError(t, err)
	v, ok := r.Gauge(t, "g", b)
	assert.True(t, ok)
	assert.Equal(t, int64(9), v)
	assert.NoError(t, reg.Unregister())
	_, ok = r.Gauge(t, "g")
	assert.False(t, ok, "unregistered")

	f, err := m.Float64Gauge("f")
	require.NoError(t, err)
	f.Record(ctx, 1.5)
	fv, ok := telemetrytest.Gauge[float64](r.Collect(t), "f")
	assert.True(t, ok)
	assert.InDelta(t, 1.5, fv, 0)
	_, ok = telemetrytest.Gauge[int64](r.Collect(t), "f")
	assert.False(t, ok, "of float64 values")
}

func TestPoint(t *testing.T) {
	r := telemetrytest.New(t)
	m := r.Providers.Meter("test")
	a, x := attribute.String("k", "a"), attribute.Bool("x", true)
	ctx := context.Background()

	c, err := m.Int64Counter("c")
	require.NoError(t, err)
	c.Add(ctx, 2, metric.WithAttributes(a))
	c.Add(ctx, 3, metric.WithAttributes(a, x))
	h, err := m.Float64Histogram("h")
	require.NoError(t, err)
	h.Record(ctx, 1, metric.WithAttributes(a))
	h.Record(ctx, 2, metric.WithAttributes(a))

	rm := r.Collect(t)
	v, ok := telemetrytest.Point(rm, "c", a)
	assert.True(t, ok)
	assert.Equal(t, int64(2), v, "exactly {k=a}, not the series with x too")
	v, ok = telemetrytest.Point(rm, "c", x, a)
	assert.True(t, ok)
	assert.Equal(t, int64(3), v)
	_, ok = telemetrytest.Point(rm, "c")
	assert.False(t, ok, "no series without attributes")
	v, ok = telemetrytest.Point(rm, "h", a)
	assert.True(t, ok)
	assert.Equal(t, int64(2), v, "a histogram's count")
}
