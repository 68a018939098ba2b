package verifier_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/events/topology"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// benchSnapshots builds n evidence events of RuntimeTruth's before.json
// fixture (three records, 26 fields), captured one millisecond apart on
// ten hosts: each verifies as a pass with its report.
func benchSnapshots(b *testing.B, n int) (base *snapshot.Snapshot, msgs []*nats.Msg, ids []string) {
	b.Helper()
	base, err := snapshot.Parse(evidenceTestdata(b, "snapshots/before.json"))
	require.NoError(b, err)
	msgs, ids = make([]*nats.Msg, n), make([]string, n)
	t0 := base.CapturedAt
	for i := range n {
		s := *base
		s.CapturedAt = t0.Add(time.Duration(i+1) * time.Millisecond)
		msgs[i], ids[i] = evidenceMsg(b, fmt.Sprintf("host-%02d.example.com", i%10), &s)
	}
	return base, msgs, ids
}

// counter counts the messages of a core subscription and closes done when
// it has seen want.
type counter struct {
	mu   sync.Mutex
	n    int
	want int
	done chan struct{}
	seen func(*nats.Msg)
}

func (c *counter) expect(want int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n, c.want, c.done = 0, want, make(chan struct{})
	return c.done
}

func (c *counter) handle(m *nats.Msg) {
	if c.seen != nil {
		c.seen(m)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.n == c.want {
		close(c.done)
	}
}

func wait(ctx context.Context, b *testing.B, done <-chan struct{}, what string) {
	b.Helper()
	select {
	case <-done:
	case <-ctx.Done():
		b.Fatalf("%s: %v", what, ctx.Err())
	}
}

// publishAll publishes msgs, letting go of each once handed over (as a
// collector does), so that the process's live heap, which every garbage
// collection walks, is not the benchmark's stock of messages.
func publishAll(ctx context.Context, b *testing.B, js jetstream.JetStream, msgs []*nats.Msg) {
	b.Helper()
	for i, m := range msgs {
		for { // the server's back-pressure waits, as a collector's spool does
			_, err := js.PublishMsgAsync(m)
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				require.NoError(b, err)
				break
			}
		}
		msgs[i] = nil
	}
	wait(ctx, b, js.PublishAsyncComplete(), "publish")
}

// benchServer starts a JetStream server, a client publishing with up to
// 512 acknowledgements outstanding, and a subscription counting what
// arrives on subject.
func benchServer(b *testing.B, subject string, seen func(*nats.Msg)) (context.Context, string, *nats.Conn, jetstream.JetStream, *counter) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	b.Cleanup(cancel)
	_, url := natstest.RunJetStream(b)
	nc, _ := natstest.Connect(b, url)
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(512))
	require.NoError(b, err)
	c := &counter{seen: seen}
	sub, err := nc.Subscribe(subject, c.handle)
	require.NoError(b, err)
	require.NoError(b, sub.SetPendingLimits(-1, -1))
	return ctx, url, nc, js, c
}

// BenchmarkVerifierThroughput pushes snapshots through the verifier
// (evidence event in, strict decode, latest-snapshot write, baseline read,
// the verify comparison, verdict publish, latest-verdict write, durable
// ack) and, as the reference, moves the same messages through raw
// JetStream in the verifier's consumer style (publish, pull from a
// durable consumer in batches, publish one message per message consumed
// without waiting on each, durable ack once it is stored). One op is one snapshot. The
// fixed-rate runs offer 2,000 and 500 snapshots/s for 5 s each and report
// the publish→verdict latency percentiles, measured from each snapshot's
// scheduled send time (so a backlog counts), and the verdict rate
// achieved.
func BenchmarkVerifierThroughput(b *testing.B) {
	b.Run("runtimetruth", func(b *testing.B) {
		ctx, url, _, js, verdictsIn := benchServer(b, events.FilterVerdict, nil)
		base, msgs, _ := benchSnapshots(b, b.N)
		startBench(ctx, b, url, js, base)

		done := verdictsIn.expect(b.N)
		runtime.GC() // the setup's garbage is not the run's
		b.ResetTimer()
		cpu := cpuTime(b)
		publishAll(ctx, b, js, msgs)
		wait(ctx, b, done, "verdicts")
		b.StopTimer()
		reportCPU(b, cpu)
	})

	b.Run("reference-raw-jetstream", func(b *testing.B) {
		ctx, url, _, js, outs := benchServer(b, "bench.out.>", nil)
		_, msgs, _ := benchSnapshots(b, b.N)
		// Its own connection, as the verifier has.
		rnc, _ := natstest.Connect(b, url)
		rjs, err := jetstream.New(rnc)
		require.NoError(b, err)
		_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: "IN", Subjects: []string{events.FilterEvidence}, Storage: jetstream.FileStorage,
			Duplicates: topology.DuplicateWindow, MaxMsgSize: events.MaxEventSize,
		})
		require.NoError(b, err)
		_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "OUT", Subjects: []string{"bench.out.>"}, Storage: jetstream.FileStorage})
		require.NoError(b, err)
		cons, err := rjs.CreateOrUpdateConsumer(ctx, "IN", jetstream.ConsumerConfig{
			Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: topology.MaxAckPending,
		})
		require.NoError(b, err)
		cctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		// The verifier's consumer style: a durable pull consumer read
		// ahead, workers (as many as the verifier's default) taking
		// batches of what has arrived, one message published per
		// message without waiting on each in turn, each input
		// acknowledged (DoubleAck) once its output is stored.
		work := make(chan jetstream.Msg, topology.MaxAckPending/2)
		for range verifier.NewDefaultConfig().Concurrency {
			wg.Go(func() {
				for m := range work {
					batch := []jetstream.Msg{m}
				more:
					for len(batch) < 64 {
						select {
						case m, ok := <-work:
							if !ok {
								break more
							}
							batch = append(batch, m)
						default:
							break more
						}
					}
					outs := make([]*nats.Msg, len(batch))
					futures := make([]jetstream.PubAckFuture, len(batch))
					for i, m := range batch {
						outs[i] = &nats.Msg{Subject: "bench.out." + m.Headers().Get("ce-id"), Data: m.Data()}
						futures[i], _ = rjs.PublishMsgAsync(outs[i])
					}
					var acks sync.WaitGroup
					for i, m := range batch {
						stored := false
						if futures[i] != nil {
							select {
							case <-futures[i].Ok():
								stored = true
							case err := <-futures[i].Err():
								_ = err // retried below, one by one
							case <-cctx.Done():
							}
						}
						if !stored { // as the verifier: again, one by one
							_, err := rjs.PublishMsg(cctx, outs[i])
							stored = err == nil
						}
						if stored {
							acks.Go(func() { _ = m.DoubleAck(cctx) })
						}
					}
					acks.Wait()
				}
			})
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(topology.MaxAckPending / 2))
		require.NoError(b, err)
		wg.Go(func() {
			defer close(work)
			for {
				m, err := it.Next()
				if err != nil {
					return
				}
				work <- m
			}
		})
		b.Cleanup(func() { it.Stop(); stop(); wg.Wait() })

		done := outs.expect(b.N)
		runtime.GC() // the setup's garbage is not the run's
		b.ResetTimer()
		cpu := cpuTime(b)
		publishAll(ctx, b, js, msgs)
		wait(ctx, b, done, "outputs")
		b.StopTimer()
		reportCPU(b, cpu)
	})

	// 2,000/s is the target; 500/s shows the latency below saturation.
	for _, rate := range []int{2000, 500} {
		b.Run(fmt.Sprintf("runtimetruth-fixed-%d-per-s", rate), func(b *testing.B) {
			for range b.N {
				p50, p99, achieved := fixedRate(b, rate, 5)
				b.ReportMetric(p50, "p50-ms")
				b.ReportMetric(p99, "p99-ms")
				b.ReportMetric(achieved, "snapshots/s")
			}
		})
	}
}

