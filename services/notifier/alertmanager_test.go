package notifier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/notifier"
	"github.com/runtimetruth/runtimetruth/services/notifier/notifiertest"
)

// TestAlertmanager runs the notifier against the real Alertmanager: a
// drift gives one firing notification; drifts repeated for longer than
// the alerts' lease give no new notification and no resolve (the firing
// alert is sent again before its endsAt); a pass gives one resolved; a
// STALE target fires until fresh evidence arrives.
func TestAlertmanager(t *testing.T) {
	h := &notifiertest.Hook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	am := notifiertest.StartAlertmanager(t, srv.URL)

	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	ctx := t.Context()
	require.NoError(t, topology.Ensure(ctx, js, 1))
	cfg := notifier.NewDefaultConfig()
	cfg.Instance = "test"
	cfg.Alertmanager.URL = am
	cfg.Alertmanager.ResendInterval, cfg.Alertmanager.Lease = 200*time.Millisecond, 2*time.Second
	n, err := notifier.New(cfg, notifier.Settings{Conn: nc})
	require.NoError(t, err)
	require.NoError(t, n.Start(ctx))
	t.Cleanup(func() { require.NoError(t, n.Shutdown(context.Background())) })

	publish := publisher(t, js)
	waitFor := func(want int) []notifiertest.Notification { return waitNotifications(t, h, want) }

	publish(verdict("web", agent, events.StatusDrift))
	got := waitFor(1)
	require.Len(t, got, 1)
	assert.Equal(t, "firing", got[0].Status)
	require.Len(t, got[0].Alerts, 1)
	assert.Equal(t, map[string]string{"alertname": notifier.AlertDrift, "host": "web", "target": agent.String(),
		"kind": "codex.agent", "severity": "critical"}, got[0].Alerts[0].Labels)

	// Drifts repeated over three leases: Alertmanager keeps the alert
	// firing (sent again every resend interval) and notifies nothing new.
	for range 30 {
		publish(verdict("web", agent, events.StatusDrift))
		time.Sleep(200 * time.Millisecond)
	}
	assert.Len(t, h.Notifications(), 1, "no new notification before repeat_interval, no spurious resolve")

	publish(verdict("web", agent, events.StatusPass))
	got = waitFor(2)
	assert.Equal(t, "resolved", got[1].Status)
	assert.Equal(t, notifier.AlertDrift, got[1].Alerts[0].Labels["alertname"])

	publish(verdict("db", agent, events.StatusStale))
	got = waitFor(3)
	assert.Equal(t, "firing", got[2].Status)
	assert.Equal(t, notifier.AlertStale, got[2].Alerts[0].Labels["alertname"])
	for range 15 {
		publish(verdict("db", agent, events.StatusStale))
		time.Sleep(200 * time.Millisecond)
	}
	assert.Len(t, h.Notifications(), 3, "stale, still firing")
	publish(verdict("db", agent, events.StatusPass)) // fresh evidence
	got = waitFor(4)
	assert.Equal(t, "resolved", got[3].Status)
	assert.Equal(t, notifier.AlertStale, got[3].Alerts[0].Labels["alertname"])

	// Nothing fires twice: the stream drops a verdict published again
	// (two verifier instances, one verdict id).
	id := publish(verdict("web", agent, events.StatusDrift))
	m, _, err := binding.NewMsg(events.Source("verifier", "v2"), verdict("web", agent, events.StatusDrift), binding.WithID(id))
	require.NoError(t, err)
	ack, err := js.PublishMsg(ctx, m)
	require.NoError(t, err)
	assert.True(t, ack.Duplicate)
	got = waitFor(5)
	assert.Equal(t, "firing", got[4].Status)
	cons, err := js.Consumer(ctx, topology.StreamVerdicts, notifier.DefaultConsumer)
	require.NoError(t, err)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumAckPending+int(info.NumPending) > 0 {
			return fmt.Errorf("%d pending", info.NumAckPending+int(info.NumPending))
		}
		return nil
	})
}

