// Package notifiertest runs Debian's Prometheus Alertmanager for tests and
// collects the notifications it sends.
package notifiertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// Notification is what Alertmanager's webhook receiver posts.
type Notification struct {
	Status string `json:"status"`
	Alerts []struct {
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
		EndsAt time.Time         `json:"endsAt"`
	} `json:"alerts"`
	GroupLabels map[string]string `json:"groupLabels"`
}

// Hook is an http.Handler that collects Alertmanager's notifications.
type Hook struct {
	mu  sync.Mutex
	got []Notification
}

// ServeHTTP records one notification.
func (h *Hook) ServeHTTP(_ http.ResponseWriter, r *http.Request) {
	var n Notification
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if json.Unmarshal(b, &n) == nil {
		h.mu.Lock()
		h.got = append(h.got, n)
		h.mu.Unlock()
	}
}

// Notifications returns the notifications so far, in order.
func (h *Hook) Notifications() []Notification {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Notification(nil), h.got...)
}

// Find returns the notifications of status (firing, resolved) holding an
// alert of alertname on host.
func (h *Hook) Find(status, alertname, host string) []Notification {
	var out []Notification
	for _, n := range h.Notifications() {
		for _, a := range n.Alerts {
			if n.Status == status && a.Labels["alertname"] == alertname && a.Labels["host"] == host {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// StartAlertmanager runs Debian's Alertmanager
// (RUNTIMETRUTH_ALERTMANAGER_BIN; make test sets it) on loopback, routing
// every alert to a webhook at hookURL, grouped by alertname, host and
// target (group_wait 200ms, group_interval 1s, repeat_interval 1h), and
// returns its URL. Without the variable the test fails.
func StartAlertmanager(t testing.TB, hookURL string) string {
	t.Helper()
	bin := os.Getenv("RUNTIMETRUTH_ALERTMANAGER_BIN")
	if bin == "" {
		t.Fatal("RUNTIMETRUTH_ALERTMANAGER_BIN is not set: run the tests through make test, which installs Alertmanager (scripts/install-alertmanager.sh)")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf(`route:
  receiver: hook
  group_by: [alertname, host, target]
  group_wait: 200ms
  group_interval: 1s
  repeat_interval: 1h
receivers:
- name: hook
  webhook_configs:
  - url: %s
    send_resolved: true
`, hookURL)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alertmanager.yml"), []byte(cfg), 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "alertmanager.yml"), "--storage.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--cluster.listen-address=", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	url := "http://" + addr
	natstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		resp, err := http.Get(url + "/-/ready")
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("alertmanager: %s", resp.Status)
		}
		return nil
	})
	return url
}
