package verifier_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// The benchmark's fleet: benchHosts hosts, each running benchTargets
// units (RuntimeTruth's before.json fixture, three records and 26 fields,
// under benchTargets unit names, each with its own baseline), so that the
// verifier looks baselines up under benchTargets keys and keeps
// benchHosts×benchTargets latest snapshots and verdicts.
//
// One snapshot in benchDriftEvery (one at a pseudo-random place in every
// run of benchDriftEvery, the same on every run) carries a real evidence
// change: after.json's (the service restarted under another PID, the
// checkout moved to another commit, unique to the snapshot, and is
// dirty), so diff.Verify runs and a drift verdict with its report comes
// out. The others have their baseline's evidence and differ from it only
// in captured_at, as most of a fleet's snapshots do: the verifier answers
// those from the baseline's verification against itself, made once.
const (
	benchHosts      = 100
	benchTargets    = 8
	benchDriftEvery = 4
)

// benchMix is the benchmark's input: the baselines (one per target), and
// the evidence events, captured one millisecond apart, with their ids and
// how many of them drift.
type benchMix struct {
	baselines []*snapshot.Snapshot
	msgs      []*nats.Msg
	ids       []string
	drifts    int
}

// benchSnapshots builds the mix of n evidence events described at
// benchDriftEvery. Snapshot i is of host i%benchHosts and target
// (i/benchHosts)%benchTargets, so every host reports every target in
// turn.
func benchSnapshots(b *testing.B, n int) benchMix {
	b.Helper()
	before := evidenceTestdata(b, "snapshots/before.json")
	after := evidenceTestdata(b, "snapshots/after.json")
	unit := func(doc []byte, k int) []byte { // the fixture under unit name k
		return bytes.ReplaceAll(doc, []byte("agent-worker"), fmt.Appendf(nil, "agent-worker-%02d", k))
	}
	mix := benchMix{msgs: make([]*nats.Msg, n), ids: make([]string, n)}
	for k := range benchTargets {
		s, err := snapshot.Parse(unit(before, k))
		require.NoError(b, err)
		mix.baselines = append(mix.baselines, s)
	}
	afterCommit := []byte(strings.Repeat("2", 40)) // after.json's head_commit
	t0, err := time.Parse(time.RFC3339, mix.baselines[0].CapturedAt)
	require.NoError(b, err)
	rng := rand.New(rand.NewPCG(1, 2))
	drift := 0
	for i := range n {
		if i%benchDriftEvery == 0 {
			drift = i + rng.IntN(benchDriftEvery)
		}
		k := (i / benchHosts) % benchTargets
		var s *snapshot.Snapshot
		if i == drift {
			doc := bytes.ReplaceAll(unit(after, k), afterCommit, fmt.Appendf(nil, "%040x", i+1))
			var err error
			s, err = snapshot.Parse(doc)
			require.NoError(b, err)
			mix.drifts++
		} else {
			c := *mix.baselines[k]
			s = &c
		}
		s.CapturedAt = snapshot.FormatTime(t0.Add(time.Duration(i+1) * time.Millisecond))
		mix.msgs[i], mix.ids[i] = evidenceMsg(b, benchHost(i%benchHosts), s)
	}
	return mix
}

// benchHost is the name of bench host i; evidenceMsg signs its evidence
// with its signtest key.
func benchHost(i int) string { return fmt.Sprintf("host-%02d.example.com", i) }

// verdictTally counts the verdicts seen by status (from the subject, so
// that counting costs next to nothing) and keeps the first drift verdict.
type verdictTally struct {
	pass, drift, other atomic.Int64
	firstDrift         atomic.Pointer[nats.Msg]
}

func (t *verdictTally) seen(m *nats.Msg) {
	switch {
	case strings.HasSuffix(m.Subject, "."+string(events.StatusPass)):
		t.pass.Add(1)
	case strings.HasSuffix(m.Subject, "."+string(events.StatusDrift)):
		t.drift.Add(1)
		t.firstDrift.CompareAndSwap(nil, m)
	default:
		t.other.Add(1)
	}
}

