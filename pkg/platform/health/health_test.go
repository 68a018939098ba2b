package health_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func code(h http.Handler, path string) int {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code
}

func TestReadinessFollowsTheGate(t *testing.T) {
	ctx := context.Background()
	s := health.New(health.Config{}, nil, nil)
	h := s.Handler()
	gate := s.Gate()
	assert.Equal(t, http.StatusOK, code(h, "/healthz"))
	assert.Equal(t, http.StatusServiceUnavailable, code(h, "/readyz"), "not ready before start")
	assert.Equal(t, http.StatusNotFound, code(h, "/metrics"), "no metrics handler given")

	require.NoError(t, gate.Start(ctx))
	assert.Equal(t, http.StatusOK, code(h, "/readyz"))
	failing := errors.New("nats: disconnected")
	s.AddCheck("bus", func(context.Context) error { return failing })
	assert.Equal(t, http.StatusServiceUnavailable, code(h, "/readyz"))
	assert.ErrorContains(t, s.Ready(ctx), "bus: nats: disconnected")
	failing = nil
	assert.Equal(t, http.StatusOK, code(h, "/readyz"))

	require.NoError(t, gate.Shutdown(ctx))
	assert.Equal(t, http.StatusServiceUnavailable, code(h, "/readyz"), "not ready once stopping")
	assert.ErrorContains(t, s.Ready(ctx), "shutting down")
	assert.Equal(t, http.StatusOK, code(h, "/healthz"))
	require.NoError(t, s.Shutdown(ctx), "safe without Start")
	require.NoError(t, s.Shutdown(ctx), "and twice")
	assert.Empty(t, s.Addr(), "off without http.listen")
}

func TestServeAndStop(t *testing.T) {
	ctx := context.Background()
	s := health.New(health.Config{Listen: "127.0.0.1:0", ShutdownDelay: 50 * time.Millisecond}, nil,
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("m 1\n")) }))
	require.NoError(t, s.Start(ctx))
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	gate := s.Gate()
	require.NoError(t, gate.Start(ctx))
	began := time.Now()
	require.NoError(t, gate.Shutdown(ctx))
	assert.GreaterOrEqual(t, time.Since(began), 50*time.Millisecond, "the shutdown delay")
	require.NoError(t, s.Shutdown(ctx))
	resp, err = http.Get("http://" + s.Addr() + "/healthz")
	if err == nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err)
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, health.NewDefaultConfig().Validate())
	require.NoError(t, health.Config{Listen: ":9090"}.Validate())
	require.ErrorIs(t, health.Config{Listen: "9090"}.Validate(), config.ErrInvalid)
	require.ErrorIs(t, health.Config{ShutdownDelay: -time.Second}.Validate(), config.ErrInvalid)
}

// TestDuties: a periodic duty whose last run failed fails readiness,
// naming it, until a run succeeds; every failed run is counted.
func TestDuties(t *testing.T) {
	ctx := context.Background()
	rec := telemetrytest.New(t)
	d := health.NewDuties(rec.Providers.Meter("test"))
	s := health.New(health.Config{}, nil, nil)
	s.AddCheck("verifier", d.Ready)
	require.NoError(t, s.Gate().Start(ctx))
	h := s.Handler()

	assert.Equal(t, http.StatusOK, code(h, "/readyz"), "a duty that has not run yet is ready")
	d.Report(ctx, "silence sweep", errors.New("permissions violation"))
	d.Report(ctx, "registry watch", nil)
	assert.Equal(t, http.StatusServiceUnavailable, code(h, "/readyz"))
	assert.ErrorContains(t, s.Ready(ctx), "silence sweep failing: permissions violation")
	d.Report(ctx, "registry watch", errors.New("the watch ended"))
	err := s.Ready(ctx)
	assert.ErrorContains(t, err, "registry watch failing: the watch ended")
	assert.ErrorContains(t, err, "silence sweep failing")

	d.Report(ctx, "silence sweep", nil)
	d.Report(ctx, "registry watch", nil)
	assert.Equal(t, http.StatusOK, code(h, "/readyz"), "ready again once each duty ran")
	assert.Equal(t, int64(1), rec.Sum(t, health.MetricDutyFailures, health.AttrDuty.String("silence sweep")))
	assert.Equal(t, int64(2), rec.Sum(t, health.MetricDutyFailures))
}
