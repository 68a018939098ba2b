package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMetricsAlwaysOnTracesOffByDefault(t *testing.T) {
	ctx := context.Background()
	tel, err := telemetry.Setup(ctx, telemetry.Info{Service: "runtimetruth-test", Version: "v0"}, telemetry.NewDefaultConfig())
	require.NoError(t, err)
	defer func() { require.NoError(t, tel.Shutdown(ctx)) }()
	assert.False(t, tel.Exporting)

	c, err := tel.MeterProvider.Meter("t").Int64Counter("runtimetruth.test.events")
	require.NoError(t, err)
	c.Add(ctx, 2)
	_, span := tel.TracerProvider.Tracer("t").Start(ctx, "work")
	assert.True(t, span.SpanContext().IsValid(), "spans exist (and propagate) without export")
	assert.True(t, span.SpanContext().IsSampled())
	span.End()

	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), "runtimetruth_test_events_total")
	assert.Contains(t, rec.Body.String(), `service_version="v0"`)
}

func TestOTLPExport(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ctx := context.Background()
	cfg := telemetry.NewDefaultConfig()
	cfg.OTLP.Endpoint = srv.URL
	tel, err := telemetry.Setup(ctx, telemetry.Info{Service: "runtimetruth-test"}, cfg)
	require.NoError(t, err)
	assert.True(t, tel.Exporting)
	_, span := tel.TracerProvider.Tracer("t").Start(ctx, "work")
	span.End()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, tel.Shutdown(sctx), "shutdown flushes")
	assert.Equal(t, int32(1), posts.Load(), "one export to <endpoint>/v1/traces")
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*telemetry.Config)
		err  string
	}{
		{"default", func(*telemetry.Config) {}, ""},
		{"http", func(c *telemetry.Config) { c.OTLP.Endpoint = "http://otel:4318" }, ""},
		{"https with path", func(c *telemetry.Config) { c.OTLP.Endpoint = "https://otel.example:443/otlp/v1/traces" }, ""},
		{"no scheme", func(c *telemetry.Config) { c.OTLP.Endpoint = "otel:4318" }, "telemetry.otlp.endpoint"},
		{"grpc scheme", func(c *telemetry.Config) { c.OTLP.Endpoint = "grpc://otel:4317" }, "telemetry.otlp.endpoint"},
		{"user info", func(c *telemetry.Config) { c.OTLP.Endpoint = "http://u:p@otel:4318" }, "user information"},
		{"timeout", func(c *telemetry.Config) { c.OTLP.Endpoint, c.OTLP.Timeout = "http://otel:4318", 0 }, "telemetry.otlp.timeout"},
		{"ratio", func(c *telemetry.Config) { c.TraceSampleRatio = 1.5 }, "trace_sample_ratio"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := telemetry.NewDefaultConfig()
			tc.edit(&cfg)
			err := cfg.Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, config.ErrInvalid)
			assert.ErrorContains(t, err, tc.err)
		})
	}
}