// TestAlertsSurviveARestart: a notifier stopped while alerts fire, and
// started again, resolves them on the next pass: its alerts are in the
// notifier-alerts bucket. The lease is long, so Alertmanager does not
// resolve them by itself within the test.
func TestAlertsSurviveARestart(t *testing.T) {
	h := &notifiertest.Hook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	am := notifiertest.StartAlertmanager(t, srv.URL)
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	ctx := t.Context()
	require.NoError(t, topology.Ensure(ctx, js, 1))
	start := func() *notifier.Notifier {
		cfg := notifier.NewDefaultConfig()
		cfg.Instance = "test"
		cfg.Alertmanager.URL = am
		cfg.Alertmanager.ResendInterval, cfg.Alertmanager.Lease = 200*time.Millisecond, 10*time.Minute
		n, err := notifier.New(cfg, notifier.Settings{Conn: nc})
		require.NoError(t, err)
		require.NoError(t, n.Start(ctx))
		return n
	}
	publish := publisher(t, js)
	waitFor := func(want int) []notifiertest.Notification { return waitNotifications(t, h, want) }

	n := start()
	publish(verdict("web", agent, events.StatusDrift))
	publish(modified("web", "requests"))
	waitFor(2)
	require.NoError(t, n.Shutdown(context.Background()))

	n = start()
	t.Cleanup(func() { require.NoError(t, n.Shutdown(context.Background())) })
	firing, _ := n.Alerts().Counts()
	assert.Equal(t, 2, firing, "restored from the bucket")
	publish(verdict("web", agent, events.StatusPass))
	publish(verdict("web", venv, events.StatusPass))
	got := waitFor(4)
	resolved := map[string]bool{}
	for _, g := range got[2:] {
		assert.Equal(t, "resolved", g.Status)
		resolved[g.Alerts[0].Labels["alertname"]] = true
	}
	assert.Equal(t, map[string]bool{notifier.AlertDrift: true, notifier.AlertModified: true}, resolved)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if left := len(n.Alerts().Pending()); left > 0 {
			return fmt.Errorf("%d alerts still pending", left)
		}
		kv, err := js.KeyValue(ctx, notifier.BucketAlerts)
		if err != nil {
			return err
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			return err
		}
		stored := 0
		for range keys.Keys() {
			stored++
		}
		if stored > 0 {
			return fmt.Errorf("%d alerts still stored", stored)
		}
		return nil
	})
}

// TestAlertmanagerOutage: while Alertmanager answers 503 the firing alert
// is kept and sent again every resend interval (counted as failures and
// retries); once it answers 200 the alert is there, counted as sent.
func TestAlertmanagerOutage(t *testing.T) {
	var mu sync.Mutex
	down, posts := true, 0
	var last []map[string]any
	am := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		posts++
		if down {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewDecoder(r.Body).Decode(&last)
	}))
	defer am.Close()
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	ctx := t.Context()
	require.NoError(t, topology.Ensure(ctx, js, 1))
	st := telemetrytest.New(t)
	cfg := notifier.NewDefaultConfig()
	cfg.Instance = "test"
	cfg.Alertmanager.URL = am.URL
	cfg.Alertmanager.ResendInterval, cfg.Alertmanager.Lease = 50*time.Millisecond, time.Second
	n, err := notifier.New(cfg, notifier.Settings{Conn: nc, Telemetry: st.Providers})
	require.NoError(t, err)
	require.NoError(t, n.Start(ctx))
	t.Cleanup(func() { require.NoError(t, n.Shutdown(context.Background())) })
	m, _, err := binding.NewMsg(events.Source("verifier", "v"), verdict("web", agent, events.StatusDrift))
	require.NoError(t, err)
	_, err = js.PublishMsg(ctx, m)
	require.NoError(t, err)

	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if f := st.Sum(t, notifier.MetricFailed); f < 3 {
			return fmt.Errorf("%d failures", f)
		}
		return nil
	})
	assert.Positive(t, st.Sum(t, notifier.MetricRetried))
	assert.Zero(t, st.Sum(t, notifier.MetricSent))
	mu.Lock()
	down = false
	mu.Unlock()
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(last) != 1 {
			return fmt.Errorf("alertmanager holds %d alerts", len(last))
		}
		return nil
	})
	mu.Lock()
	assert.Equal(t, notifier.AlertDrift, last[0]["labels"].(map[string]any)["alertname"])
	mu.Unlock()
	// The sent counter moves once the request returns, after the server
	// has the alert.
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if st.Sum(t, notifier.MetricSent) == 0 {
			return fmt.Errorf("no alert counted as sent")
		}
		return nil
	})
	assert.Equal(t, int64(1), st.Sum(t, notifier.MetricAlerts, notifier.AttrState.String("fired")))
}

// publisher returns a function that publishes a payload to js with a new
// id, and returns the id.
func publisher(t *testing.T, js jetstream.JetStream) func(events.Payload) string {
	seq := 0
	return func(p events.Payload) string {
		t.Helper()
		seq++
		id := fmt.Sprintf("event-%d", seq)
		m, _, err := binding.NewMsg(events.Source("verifier", "v"), p, binding.WithID(id))
		require.NoError(t, err)
		_, err = js.PublishMsg(t.Context(), m)
		require.NoError(t, err)
		return id
	}
}

// waitNotifications waits until h holds want notifications, and returns
// them.
func waitNotifications(t *testing.T, h *notifiertest.Hook, want int) []notifiertest.Notification {
	t.Helper()
	var got []notifiertest.Notification
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if got = h.Notifications(); len(got) < want {
			return fmt.Errorf("%d of %d notifications", len(got), want)
		}
		return nil
	})
	return got
}
