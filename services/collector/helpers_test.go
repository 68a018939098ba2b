package collector_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/collector/spool"
)

// The collector starts goroutines per target, a sender and NATS clients;
// none may outlive Shutdown.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testHost has a dot, so subjects show the token encoding.
const testHost = "test-host.example"

// bus is a JetStream server with the runtimetruth topology and a client.
type bus struct {
	srv  *server.Server
	url  string
	opts *server.Options
	nc   *nats.Conn
	js   jetstream.JetStream
}

// runBus starts a JetStream server (on port, or any when 0) storing in
// dir, with the topology in place, and connects a test client.
func runBus(t *testing.T, dir string, port int) *bus {
	t.Helper()
	opts := natstest.Options(dir)
	if port != 0 {
		opts.Port = port
	}
	srv, url := natstest.Run(t, opts)
	nc, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, topology.Ensure(ctx, js, 1))
	return &bus{srv: srv, url: url, opts: opts, nc: nc, js: js}
}

// deadURL is a NATS URL nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	return fmt.Sprintf("nats://127.0.0.1:%d", freePort(t))
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// testConfig is a collector config for url with its state in a temporary
// directory.
func testConfig(t *testing.T, url string, targets ...collector.TargetConfig) collector.Config {
	t.Helper()
	cfg := collector.NewDefaultConfig()
	cfg.Host = testHost
	cfg.StateDir = t.TempDir()
	cfg.NATS.URL = url
	cfg.Targets = targets
	return cfg
}

func gitTarget(name, path string, interval time.Duration) collector.TargetConfig {
	return collector.TargetConfig{Name: name, Kind: collector.KindGit, Path: path, Interval: interval}
}

// testLogger writes the collector's logs to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// recorder collects the ids the collector spools, in order.
type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) hook(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, ids...)
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// newCollector builds a collector recording its spooled ids, shut down
// when the test ends.
func newCollector(t *testing.T, cfg collector.Config, set collector.Settings) (*collector.Collector, *recorder) {
	t.Helper()
	if set.Logger == nil {
		set.Logger = testLogger(t)
	}
	c, err := collector.New(cfg, set)
	require.NoError(t, err)
	rec := &recorder{}
	collector.SetSpoolHook(c, rec.hook)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return c, rec
}

// spoolDepth is the events waiting in the spool of a running collector
// reporting to tel (its MetricSpoolDepth gauge).
func spoolDepth(t *testing.T, tel *telemetrytest.Recorder) int64 {
	t.Helper()
	n, ok := tel.Gauge(t, collector.MetricSpoolDepth)
	require.True(t, ok, "the spool depth is reported while the collector runs")
	return n
}

// spoolLeft is the events left in the spool of a stopped collector of
// cfg, read from its directory.
func spoolLeft(t *testing.T, cfg collector.Config) int {
	t.Helper()
	sp, err := spool.Open(cfg.SpoolDir(), spool.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, sp.Close()) }()
	n, _ := sp.Pending()
	return n
}

func shutdown(t *testing.T, c *collector.Collector, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	require.NoError(t, c.Shutdown(ctx))
}

// streamMsg adapts a stored message to events.Msg.
type streamMsg struct{ m *jetstream.RawStreamMsg }

func (s streamMsg) Subject() string      { return s.m.Subject }
func (s streamMsg) Headers() nats.Header { return s.m.Header }
func (s streamMsg) Data() []byte         { return s.m.Data }

// stored returns every message in the EVIDENCE stream, in stream order.
func (b *bus) stored(t *testing.T) []streamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := b.js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var out []streamMsg
	if info.State.Msgs == 0 {
		return nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		out = append(out, streamMsg{m})
	}
	return out
}

// storedIDs returns the Nats-Msg-Id of every stored message, in order.
func (b *bus) storedIDs(t *testing.T) []string {
	t.Helper()
	var ids []string
	for _, m := range b.stored(t) {
		ids = append(ids, m.m.Header.Get(binding.HeaderMsgID))
	}
	return ids
}

// waitStored waits until the stream holds n messages.
func (b *bus) waitStored(t *testing.T, n int) []streamMsg {
	t.Helper()
	var msgs []streamMsg
	natstest.CheckFor(t, 30*time.Second, 25*time.Millisecond, func() error {
		msgs = b.stored(t)
		if len(msgs) < n {
			return fmt.Errorf("%d messages stored, want %d", len(msgs), n)
		}
		return nil
	})
	return msgs
}

// evidence decodes a stored evidence.collected event strictly.
func evidence(t *testing.T, m streamMsg) events.EvidenceCollected {
	t.Helper()
	_, p, err := binding.Read[events.EvidenceCollected](m)
	require.NoError(t, err)
	return p
}
