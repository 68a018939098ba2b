package servicemain_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeConfig is a service configuration with its own Validate.
type fakeConfig struct {
	Work            time.Duration `mapstructure:"work"`
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	Stuck           bool          `mapstructure:"stuck"`
}

func (c *fakeConfig) Validate() error {
	if c.Work < 0 {
		return fmt.Errorf("%w: work: %s", config.ErrInvalid, c.Work)
	}
	return nil
}

// fake is a component with in-flight work: Shutdown waits for it. It
// records what /readyz and /healthz answered when Shutdown was called.
type fake struct {
	cfg    fakeConfig
	set    servicemain.Settings
	things metric.Int64Counter

	mu            sync.Mutex
	started       bool
	readyAtStop   int
	healthyAtStop int
	shutdownAt    time.Time
	ready         error
}

func (f *fake) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = true
	f.things.Add(ctx, 3)
	return nil
}

func (f *fake) Ready(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

func (f *fake) Shutdown(ctx context.Context) error {
	addr := f.set.Health.Addr()
	ready, healthy := status(addr, "/readyz"), status(addr, "/healthz")
	f.mu.Lock()
	f.readyAtStop, f.healthyAtStop, f.shutdownAt = ready, healthy, time.Now()
	f.mu.Unlock()
	if f.cfg.Stuck {
		<-ctx.Done()
		return ctx.Err()
	}
	select { // the in-flight work finishes
	case <-time.After(f.cfg.Work):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func status(addr, path string) int {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return -1
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func service(built chan<- *fake) servicemain.Service[fakeConfig] {
	return servicemain.Service[fakeConfig]{
		Name:            "fake",
		Version:         "v1.2.3",
		DefaultConfig:   func() fakeConfig { return fakeConfig{Work: 200 * time.Millisecond, ShutdownTimeout: 5 * time.Second} },
		ShutdownTimeout: func(c fakeConfig) time.Duration { return c.ShutdownTimeout },
		New: func(cfg fakeConfig, set servicemain.Settings) (lifecycle.Component, error) {
			things, err := set.MeterProvider.Meter("fake").Int64Counter("runtimetruth.fake.things")
			if err != nil {
				return nil, err
			}
			f := &fake{cfg: cfg, set: set, things: things}
			built <- f
			return f, nil
		},
	}
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// start runs the service in the background until the returned cancel is
// called; the error of Run arrives on the channel.
func start(t *testing.T, cfgText string) (*fake, string, context.CancelFunc, <-chan error) {
	t.Helper()
	built := make(chan *fake, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	path := writeConfig(t, cfgText)
	go func() {
		done <- servicemain.Run(ctx, service(built), []string{"--config", path}, io.Discard, io.Discard)
	}()
	var f *fake
	select {
	case f = <-built:
	case err := <-done:
		t.Fatalf("run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("service not built")
	}
	var addr string
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if addr = f.set.Health.Addr(); addr == "" {
			return errors.New("not listening")
		}
		if code := status(addr, "/readyz"); code != http.StatusOK {
			return fmt.Errorf("readyz %d", code)
		}
		return nil
	})
	return f, addr, cancel, done
}

func TestReadinessTurnsFalseBeforeTheDrain(t *testing.T) {
	f, addr, cancel, done := start(t, "http: {listen: \"127.0.0.1:0\", shutdown_delay: 100ms}\nwork: 300ms\n")

	code, body := get(t, addr, "/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ok\n", body)
	code, body = get(t, addr, "/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "runtimetruth_fake_things_total")
	assert.Contains(t, body, `service_name="runtimetruth-fake"`, "the target_info carries the resource")
	assert.Contains(t, body, "go_goroutines")

	canceled := time.Now()
	cancel() // as SIGTERM does
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	stopped := time.Since(canceled)

	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Equal(t, http.StatusServiceUnavailable, f.readyAtStop, "/readyz is 503 when the component starts draining")
	assert.Equal(t, http.StatusOK, f.healthyAtStop, "/healthz still answers while draining")
	assert.GreaterOrEqual(t, f.shutdownAt.Sub(canceled), 100*time.Millisecond, "the drain waits http.shutdown_delay")
	assert.GreaterOrEqual(t, stopped, 400*time.Millisecond, "in-flight work finished")
	assert.Less(t, stopped, 5*time.Second, "drained within the deadline")
	assert.Equal(t, -1, status(addr, "/healthz"), "the HTTP server stopped last")
}

func TestReadinessChecks(t *testing.T) {
	f, addr, cancel, done := start(t, "http: {listen: \"127.0.0.1:0\"}\nwork: 0s\n")
	f.mu.Lock()
	f.ready = errors.New("nats disconnected")
	f.mu.Unlock()
	code, body := get(t, addr, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "fake: nats disconnected", "a component's Ready is a check, named after the service")

	f.set.Health.AddCheck("extra", func(context.Context) error { return nil })
	f.mu.Lock()
	f.ready = nil
	f.mu.Unlock()
	code, _ = get(t, addr, "/readyz")
	assert.Equal(t, http.StatusOK, code)

	cancel()
	require.NoError(t, <-done)
}

func TestDrainDeadline(t *testing.T) {
	_, _, cancel, done := start(t, "http: {listen: \"127.0.0.1:0\"}\nstuck: true\nshutdown_timeout: 300ms\n")
	canceled := time.Now()
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded, "a component that does not drain in time is an error")
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the shutdown timeout")
	}
	assert.Less(t, time.Since(canceled), 2*time.Second)
}

func TestCheckConfig(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := servicemain.Run(context.Background(), service(make(chan *fake, 1)), args, &out, io.Discard)
		return out.String(), err
	}
	out, err := run("--check-config", "--config", writeConfig(t, "work: 1s\nhttp: {listen: \":9090\"}\n"))
	require.NoError(t, err)
	assert.Equal(t, "runtimetruth-fake: configuration ok\n", out)

	_, err = run("--check-config", "--config", writeConfig(t, "wrk: 1s\n")) // an unknown key
	require.ErrorContains(t, err, "wrk")
	_, err = run("--check-config", "--config", writeConfig(t, "work: -1s\n"))
	require.ErrorIs(t, err, config.ErrInvalid, "the service's own Validate runs")
	require.ErrorContains(t, err, "work: -1s")
	_, err = run("--check-config", "--config", writeConfig(t, "log: {level: loud}\n"))
	require.ErrorContains(t, err, "log.level")

	t.Setenv("RUNTIMETRUTH_FAKE_TELEMETRY_OTLP_ENDPOINT", "ftp://x")
	_, err = run("--check-config")
	require.ErrorContains(t, err, "telemetry.otlp.endpoint")

	out, err = run("--version")
	require.NoError(t, err)
	assert.Equal(t, "v1.2.3\n", out)
	_, err = run("extra")
	require.Error(t, err)
}

func TestCheckHook(t *testing.T) {
	s := service(make(chan *fake, 1))
	s.Check = func(fakeConfig) error { return errors.New("key file unreadable") }
	_, err := s.LoadConfig("")
	require.ErrorContains(t, err, "key file unreadable")
}

func TestStartFailureStopsTheRest(t *testing.T) {
	s := service(make(chan *fake, 1))
	s.New = func(fakeConfig, servicemain.Settings) (lifecycle.Component, error) { return nil, errors.New("boom") }
	err := servicemain.Run(context.Background(), s, nil, io.Discard, io.Discard)
	require.ErrorContains(t, err, "boom")

	// A port already taken fails the start.
	hs := health.New(health.Config{Listen: "127.0.0.1:0"}, nil, nil)
	require.NoError(t, hs.Start(context.Background()))
	defer func() { require.NoError(t, hs.Shutdown(context.Background())) }()
	err = servicemain.Run(context.Background(), service(make(chan *fake, 1)), []string{"--config",
		writeConfig(t, "http: {listen: \""+hs.Addr()+"\"}\n")}, io.Discard, io.Discard)
	require.ErrorContains(t, err, "listen http")
}

// TestActions: an action flag runs, with the validated configuration,
// instead of the service; without it the service starts as ever.
func TestActions(t *testing.T) {
	s := service(make(chan *fake, 1))
	var got fakeConfig
	s.Actions = map[string]servicemain.Action[fakeConfig]{
		"print-work": {Usage: "print work", Run: func(cfg fakeConfig, w io.Writer) error {
			got = cfg
			_, err := fmt.Fprintln(w, cfg.Work)
			return err
		}},
	}
	var out bytes.Buffer
	require.NoError(t, servicemain.Run(context.Background(), s, []string{"--print-work", "--config", writeConfig(t, "work: 3s\n")}, &out, io.Discard))
	assert.Equal(t, "3s\n", out.String())
	assert.Equal(t, 3*time.Second, got.Work)

	err := servicemain.Run(context.Background(), s, []string{"--print-work", "--config", writeConfig(t, "work: -1s\n")}, &out, io.Discard)
	require.ErrorIs(t, err, config.ErrInvalid, "an action gets only a valid configuration")
}
