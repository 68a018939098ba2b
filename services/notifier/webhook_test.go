package notifier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/notifier"
)

// The signature of Standard Webhooks' own test vector.
func TestSignerVector(t *testing.T) {
	s, err := notifier.NewSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	got := s.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", got)
	_, err = notifier.NewSigner("whsec_not base64!")
	assert.Error(t, err)
}

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// request is one request a receiver got.
type request struct {
	id, timestamp, signature string
	body                     []byte
}

// receiver is a webhook receiver whose answers a test scripts: status
// returns the status of the n-th request (from 0).
type receiver struct {
	mu     sync.Mutex
	got    []request
	status func(n int) int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	r.mu.Lock()
	n := len(r.got)
	r.got = append(r.got, request{req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature"), b})
	code := http.StatusOK
	if r.status != nil {
		code = r.status(n)
	}
	r.mu.Unlock()
	w.WriteHeader(code)
}

func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.got...)
}

// webhookBus starts JetStream with the topology and a notifier whose
// Alertmanager takes everything, with webhooks; it returns the stream
// and a publisher of verdicts.
func webhookBus(t *testing.T, log *slog.Logger, hooks ...notifier.WebhookConfig) (*notifier.Notifier, func(events.Payload)) {
	t.Helper()
	am := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(am.Close)
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	ctx := t.Context()
	require.NoError(t, topology.Ensure(ctx, js, 1))
	cfg := notifier.NewDefaultConfig()
	cfg.Instance = "test"
	cfg.Alertmanager.URL = am.URL
	cfg.Webhooks = hooks
	n, err := notifier.New(cfg, notifier.Settings{Conn: nc, Logger: log})
	require.NoError(t, err)
	require.NoError(t, n.Start(ctx))
	t.Cleanup(func() { require.NoError(t, n.Shutdown(context.Background())) })
	publish := publisher(t, js)
	return n, func(p events.Payload) { publish(p) }
}

// urlFile writes a receiver's URL to a file, as an operator would.
func urlFile(t *testing.T, url string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "url")
	require.NoError(t, os.WriteFile(f, []byte(url+"\n"), 0o600))
	return f
}

func hook(name, urlFile, format string) notifier.WebhookConfig {
	return notifier.WebhookConfig{Name: name, URLFile: urlFile, Format: format, SecretEnv: "RT_TEST_WEBHOOK_SECRET",
		Timeout: 5 * time.Second, MaxBackoff: 200 * time.Millisecond}
}

