package auditor_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/logtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
)

const sinkDownLine = "clickhouse sink not up"

// readyz serves /readyz as the service's main does (servicemain adds the
// auditor, a health.Checker, as the check "auditor"), and returns a
// function that gets it.
func readyz(t *testing.T, a *auditor.Auditor) func() (int, string) {
	t.Helper()
	hs := health.New(health.Config{}, nil, nil)
	hs.AddCheck("auditor", a.Ready)
	require.NoError(t, hs.Gate().Start(t.Context()))
	srv := httptest.NewServer(hs.Handler())
	t.Cleanup(srv.Close)
	return func() (int, string) {
		resp, err := http.Get(srv.URL + "/readyz")
		require.NoError(t, err)
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
}

// TestWaitsForClickHouse starts the auditor while its ClickHouse server is
// down, which comes up later: Start does not fail, the auditor keeps
// trying past start_timeout (one log line per attempt, none per message),
// pulls nothing and answers /readyz 503 naming the sink; once ClickHouse
// is up it is ready and records every event, once.
func TestWaitsForClickHouse(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	srv := auditortest.StartClickHouse(t)
	srv.Stop() // down when the auditor starts
	cfg := e.config()
	cfg.ClickHouse.DSN = srv.DSN
	cfg.ClickHouse.Timeout = 3 * time.Second
	cfg.StartTimeout = 2 * time.Second
	logs := &logtest.Buffer{}
	a, err := newAuditor(t, cfg, auditor.Settings{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	require.NoError(t, err)
	get := readyz(t, a)
	require.NoError(t, a.Start(context.Background()), "ClickHouse down does not fail Start")
	n := e.publish(t, 0, 50)

	// The waits before the 7th attempt add up to 50+100+…+1600 ms = 3.15 s,
	// past start_timeout.
	waitCounted(t, a, 60*time.Second, 20*time.Millisecond, 7, auditor.MetricSinkWaits)
	code, body := get()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "auditor: clickhouse sink not up")
	assert.Contains(t, body, "connection refused")
	assert.Zero(t, counted(t, a, auditor.MetricReceived), "nothing is pulled while the sinks are not up")
	assert.Empty(t, a.Heads())

	srv.Start()
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if code, body := get(); code != http.StatusOK {
			return fmt.Errorf("readyz %d: %s", code, body)
		}
		return nil
	})
	waitLinks(t, a, n)
	stop(t, a)
	attempts := int(counted(t, a, auditor.MetricSinkWaits))
	assert.Equal(t, attempts, strings.Count(logs.String(), sinkDownLine), "one log line per failed attempt")
	assert.Equal(t, 1, strings.Count(logs.String(), "clickhouse sink up; auditing"))
	assert.Zero(t, strings.Count(logs.String(), "level=WARN msg=\"append"), "no line per message or batch")
	exactlyOnceRows(t, srv.DSN, e.stored(t))
	exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))
}

// TestShutdownWhileWaitingForClickHouse stops an auditor that waits for a
// ClickHouse nobody listens for: Shutdown returns within its deadline,
// without error, and leaves nothing open (the JSONL log's lock is free for
// the next run).
func TestShutdownWhileWaitingForClickHouse(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cfg := e.config()
	cfg.ClickHouse.DSN = "clickhouse://" + addr + "/default?dial_timeout=1s"
	a := start(t, cfg)
	get := readyz(t, a)
	waitCounted(t, a, 60*time.Second, 20*time.Millisecond, 3, auditor.MetricSinkWaits)
	code, body := get()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "clickhouse sink not up")
	assert.Contains(t, body, addr)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, a.Shutdown(ctx), "returns before its deadline")
	code, body = get()
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "shutting down")

	s, err := jsonl.Open(context.Background(), jsonl.Options{Path: cfg.JSONL.Path})
	require.NoError(t, err, "the log was closed")
	require.NoError(t, s.Close())
}
