package telemetry_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
)

func TestNewCounters(t *testing.T) {
	rec := telemetrytest.New(t)
	var a, b metric.Int64Counter
	telemetry.NewCounters(rec.Providers.Meter("test"),
		telemetry.Counter{Dst: &a, Name: "test.a", Unit: "{a}", Description: "As."},
		telemetry.Counter{Dst: &b, Name: "test.b", Unit: "{b}", Description: "Bs."},
	)
	a.Add(context.Background(), 2)
	b.Add(context.Background(), 3)
	assert.Equal(t, int64(2), rec.Sum(t, "test.a"))
	assert.Equal(t, int64(3), rec.Sum(t, "test.b"))
	got := map[string][2]string{}
	for _, sm := range rec.Collect(t).ScopeMetrics {
		for _, m := range sm.Metrics {
			if _, ok := m.Data.(metricdata.Sum[int64]); ok {
				got[m.Name] = [2]string{m.Unit, m.Description}
			}
		}
	}
	assert.Equal(t, map[string][2]string{"test.a": {"{a}", "As."}, "test.b": {"{b}", "Bs."}}, got)
}