// TestWebhookDelivery: one request per alert change, signed per Standard
// Webhooks; a receiver answering 503 and 429 gets the same request (the
// same webhook-id) again until it answers 200; the URL and the secret
// appear in no log line.
func TestWebhookDelivery(t *testing.T) {
	t.Setenv("RT_TEST_WEBHOOK_SECRET", testSecret)
	rcv := &receiver{status: func(n int) int {
		switch n {
		case 0:
			return http.StatusServiceUnavailable
		case 1:
			return http.StatusTooManyRequests
		}
		return http.StatusOK
	}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	_, publish := webhookBus(t, log, hook("ops", urlFile(t, srv.URL+"/hooks/T0KEN"), notifier.FormatJSON))

	publish(verdict("web", agent, events.StatusDrift))
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := len(rcv.requests()); n < 3 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	got := rcv.requests()
	signer, err := notifier.NewSigner(testSecret)
	require.NoError(t, err)
	for _, r := range got[:3] {
		assert.Equal(t, got[0].id, r.id, "a retry is the same request")
		ts, err := strconv.ParseInt(r.timestamp, 10, 64)
		require.NoError(t, err)
		assert.Equal(t, signer.Sign(r.id, time.Unix(ts, 0), r.body), r.signature, "signed per Standard Webhooks")
	}
	var b notifier.WebhookBody
	require.NoError(t, json.Unmarshal(got[2].body, &b))
	require.Len(t, b.Alerts, 1)
	assert.Equal(t, "firing", b.Alerts[0].Status)
	assert.Equal(t, notifier.AlertDrift, b.Alerts[0].Labels["alertname"])
	assert.Equal(t, "ops", b.Receiver)

	publish(verdict("web", agent, events.StatusPass))
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := len(rcv.requests()); n < 4 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	got = rcv.requests()
	require.NoError(t, json.Unmarshal(got[3].body, &b))
	assert.Equal(t, "resolved", b.Alerts[0].Status)
	assert.NotEqual(t, got[0].id, got[3].id, "another change, another request")
	time.Sleep(300 * time.Millisecond)
	assert.Len(t, rcv.requests(), 4, "one request per change, once taken")

	logMu.Lock()
	text := logs.String()
	logMu.Unlock()
	assert.Contains(t, text, "webhook unreachable", "the outage is logged")
	assert.NotContains(t, text, "T0KEN", "the URL is a secret")
	assert.NotContains(t, text, strings.TrimPrefix(testSecret, "whsec_"))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A 4xx other than 408 and 429 will not change on retry: the change is
// dropped, and the next one is sent.
func TestWebhookRefused(t *testing.T) {
	t.Setenv("RT_TEST_WEBHOOK_SECRET", testSecret)
	rcv := &receiver{status: func(n int) int {
		if n == 0 {
			return http.StatusBadRequest
		}
		return http.StatusOK
	}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	_, publish := webhookBus(t, nil, hook("ops", urlFile(t, srv.URL), notifier.FormatJSON))
	publish(verdict("web", agent, events.StatusDrift))
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := len(rcv.requests()); n < 1 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	assert.Len(t, rcv.requests(), 1, "not retried")
	publish(verdict("web", agent, events.StatusPass))
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := len(rcv.requests()); n < 2 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
}

// Slack's body: a text and a section per alert, escaped.
func TestWebhookSlack(t *testing.T) {
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	h := hook("slack", urlFile(t, srv.URL), notifier.FormatSlack)
	h.SecretEnv = ""
	_, publish := webhookBus(t, nil, h)
	publish(verdict("web<&>", agent, events.StatusDrift))
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := len(rcv.requests()); n < 1 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	r := rcv.requests()[0]
	assert.Empty(t, r.signature, "no secret, no signature")
	var b struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type string `json:"type"`
			Text struct {
				Type, Text string
			} `json:"text"`
		} `json:"blocks"`
	}
	require.NoError(t, json.Unmarshal(r.body, &b))
	assert.Equal(t, "runtimetruth: 1 firing, 0 resolved", b.Text)
	require.Len(t, b.Blocks, 2)
	assert.Contains(t, b.Blocks[1].Text.Text, "web&lt;&amp;&gt;")
	assert.NotContains(t, b.Blocks[1].Text.Text, "web<&>")
}

// A drift storm on many hosts (one deploy), grouped by alertname: a few
// requests, each with many alerts, every change delivered once.
func TestWebhookGrouping(t *testing.T) {
	t.Setenv("RT_TEST_WEBHOOK_SECRET", testSecret)
	rcv := &receiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	h := hook("ops", urlFile(t, srv.URL), notifier.FormatJSON)
	h.GroupBy, h.GroupWait, h.GroupInterval = []string{"alertname"}, 300*time.Millisecond, time.Second
	_, publish := webhookBus(t, nil, h)
	const hosts = 300
	for i := range hosts {
		publish(verdict(fmt.Sprintf("web-%03d", i), agent, events.StatusDrift))
	}
	delivered := map[string]int{}
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		clear(delivered)
		for _, r := range rcv.requests() {
			var b notifier.WebhookBody
			if err := json.Unmarshal(r.body, &b); err != nil {
				return err
			}
			for _, a := range b.Alerts {
				delivered[a.Labels["host"]]++
			}
		}
		if len(delivered) < hosts {
			return fmt.Errorf("%d of %d hosts", len(delivered), hosts)
		}
		return nil
	})
	for h, n := range delivered {
		assert.Equal(t, 1, n, "host %s delivered once", h)
	}
	assert.LessOrEqual(t, len(rcv.requests()), 10, "grouped: a request per group per interval, not per host")
}