// cpuTime is the CPU time (user and system) the process has used: the
// server, the clients and the verifier all run in it. On a shared machine
// CPU per snapshot is steadier than the wall time.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per op since start as cpu-µs/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.Helper()
	b.ReportMetric(float64(cpuTime(b)-start)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// startBench starts a verifier with the default settings and makes base
// the baseline.
func startBench(ctx context.Context, b *testing.B, url string, js jetstream.JetStream, base *snapshot.Snapshot) *verifier.Verifier {
	b.Helper()
	cfg := verifier.NewDefaultConfig()
	cfg.NATS.URL = url
	v, err := verifier.New(cfg, verifier.Settings{})
	require.NoError(b, err)
	require.NoError(b, v.Start(ctx))
	b.Cleanup(func() { require.NoError(b, v.Shutdown(context.Background())) })
	raw, err := base.Canonical()
	require.NoError(b, err)
	_, err = verifier.NewBaselines(js, "/bench/b").Put(ctx, verifier.Baseline{Snapshot: raw})
	require.NoError(b, err)
	return v
}

// fixedRate offers rate snapshots/s for the given seconds and returns the
// p50 and p99 publish→verdict latency in milliseconds, and the verdict
// rate achieved.
func fixedRate(b *testing.B, rate, seconds int) (p50, p99, achieved float64) {
	n := rate * seconds
	base, msgs, ids := benchSnapshots(b, n)
	scheduled := make(map[string]time.Time, n) // verdict id → when its snapshot was due
	latencies := make([]time.Duration, 0, n)
	var mu sync.Mutex
	ctx, url, _, js, verdictsIn := benchServer(b, events.FilterVerdict, func(m *nats.Msg) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if at, ok := scheduled[m.Header.Get("ce-id")]; ok {
			latencies = append(latencies, now.Sub(at))
		}
	})
	startBench(ctx, b, url, js, base)

	interval := time.Second / time.Duration(rate)
	start := time.Now().Add(10 * time.Millisecond)
	mu.Lock()
	for i, id := range ids {
		scheduled[verifier.VerdictID(id)] = start.Add(time.Duration(i) * interval)
	}
	mu.Unlock()
	done := verdictsIn.expect(n)
	b.ResetTimer()
	for i, m := range msgs {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		// Back-pressure from the server shows as latency, which counts
		// from when the snapshot was due, not as a failed run.
		for {
			_, err := js.PublishMsgAsync(m)
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				require.NoError(b, err)
				break
			}
		}
	}
	wait(ctx, b, js.PublishAsyncComplete(), "publish")
	wait(ctx, b, done, "verdicts")
	elapsed := time.Since(start)
	b.StopTimer()

	mu.Lock()
	defer mu.Unlock()
	require.Len(b, latencies, n)
	slices.Sort(latencies)
	ms := func(q float64) float64 {
		return float64(latencies[min(int(q*float64(n)), n-1)]) / float64(time.Millisecond)
	}
	return ms(0.50), ms(0.99), float64(n) / elapsed.Seconds()
}
