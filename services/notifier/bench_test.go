package notifier_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/notifier"
)

// BenchmarkStorm is a drift storm on 1,000 hosts (one deploy) and its
// recovery: each op publishes a drift verdict of every host, then a pass
// of every host, and waits until the notifier took them all. Alertmanager
// and a webhook grouped by alertname (group_wait 100ms, group_interval
// 1s) are local servers. Reported: verdicts handled per second (the
// fleet's rate is 500 a second: 10,000 hosts, three targets each, every
// 60 s), the webhook requests per storm, and the process's peak RSS
// (VmHWM, the in-process NATS server included) and heap in use.
func BenchmarkStorm(b *testing.B) {
	const hosts = 1000
	var amPosts, hookPosts atomic.Int64
	am := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { amPosts.Add(1) }))
	defer am.Close()
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hookPosts.Add(1) }))
	defer hook.Close()
	_, url := natstest.RunJetStream(b)
	nc, js := natstest.Connect(b, url)
	ctx := context.Background()
	require.NoError(b, topology.Ensure(ctx, js, 1))
	f := b.TempDir() + "/url"
	require.NoError(b, os.WriteFile(f, []byte(hook.URL), 0o600))
	cfg := notifier.NewDefaultConfig()
	cfg.Instance = "bench"
	cfg.Alertmanager.URL = am.URL
	cfg.Webhooks = []notifier.WebhookConfig{{Name: "ops", URLFile: f, Format: notifier.FormatJSON, GroupBy: []string{"alertname"},
		GroupWait: 100 * time.Millisecond, GroupInterval: time.Second, Timeout: 5 * time.Second, MaxBackoff: time.Second}}
	n, err := notifier.New(cfg, notifier.Settings{Conn: nc})
	require.NoError(b, err)
	require.NoError(b, n.Start(ctx))
	defer func() { require.NoError(b, n.Shutdown(context.Background())) }()
	cons, err := js.Consumer(ctx, topology.StreamVerdicts, notifier.DefaultConsumer)
	require.NoError(b, err)

	seq := 0
	storm := func(status events.Status) {
		for h := range hosts {
			seq++
			m, _, err := binding.NewMsg(events.Source("verifier", "bench"), verdict(fmt.Sprintf("web-%04d", h), agent, status),
				binding.WithID("storm-"+strconv.Itoa(seq)))
			require.NoError(b, err)
			_, err = js.PublishMsgAsync(m)
			require.NoError(b, err)
		}
		<-js.PublishAsyncComplete()
	}
	drained := func() {
		natstest.CheckFor(b, 5*time.Minute, 5*time.Millisecond, func() error {
			info, err := cons.Info(ctx)
			if err != nil {
				return err
			}
			if left := info.NumPending + uint64(info.NumAckPending); left > 0 {
				return fmt.Errorf("%d verdicts left", left)
			}
			return nil
		})
	}
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		storm(events.StatusDrift)
		drained()
		storm(events.StatusPass)
		drained()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	firing, _ := n.Alerts().Counts()
	require.Zero(b, firing, "every alert resolved")
	b.ReportMetric(float64(2*hosts*b.N)/elapsed.Seconds(), "verdicts/s")
	// Let the last groups go out before counting the requests.
	time.Sleep(1500 * time.Millisecond)
	b.ReportMetric(float64(hookPosts.Load())/float64(b.N), "webhook-requests/storm")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
	b.ReportMetric(peakRSS()/(1<<20), "peak-rss-MiB")
}

// peakRSS is the process's peak resident set (VmHWM), in bytes; 0 where
// /proc does not say.
func peakRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(ln, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}
