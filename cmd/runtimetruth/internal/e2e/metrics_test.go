package e2e_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// TestMetricsEndpoint runs the pipeline with the telemetry a service's main
// sets up (telemetry.Setup: OpenTelemetry metrics through the Prometheus
// exporter) and scrapes /metrics over HTTP, as Prometheus does, for the
// series every service README lists.
func TestMetricsEndpoint(t *testing.T) {
	ctx := t.Context()
	tel, err := telemetry.Setup(ctx, telemetry.Info{Service: "runtimetruth-e2e", Version: "test", Instance: host},
		telemetry.Config{TraceSampleRatio: 1})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, tel.Shutdown(context.Background())) })
	hs := health.New(health.Config{Listen: "127.0.0.1:0"}, nil, tel.MetricsHandler())
	require.NoError(t, hs.Start(ctx))
	t.Cleanup(func() { assert.NoError(t, hs.Shutdown(context.Background())) })

	// Registered after the HTTP server: cleaned up (shut down) before it.
	pl := startPipeline(t, tel.Providers(), gitRepo(t))
	verdict := regexp.MustCompile(`(?m)^runtimetruth_verdicts_total\{[^}]*status="error"[^}]*\} 1$`)
	waitFor(t, "the error verdict", func() bool { return verdict.MatchString(scrape(t, "http://"+hs.Addr()+"/metrics")) })
	require.NoError(t, pl.aud.Sync(ctx))

	series := []*regexp.Regexp{
		// natsbus, in every service that consumes or publishes.
		regexp.MustCompile(`(?m)^runtimetruth_messages_published_total\{[^}]*stream="EVIDENCE"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^runtimetruth_messages_consumed_total\{[^}]*consumer="verifier"[^}]*stream="EVIDENCE"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^runtimetruth_message_handle_duration_seconds_count\{[^}]*consumer="verifier"[^}]*\} 1$`),
		// The collector.
		regexp.MustCompile(`(?m)^runtimetruth_collection_duration_seconds_count\{[^}]*kind="git"[^}]*status="collected"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^runtimetruth_collector_spool_depth(\{[^}]*\})? 0$`),
		regexp.MustCompile(`(?m)^runtimetruth_collector_spool_size_bytes(\{[^}]*\})? 0$`),
		// The verifier.
		verdict,
		// The auditor.
		regexp.MustCompile(`(?m)^runtimetruth_audit_chain_head\{[^}]*chain="EVIDENCE/e2e-host"[^}]*\} 1$`),
		regexp.MustCompile(`(?m)^runtimetruth_audit_lag\{[^}]*stream="EVIDENCE"[^}]*\} 0$`),
		regexp.MustCompile(`(?m)^runtimetruth_audit_links_appended_total\{[^}]*stream="EVIDENCE"[^}]*\} 1$`),
	}
	var body string
	waitFor(t, "every series", func() bool {
		body = scrape(t, "http://"+hs.Addr()+"/metrics")
		for _, re := range series {
			if !re.MatchString(body) {
				return false
			}
		}
		return true
	})
	for _, re := range series {
		assert.Regexp(t, re, body)
	}
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}