// check fails the benchmark unless the verdicts are what the mix calls
// for: a drift verdict, with a report of changes, for every snapshot
// carrying a change, and a pass for every other one. It keeps the
// benchmark from measuring the unchanged-evidence shortcut alone.
func (t *verdictTally) check(b *testing.B, mix benchMix) {
	b.Helper()
	n := int64(len(mix.msgs))
	if d, p, o := t.drift.Load(), t.pass.Load(), t.other.Load(); d != int64(mix.drifts) || p != n-int64(mix.drifts) || o != 0 {
		b.Fatalf("verdicts: %d drift, %d pass, %d other; want %d drift, %d pass", d, p, o, mix.drifts, n-int64(mix.drifts))
	}
	m := t.firstDrift.Load()
	if m == nil {
		return // n is too small to hold a drifting snapshot
	}
	e, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(b, err)
	p, err := binding.Decode[events.Payload](e)
	require.NoError(b, err)
	if v, ok := p.(events.Verdict); !ok || v.Status != events.StatusDrift || v.Report == nil || len(v.Report.Changes) == 0 {
		b.Fatalf("a drift verdict without its report of changes: %+v", p)
	}
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
// (evidence event in, strict decode, its signature verified and its key
// checked against the host registry, latest-snapshot write, baseline read,
// the verify comparison, verdict publish, latest-verdict write, durable
// ack) and, as the reference, moves the same messages through raw
// JetStream in the verifier's consumer style (publish, pull from a
// durable consumer in batches, publish one message per message consumed
// without waiting on each, durable ack once it is stored). One op is one
// snapshot. The snapshots are benchSnapshots' mix: benchHosts hosts,
// benchTargets targets with a baseline each, one snapshot in
// benchDriftEvery drifting (a drift verdict with its report, checked), the
// rest passing. The fixed-rate runs offer 2,000 and 500 snapshots/s of
// the same mix for 5 s each and report the publish→verdict latency
// percentiles, measured from each snapshot's scheduled send time (so a
// backlog counts), and the verdict rate achieved.
func BenchmarkVerifierThroughput(b *testing.B) {
	// runtimetruth is the verifier as it runs by default (manual
	// enrollment: every signature checked); runtimetruth-enrollment-off
	// is the same run with Config.Enrollment off, which checks no
	// signature, so that the two together show what authenticating the
	// evidence costs.
	for _, run := range []struct {
		name       string
		enrollment verifier.Enrollment
	}{
		{"runtimetruth", verifier.EnrollManual},
		{"runtimetruth-enrollment-off", verifier.EnrollOff},
	} {
		b.Run(run.name, func(b *testing.B) {
			var tally verdictTally
			ctx, url, _, js, verdictsIn := benchServer(b, events.FilterVerdict, tally.seen)
			mix := benchSnapshots(b, b.N)
			v := startBench(ctx, b, url, js, mix.baselines, run.enrollment)

			done := verdictsIn.expect(b.N)
			runtime.GC() // the setup's garbage is not the run's
			b.ResetTimer()
			cpu := cpuTime(b)
			publishAll(ctx, b, js, mix.msgs)
			wait(ctx, b, done, "verdicts")
			b.StopTimer()
			reportCPU(b, cpu)
			tally.check(b, mix)
			require.NoError(b, v.Shutdown(ctx)) // its last writes made
			reportWrites(ctx, b, js)
		})
	}

	b.Run("reference-raw-jetstream", func(b *testing.B) {
		ctx, url, _, js, outs := benchServer(b, "bench.out.>", nil)
		msgs := benchSnapshots(b, b.N).msgs // the same messages
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

// reportWrites reports the verifier's key-value writes per snapshot
// (record-writes/op: the messages stored in the verdicts-latest and
// evidence-latest buckets' streams, beside the evidence, the verdict and
// the acknowledgement the reference has too).
func reportWrites(ctx context.Context, b *testing.B, js jetstream.JetStream) {
	b.Helper()
	var n uint64
	for _, bucket := range []string{topology.BucketVerdicts, verifier.BucketEvidence} {
		s, err := js.Stream(ctx, "KV_"+bucket)
		require.NoError(b, err)
		info, err := s.Info(ctx)
		require.NoError(b, err)
		n += info.State.LastSeq
	}
	b.ReportMetric(float64(n)/float64(b.N), "record-writes/op")
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

// startBench starts a verifier with the default settings but the given
// enrollment (the default, manual: every event's signature is verified,
// and its key checked against the host registry; off: none is), approves
// each bench host's signtest key, as an operator would, and makes each of
// baselines its target's baseline.
func startBench(ctx context.Context, b *testing.B, url string, js jetstream.JetStream, baselines []*snapshot.Snapshot,
	enrollment verifier.Enrollment) *verifier.Verifier {
	b.Helper()
	cfg := verifier.NewDefaultConfig()
	require.Equal(b, string(verifier.EnrollManual), cfg.Enrollment)
	cfg.NATS.URL = url
	cfg.Enrollment = string(enrollment)
	v, err := verifier.New(cfg, verifier.Settings{})
	require.NoError(b, err)
	require.NoError(b, v.Start(ctx))
	b.Cleanup(func() { require.NoError(b, v.Shutdown(context.Background())) })
	// No auditor runs here: without its consumer, EVIDENCE drops what the
	// verifier acknowledges, as the reference's stream keeps what it has;
	// with it, every message would wait for an auditor, and a subject
	// stops at topology.EvidencePerSubject waiting messages.
	require.NoError(b, js.DeleteConsumer(ctx, topology.StreamEvidence, topology.ConsumerAuditor))
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	require.NoError(b, err)
	hosts := verifier.NewHosts(kv, verifier.EnrollManual)
	for i := range benchHosts {
		host := benchHost(i)
		_, err := hosts.Approve(ctx, host, signtest.KeyID(host), "bench")
		require.NoError(b, err)
	}
	for _, base := range baselines {
		raw, err := base.Canonical()
		require.NoError(b, err)
		_, err = verifier.NewBaselines(js, "/bench/b").Put(ctx, events.Baseline{Snapshot: raw})
		require.NoError(b, err)
	}
	return v
}

// fixedRate offers rate snapshots/s for the given seconds and returns the
// p50 and p99 publish→verdict latency in milliseconds, and the verdict
// rate achieved.
func fixedRate(b *testing.B, rate, seconds int) (p50, p99, achieved float64) {
	n := rate * seconds
	mix := benchSnapshots(b, n)
	msgs, ids := mix.msgs, mix.ids
	var tally verdictTally
	scheduled := make(map[string]time.Time, n) // verdict id → when its snapshot was due
	latencies := make([]time.Duration, 0, n)
	var mu sync.Mutex
	ctx, url, _, js, verdictsIn := benchServer(b, events.FilterVerdict, func(m *nats.Msg) {
		now := time.Now()
		tally.seen(m)
		mu.Lock()
		defer mu.Unlock()
		if at, ok := scheduled[m.Header.Get("ce-id")]; ok {
			latencies = append(latencies, now.Sub(at))
		}
	})
	startBench(ctx, b, url, js, mix.baselines, verifier.EnrollManual)

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
	tally.check(b, mix)

	mu.Lock()
	defer mu.Unlock()
	require.Len(b, latencies, n)
	slices.Sort(latencies)
	ms := func(q float64) float64 {
		return float64(latencies[min(int(q*float64(n)), n-1)]) / float64(time.Millisecond)
	}
	return ms(0.50), ms(0.99), float64(n) / elapsed.Seconds()
}