// At least once across a kill -9: the notifier (its binary) dies while a
// request is on its way; started again, it sends the same request (the
// same webhook-id) from its outbox, stored before the verdict was
// acknowledged.
func TestWebhookSurvivesKill(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "runtimetruth-notifier")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/runtimetruth-notifier").CombinedOutput()
	require.NoError(t, err, "%s", out)

	hold := make(chan struct{})
	var once sync.Once
	rcv := &receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		once.Do(func() { first = true })
		if first { // the first request hangs until the process is gone
			rcv.ServeHTTP(httptest.NewRecorder(), r)
			<-hold
			return
		}
		rcv.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer close(hold)
	am := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer am.Close()
	_, url := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, url)
	ctx := t.Context()
	require.NoError(t, topology.Ensure(ctx, js, 1))

	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "notifier.json")
	cfg := map[string]any{"nats": map[string]any{"url": url}, "instance": "kill", "http": map[string]any{"listen": "127.0.0.1:0"},
		"alertmanager": map[string]any{"url": am.URL},
		"webhooks": []map[string]any{{"name": "ops", "url_file": urlFile(t, srv.URL), "format": "json", "secret_env": "RT_TEST_WEBHOOK_SECRET",
			"timeout": "30s", "max_backoff": "200ms"}}}
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfgFile, b, 0o600))
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "-config", cfgFile)
		cmd.Env = append(os.Environ(), "RT_TEST_WEBHOOK_SECRET="+testSecret)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		require.NoError(t, cmd.Start())
		return cmd
	}
	first := start()
	// The notifier's consumer exists once it started.
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		_, err := js.Consumer(ctx, topology.StreamVerdicts, notifier.DefaultConsumer)
		return err
	})
	m, _, err := binding.NewMsg(events.Source("verifier", "v"), verdict("web", agent, events.StatusDrift))
	require.NoError(t, err)
	_, err = js.PublishMsg(ctx, m)
	require.NoError(t, err)
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if n := len(rcv.requests()); n < 1 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	require.NoError(t, first.Process.Kill()) // SIGKILL: no shutdown, nothing flushed
	_ = first.Wait()

	second := start()
	defer func() {
		_ = second.Process.Kill()
		_ = second.Wait()
	}()
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if n := len(rcv.requests()); n < 2 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	got := rcv.requests()
	assert.Equal(t, got[0].id, got[1].id, "the duplicate shares the webhook-id")
	assert.Equal(t, got[0].body, got[1].body)
}

// A receiver's URL comes from a regular file of bounded size: a
// directory, a FIFO or a huge file is refused at start.
func TestWebhookSecretFiles(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte("x"), 1<<20), 0o600))
	for _, f := range []string{dir, big, filepath.Join(dir, "missing")} {
		cfg := notifier.NewDefaultConfig()
		cfg.Alertmanager.URL = "http://127.0.0.1:1"
		cfg.Webhooks = []notifier.WebhookConfig{hook("ops", f, notifier.FormatJSON)}
		n, err := notifier.New(cfg, notifier.Settings{})
		require.NoError(t, err, "the configuration is valid; the file is read at start")
		assert.Error(t, n.Start(t.Context()), f)
	}
}

// Routes: a receiver matching severity critical gets the drift, not the
// error; another without a match gets both.
func TestWebhookRoutes(t *testing.T) {
	t.Setenv("RT_TEST_WEBHOOK_SECRET", testSecret)
	critical, all := &receiver{}, &receiver{}
	s1, s2 := httptest.NewServer(critical), httptest.NewServer(all)
	defer s1.Close()
	defer s2.Close()
	pager := hook("pager", urlFile(t, s1.URL), notifier.FormatJSON)
	pager.Match = map[string]string{"severity": "critical"}
	_, publish := webhookBus(t, nil, pager, hook("log", urlFile(t, s2.URL), notifier.FormatJSON))
	publish(verdict("web", agent, events.StatusError))
	publish(verdict("db", agent, events.StatusDrift))
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := len(all.requests()); n < 2 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond)
	got := critical.requests()
	require.Len(t, got, 1)
	var b notifier.WebhookBody
	require.NoError(t, json.Unmarshal(got[0].body, &b))
	assert.Equal(t, "db", b.Alerts[0].Labels["host"])
}
