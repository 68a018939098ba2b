package console_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/console"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// The fleet of the console's benchmark: benchHosts hosts with
// benchTargets targets each, 10,000 host and target pairs.
const (
	benchHosts   = 100
	benchTargets = 100
)

// benchFleet publishes one snapshot of every target of every host
// (commit c), signed by each host's key, and waits for their verdicts.
func benchFleet(b *testing.B, bus *fleetBus, signers []*dsse.Signer, c string) {
	b.Helper()
	for h := range benchHosts {
		for i := range benchTargets {
			publishSnapshot(b, bus, signers, h, i, c)
		}
	}
	require.NoError(b, waitAsync(bus))
	natstest.CheckFor(b, 5*time.Minute, 500*time.Millisecond, func() error {
		recs, err := verifier.NewStatus(bus.js).List(b.Context())
		if err != nil {
			return err
		}
		if len(recs) < benchHosts*benchTargets {
			return fmt.Errorf("%d verdicts of %d", len(recs), benchHosts*benchTargets)
		}
		return nil
	})
}

// publishSnapshot publishes host h's snapshot of target i at commit c
// and returns its digest.
func publishSnapshot(b *testing.B, bus *fleetBus, signers []*dsse.Signer, h, i int, c string) string {
	b.Helper()
	host := fmt.Sprintf("host-%03d", h)
	p, err := events.NewEvidenceCollected(host, snap(fmt.Sprintf("/srv/app-%03d", i), c), time.Minute)
	require.NoError(b, err)
	m, _, err := binding.NewMsg(events.Source("collector", host), p, binding.WithSigner(signers[h]))
	require.NoError(b, err)
	_, err = bus.js.PublishMsgAsync(m)
	require.NoError(b, err)
	return p.Digest
}

func waitAsync(bus *fleetBus) error {
	select {
	case <-bus.js.PublishAsyncComplete():
		return nil
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("publishes not acknowledged")
	}
}

// BenchmarkConsole measures the console over 10,000 host and target
// pairs (benchHosts hosts, benchTargets targets each, every one judged):
// fleet-page-10000 is the fleet page's time to its first byte
// (first-byte-ms, the mean; the server and loopback), and
// live-100-per-s-20-pages pushes 100 verdicts/s for 5 s to 20 open live
// streams and reports the events each stream received per second, the
// delay from each snapshot's publish to its verdict's event in a page
// (publish-to-page-p50-ms, -p99-ms: the verifier's work included), the
// live heap after it (heap-MB) and the process's resident set (rss-MB: the
// embedded NATS server and the verifier run in it too).
func BenchmarkConsole(b *testing.B) {
	bus := startFleet(b)
	signers := make([]*dsse.Signer, benchHosts)
	for h := range signers {
		signers[h] = signtest.Random()
	}
	benchFleet(b, bus, signers, "a")
	_, base := startConsole(b, bus)
	session := login(b, base)

	b.Run("fleet-page-10000", func(b *testing.B) {
		var firstByte time.Duration
		for b.Loop() {
			req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, "http://"+base.Host+"/", nil)
			require.NoError(b, err)
			req.AddCookie(&http.Cookie{Name: console.SessionCookie, Value: session})
			start := time.Now()
			resp, err := client.Do(req)
			require.NoError(b, err)
			firstByte += time.Since(start)
			_, err = io.Copy(io.Discard, resp.Body)
			require.NoError(b, err)
			require.NoError(b, resp.Body.Close())
			require.Equal(b, http.StatusOK, resp.StatusCode)
		}
		b.ReportMetric(float64(firstByte.Microseconds())/1000/float64(b.N), "first-byte-ms")
	})

	b.Run("live-100-per-s-20-pages", func(b *testing.B) {
		for b.Loop() {
			rev, err := verifier.NewStatus(bus.js).Revision(b.Context())
			require.NoError(b, err)
			const pages, rate, seconds = 20, 100, 5
			counts := make([]atomic.Int64, pages)
			least := func() int64 {
				n := counts[0].Load()
				for i := range counts {
					n = min(n, counts[i].Load())
				}
				return n
			}
			// The delay from a snapshot's publish to its verdict's event
			// in a page (the verifier's work, the bucket's watch and the
			// stream), per page.
			var published sync.Map // digest → time.Time
			var mu sync.Mutex
			var delays []time.Duration
			var wg sync.WaitGroup
			var bodies []io.Closer
			for p := range pages {
				req, err := http.NewRequestWithContext(b.Context(), http.MethodGet, "http://"+base.Host+"/events?after="+strconv.FormatUint(rev, 10), nil)
				require.NoError(b, err)
				req.AddCookie(&http.Cookie{Name: console.SessionCookie, Value: session})
				resp, err := http.DefaultClient.Do(req)
				require.NoError(b, err)
				bodies = append(bodies, resp.Body)
				wg.Go(func() {
					sc := bufio.NewScanner(resp.Body)
					seen := map[string]bool{}
					for sc.Scan() {
						line := sc.Text()
						if strings.HasPrefix(line, "event: verdict") {
							counts[p].Add(1)
						}
						data, ok := strings.CutPrefix(line, "data: ")
						if !ok {
							continue
						}
						var row console.LiveRow
						if json.Unmarshal([]byte(data), &row) != nil || seen[row.Digest] {
							continue
						}
						if at, ok := published.Load(row.Digest); ok {
							seen[row.Digest] = true
							mu.Lock()
							delays = append(delays, time.Since(at.(time.Time)))
							mu.Unlock()
						}
					}
				})
			}
			start := time.Now()
			tick := time.NewTicker(time.Second / rate)
			for n := range rate * seconds {
				<-tick.C
				at := time.Now()
				d := publishSnapshot(b, bus, signers, n%benchHosts, n/benchHosts, "b"+strconv.Itoa(n))
				published.Store(d, at)
			}
			tick.Stop()
			require.NoError(b, waitAsync(bus))
			natstest.CheckFor(b, time.Minute, 50*time.Millisecond, func() error {
				if n := least(); n < rate*seconds {
					return fmt.Errorf("a page has %d events of %d", n, rate*seconds)
				}
				return nil
			})
			elapsed := time.Since(start)
			var ms runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&ms)
			for _, c := range bodies {
				_ = c.Close()
			}
			wg.Wait()
			b.ReportMetric(float64(least())/elapsed.Seconds(), "events/s-per-page")
			mu.Lock()
			slices.Sort(delays)
			if len(delays) > 0 {
				b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "publish-to-page-p50-ms")
				b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "publish-to-page-p99-ms")
			}
			mu.Unlock()
			b.ReportMetric(float64(ms.HeapInuse)/1e6, "heap-MB")
			b.ReportMetric(rssMB(), "rss-MB")
		}
	})
}

// rssMB is the process's resident set (VmRSS), in MB.
func rssMB() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1000
		}
	}
	return 0
}
