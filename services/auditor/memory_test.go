package auditor_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// heap is the heap in use once garbage is collected (twice: the second
// empties what sync.Pools kept over the first): all of it (HeapInuse),
// and the part the in-process NATS server does not hold (its stream block
// cache comes and goes with the test's stream, not with the auditor),
// estimated from the heap profile as pprof does.
func heap() (all, own uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, false)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, false); ok {
			recs = recs[:n]
			break
		}
	}
	var server float64
	rate := float64(runtime.MemProfileRate)
	for _, r := range recs {
		if r.InUseObjects() == 0 {
			continue
		}
		// A sampled allocation of s bytes stands for 1/(1-e^(-s/rate))
		// of them (runtime/pprof's scaling).
		size := float64(r.AllocBytes) / float64(r.AllocObjects)
		bytes := float64(r.InUseBytes()) / (1 - math.Exp(-size/rate))
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			if strings.HasPrefix(f.Function, "github.com/nats-io/nats-server/") {
				server += bytes
				break
			}
			if !more {
				break
			}
		}
	}
	return ms.HeapInuse, ms.HeapInuse - min(uint64(server), ms.HeapInuse)
}

// resident is the process's resident set (VmRSS), for the log.
func resident() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for ln := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(ln); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n << 10
		}
	}
	return 0
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// gatedSink holds every write until open is closed, so that the auditor
// holds all that its budget lets it while the test measures.
type gatedSink struct {
	auditor.Sink
	open    chan struct{}
	entered atomic.Bool
}

func (g *gatedSink) Write(ctx context.Context, recs []link.Record) error {
	g.entered.Store(true)
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Sink.Write(ctx, recs)
}

func (g *gatedSink) Heads(ctx context.Context) (map[string]link.Head, error) {
	return g.Sink.(auditor.HeadReader).Heads(ctx)
}

func (g *gatedSink) Links(ctx context.Context, c string, after uint64, fn func(link.Record) error) error {
	return g.Sink.(auditor.LinkReader).Links(ctx, c, after, fn)
}

// TestMemoryBoundedByBytes sends the auditor 200 events of 1 MiB (the
// largest there are) from one collector, to the JSONL log and ClickHouse.
// The heap it retains while it holds all its budget lets it (the log's
// writes held back) and while it works through them stays within a small
// multiple of max_inflight_bytes, however many events wait, and once they
// are recorded it is back near where it started. Without the budget it
// held every event pulled, up to 2048 per batch: over 400 MiB here.
func TestMemoryBoundedByBytes(t *testing.T) {
	const n = 200
	const budget = 32 << 20
	e := newEnv(t, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Two hosts: EVIDENCE holds topology.EvidencePerSubject messages of a
	// subject unconsumed (no verifier consumes here).
	bigs := []*nats.Msg{auditortest.LargeMsg(t, "web-01.example.com", 0, events.MaxEventSize),
		auditortest.LargeMsg(t, "web-02.example.com", 0, events.MaxEventSize)}
	for i := range n {
		big := bigs[i%len(bigs)]
		m := nats.NewMsg(big.Subject)
		m.Data = big.Data
		for k, v := range big.Header {
			m.Header[k] = v
		}
		id := fmt.Sprintf("01940000-0000-7000-8000-%012d", i)
		m.Header.Set("ce-id", id)
		m.Header.Set(binding.HeaderMsgID, id)
		_, err := e.js.PublishMsgAsync(m)
		require.NoError(t, err)
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	cfg := e.config()
	cfg.MaxInflightBytes = budget
	cfg.ClickHouse.DSN = auditortest.ClickHouseDSN(t)
	cfg.ClickHouse.Timeout = 30 * time.Second
	debug.FreeOSMemory()
	baseAll, base := heap()
	baseRSS := resident()

	var mu sync.Mutex
	var peakAll, peak, peakRSS uint64
	var peakHeld int64
	var a *auditor.Auditor
	sample := func() {
		all, own := heap()
		r := resident()
		mu.Lock()
		defer mu.Unlock()
		peakAll, peak, peakRSS = max(peakAll, all), max(peak, own), max(peakRSS, r)
		peakHeld = max(peakHeld, a.InflightBytes())
	}
	gate := make(chan struct{})
	var g *gatedSink
	a = start(t, cfg, func(a *auditor.Auditor) {
		a.WrapSinks(func(s auditor.Sink) auditor.Sink {
			if s.Name() == "jsonl" {
				g = &gatedSink{Sink: s, open: gate}
				return g
			}
			return s
		})
	})
	natstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if !g.entered.Load() {
			return fmt.Errorf("no write yet")
		}
		return nil
	})
	// Held back, the auditor takes what its budget allows and stops there.
	for range 20 {
		sample()
	}
	mu.Lock()
	heldBack := peak
	mu.Unlock()
	close(gate)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
				sample()
			}
		}
	})
	// Slow under the race detector (every byte of 200 MiB canonicalized,
	// hashed and written twice): minutes, not seconds.
	waitCounted(t, a, 10*time.Minute, 50*time.Millisecond, int64(n), auditor.MetricAppended)
	close(done)
	wg.Wait()
	// Settled: every message acknowledged (a pull lost in flight comes
	// back after the ack wait, a duplicate).
	natstest.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		c, err := e.js.Consumer(context.Background(), topology.StreamEvidence, testConsumer)
		if err != nil {
			return err
		}
		if p := c.CachedInfo().NumAckPending + int(c.CachedInfo().NumPending); p > 0 {
			return fmt.Errorf("%d not acknowledged", p)
		}
		return nil
	})
	debug.FreeOSMemory()
	afterAll, after := heap()
	afterRSS := resident()
	stop(t, a)

	t.Logf("heap retained, NATS server's share left out: baseline %s, held back %s, peak %s, after %s (budget %s, peak held %s)",
		mib(base), mib(heldBack), mib(peak), mib(after), mib(budget), mib(uint64(peakHeld)))
	t.Logf("heap retained, all (HeapInuse): baseline %s, peak %s, after %s", mib(baseAll), mib(peakAll), mib(afterAll))
	t.Logf("resident (VmRSS): baseline %s, peak %s, after %s", mib(baseRSS), mib(peakRSS), mib(afterRSS))
	assert.LessOrEqual(t, peakHeld, int64(budget)+64<<10, "the messages held stay within the budget")
	assert.Less(t, peak, base+4*budget, "the heap retained while working stays within a small multiple of the budget")
	assert.Less(t, after, base+budget/2, "the heap retained afterwards is back near the baseline")
	exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))
	exactlyOnceRows(t, cfg.ClickHouse.DSN, e.stored(t))
}
