package fleet_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// The fleet's size and pace; FLEET_HOSTS, FLEET_INTERVAL and FLEET_PHASE
// (seconds) override them.
var (
	hosts    = envInt("FLEET_HOSTS", 10_000)
	interval = time.Duration(envInt("FLEET_INTERVAL", 60)) * time.Second
	phase    = time.Duration(envInt("FLEET_PHASE", 20)) * time.Second
)

// staleAfter is the verifiers' stale_after: the silenced host's STALE is
// due this long after its last evidence; above the interval, or every
// honest target would turn STALE between two collections.
var staleAfter = interval * 3 / 2

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// targets are the targets of the fleet: every host has the first two,
// every other host the third as well (2.5 a host).
var targets = []events.Target{
	{Kind: "systemd.unit", Identifier: "agent.service"},
	{Kind: "systemd.unit", Identifier: "web.service"},
	{Kind: "systemd.unit", Identifier: "db.service"},
}

// unit is the snapshot of target every honest host reports: its
// baseline's evidence, captured at.
func unit(target events.Target, at time.Time) *snapshot.Snapshot {
	s := snapshot.New(snapshot.Target{Kind: target.Kind, Identifier: target.Identifier}, snapshot.Record{
		Plane: snapshot.Live, Kind: "systemd.unit",
		Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
		Data:   snapshot.Data{"active_state": snapshot.String("active"), "unit_id": snapshot.String(target.Identifier), "user": snapshot.String("svc")},
	})
	s.CapturedAt = snapshot.FormatTime(at.UTC())
	return s
}

// host is one simulated host: its name, key and signature sequence.
type host struct {
	name string
	key  ed25519.PrivateKey
	seq  atomic.Uint64
	// quiet: silenced (the host whose STALE is timed).
	quiet atomic.Bool
}

func newHost(name string) *host {
	sum := sha256.Sum256([]byte("fleet " + name))
	return &host{name: name, key: ed25519.NewKeyFromSeed(sum[:])}
}

func (h *host) signer() *dsse.Signer {
	return dsse.NewSigner(h.key, func() (uint64, error) { return h.seq.Add(1), nil })
}

func (h *host) keyID() string { return dsse.KeyID(h.key.Public().(ed25519.PublicKey)) }

// attack is one of the adversary's attacks: run publishes until ctx
// ends and returns how many messages it sent.
type attack struct {
	name string
	run  func(ctx context.Context) int
}

// sample is one honest evidence event on its way to a verdict.
type sample struct {
	phase string
	sent  time.Time
	got   time.Time
}

// ledger records the honest evidence sent and the verdicts seen.
type ledger struct {
	mu      sync.Mutex
	phase   string
	samples map[string]*sample // evidence id → sample
	early   map[string]time.Time
	stale   map[string]time.Time // host and target (targetKey) → first stale verdict seen
	last    map[string]time.Time // host → its last evidence sent
}

func (l *ledger) setPhase(p string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phase = p
}

// targetKey is the ledger's key of a host's target.
func targetKey(host string, t events.Target) string { return host + " " + t.String() }

func (l *ledger) sent(host string, t events.Target, id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &sample{phase: l.phase, sent: at}
	if got, ok := l.early[id]; ok { // the verdict was faster than this record
		s.got = got
		delete(l.early, id)
	}
	l.samples[id] = s
	l.last[targetKey(host, t)] = at
}

func (l *ledger) verdict(v events.Verdict, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if v.Status == events.StatusStale {
		if k := targetKey(v.Host, v.Target); l.stale[k].IsZero() {
			l.stale[k] = at
		}
		return
	}
	s, ok := l.samples[v.EvidenceID]
	switch {
	case !ok:
		l.early[v.EvidenceID] = at
	case s.got.IsZero():
		s.got = at
	}
}

// latencies returns the evidence-to-verdict times of the samples of
// phase, sorted, and how many got no verdict.
func (l *ledger) latencies(phase string) (d []time.Duration, missed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.samples {
		if s.phase != phase {
			continue
		}
		if s.got.IsZero() {
			missed++
			continue
		}
		d = append(d, s.got.Sub(s.sent))
	}
	slices.Sort(d)
	return d, missed
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// BenchmarkFleet runs the fleet once (b.N is not used: the scenario is
// the measure) and reports its figures as the benchmark's metrics.
func BenchmarkFleet(b *testing.B) {
	ctx, cancel := context.WithTimeout(b.Context(), 40*time.Minute)
	defer cancel()
	_, urls := natstest.RunCluster(b, 3)
	nc, js := natstest.Connect(b, urls)
	dir := b.TempDir()

	// The services run as deployed, each its own process (so that each
	// one's peak RSS is its own), built from this workspace.
	bin := buildServices(b, dir)
	var services []*service
	defer func() {
		for _, s := range slices.Backward(services) {
			s.stop()
		}
	}()
	for i := range 2 {
		services = append(services, startService(b, bin.verifier, dir, "verifier-"+strconv.Itoa(i), map[string]any{
			"nats": map[string]any{"url": urls}, "instance": "fleet-" + strconv.Itoa(i), "replicas": 3,
			"stale_after": staleAfter.String(), "http": map[string]any{"listen": "127.0.0.1:0"},
		}))
	}
	var logs []string
	// With a ClickHouse server (RUNTIMETRUTH_CLICKHOUSE_DSN, as make bench
	// runs it), the auditors write there too, into a database of their
	// own, whose size on disk is reported.
	chDSN := ""
	if os.Getenv("RUNTIMETRUTH_CLICKHOUSE_DSN") != "" {
		var drop func()
		chDSN, drop = auditortest.ClickHouseDatabase(b)
		defer drop()
	}
	var auditorConsumers []string
	for i := range 2 {
		logDir := filepath.Join(dir, "auditor-"+strconv.Itoa(i))
		logs = append(logs, logDir)
		cfg := map[string]any{
			"nats": map[string]any{"url": urls}, "instance": "fleet-" + strconv.Itoa(i), "replicas": 3,
			"partitions": 2, "partition": i,
			"jsonl":      map[string]any{"path": filepath.Join(logDir, "audit.jsonl")},
			"checkpoint": map[string]any{"file": filepath.Join(logDir, "checkpoints.jsonl")},
			"http":       map[string]any{"listen": "127.0.0.1:0"},
		}
		if chDSN != "" {
			cfg["clickhouse"] = map[string]any{"dsn": chDSN}
		}
		services = append(services, startService(b, bin.auditor, dir, "auditor-"+strconv.Itoa(i), cfg))
		ac := auditor.NewDefaultConfig()
		ac.Partitions, ac.Partition = 2, i
		auditorConsumers = append(auditorConsumers, ac.PartitionConsumer())
	}
	// Up once their consumers are and none has exited for longer than a
	// start takes: on a fresh cluster, four services ensuring the topology
	// at once can time out a start, which a supervisor (systemd's
	// Restart=on-failure) answers with a restart, as this does.
	settled := time.Now()
	for {
		if supervise(b, services) {
			settled = time.Now()
		}
		up := true
		for _, c := range append([]string{topology.ConsumerVerifier}, auditorConsumers...) {
			if _, err := js.Consumer(ctx, topology.StreamEvidence, c); err != nil {
				up = false
			}
		}
		if up && time.Since(settled) > 40*time.Second {
			break
		}
		if ctx.Err() != nil {
			b.Fatal("the services never came up")
		}
		sleep(ctx, time.Second)
	}

	// The fleet, each host's key enrolled, the targets' baselines.
	fleet := make([]*host, hosts)
	for i := range fleet {
		fleet[i] = newHost(fmt.Sprintf("host-%05d", i))
	}
	adversary := newHost("adversary")
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	if err != nil {
		b.Fatal(err)
	}
	registry := verifier.NewHosts(kv, verifier.EnrollManual)
	enroll := make(chan *host)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for h := range enroll {
				if _, err := registry.Approve(ctx, h.name, h.keyID(), "fleet"); err != nil {
					b.Error(err)
				}
			}
		})
	}
	for _, h := range append(slices.Clone(fleet), adversary) {
		enroll <- h
	}
	close(enroll)
	wg.Wait()
	alive(b, services)
	baselines := verifier.NewBaselines(js, "/fleet/operator")
	for _, t := range targets {
		raw, err := unit(t, time.Now()).Canonical()
		if err != nil {
			b.Fatal(err)
		}
		if _, err := baselines.Put(ctx, events.Baseline{Snapshot: raw, ApprovedBy: "fleet"}); err != nil {
			b.Fatal(err)
		}
	}

	led := &ledger{samples: map[string]*sample{}, early: map[string]time.Time{}, stale: map[string]time.Time{}, last: map[string]time.Time{}}
	sub, err := nc.Subscribe(events.FilterVerdict, func(m *nats.Msg) {
		at := time.Now()
		e, err := binding.FromNATS(m.Header, m.Data)
		if err != nil {
			return
		}
		if v, err := binding.Decode[events.Verdict](e); err == nil {
			led.verdict(v, at)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()

	// The honest load: every host's targets, each at its own offset in the
	// interval, published by a pool of workers.
	type due struct {
		h *host
		t events.Target
	}
	const slot = 50 * time.Millisecond
	wheel := make([][]due, int(interval/slot))
	for i, h := range fleet {
		for j, t := range targets[:2+i%2] {
			k := (i*3 + j*7919) % len(wheel)
			wheel[k] = append(wheel[k], due{h, t})
		}
	}
	work := make(chan due, 4096)
	var publishErrs atomic.Int64
	var pubs sync.WaitGroup
	for range 32 {
		pubs.Go(func() {
			for d := range work {
				p, err := events.NewEvidenceCollected(d.h.name, unit(d.t, time.Now()), interval)
				if err != nil {
					b.Error(err)
					continue
				}
				m, e, err := binding.NewMsg(events.Source("collector", d.h.name), p, binding.WithSigner(d.h.signer()))
				if err != nil {
					b.Error(err)
					continue
				}
				at := time.Now()
				led.sent(d.h.name, d.t, e.ID(), at)
				if _, err := js.PublishMsg(ctx, m); err != nil {
					publishErrs.Add(1)
				}
			}
		})
	}
	honestCtx, stopHonest := context.WithCancel(ctx)
	var honest sync.WaitGroup
	honest.Go(func() {
		defer close(work)
		tick := time.NewTicker(slot)
		defer tick.Stop()
		for k := 0; ; k = (k + 1) % len(wheel) {
			for _, d := range wheel[k] {
				if d.h.quiet.Load() {
					continue
				}
				select {
				case work <- d:
				case <-honestCtx.Done():
					return
				}
			}
			select {
			case <-tick.C:
			case <-honestCtx.Done():
				return
			}
		}
	})

	// One interval to warm up (every target's first verdict), one without
	// the adversary, then each attack in turn.
	led.setPhase("warm-up")
	sleep(ctx, interval)
	led.setPhase("quiet")
	silenced := fleet[0]
	silenced.quiet.Store(true)
	silencedAt := time.Now()
	sleep(ctx, interval)
	attacks := []attack{
		{"key-churn", func(ctx context.Context) int { return keyChurn(ctx, js, adversary) }},
		{"junk", func(ctx context.Context) int { return junk(ctx, js) }},
		{"replays", func(ctx context.Context) int { return replays(ctx, js, adversary) }},
		{"big-copies", func(ctx context.Context) int { return bigCopies(ctx, js, adversary) }},
	}
	// The verifiers' backlog: the most EVIDENCE messages waiting for
	// their consumer (not yet delivered) seen during a phase, sampled
	// every second; of the adversary's, at most EvidencePerSubject wait.
	backlog := func(ctx context.Context) <-chan uint64 {
		out := make(chan uint64, 1)
		go func() {
			most := uint64(0)
			defer func() { out <- most }()
			for ctx.Err() == nil {
				if c, err := js.Consumer(ctx, topology.StreamEvidence, topology.ConsumerVerifier); err == nil {
					most = max(most, c.CachedInfo().NumPending)
				}
				sleep(ctx, time.Second)
			}
		}()
		return out
	}
	sentByAttack := map[string]int{}
	backlogs := map[string]uint64{}
	for _, a := range attacks {
		led.setPhase(a.name)
		actx, stop := context.WithTimeout(ctx, phase)
		most := backlog(actx)
		sentByAttack[a.name] = a.run(actx)
		stop()
		backlogs[a.name] = <-most
	}
	led.setPhase("after")
	stopHonest()
	honest.Wait()
	pubs.Wait()

	// Every honest verdict, or give up after a minute.
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		missing := 0
		phases := []string{"quiet"}
		for _, a := range attacks {
			phases = append(phases, a.name)
		}
		for _, p := range phases {
			_, m := led.latencies(p)
			missing += m
		}
		if missing == 0 {
			break
		}
		sleep(ctx, time.Second)
	}

	// The silenced host's targets' STALE: each due stale_after after its
	// last evidence, found by a sweep every half of it.
	silencedTargets := targets[:2] // host 0's
	for time.Now().Before(silencedAt.Add(2*staleAfter + interval)) {
		led.mu.Lock()
		seen := 0
		for _, t := range silencedTargets {
			if !led.stale[targetKey(silenced.name, t)].IsZero() {
				seen++
			}
		}
		led.mu.Unlock()
		if seen == len(silencedTargets) {
			break
		}
		sleep(ctx, time.Second)
	}

	report := func(name string, v float64) { b.ReportMetric(v, name) }
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	d, missed := led.latencies("quiet")
	report("quiet-p50-ms", ms(quantile(d, 0.5)))
	report("quiet-p99-ms", ms(quantile(d, 0.99)))
	report("quiet-verdicts", float64(len(d)))
	totalMissed := missed
	for _, a := range attacks {
		d, missed := led.latencies(a.name)
		report(a.name+"-p50-ms", ms(quantile(d, 0.5)))
		report(a.name+"-p99-ms", ms(quantile(d, 0.99)))
		report(a.name+"-sent", float64(sentByAttack[a.name]))
		report(a.name+"-backlog", float64(backlogs[a.name]))
		totalMissed += missed
	}
	report("missed", float64(totalMissed))
	report("honest-publish-errors", float64(publishErrs.Load()))
	// The longest of the silenced host's targets, from its last evidence
	// to its STALE (-1: one never turned STALE).
	staleS := 0.0
	led.mu.Lock()
	for _, t := range silencedTargets {
		k := targetKey(silenced.name, t)
		if led.stale[k].IsZero() {
			staleS = -1
			break
		}
		staleS = max(staleS, led.stale[k].Sub(led.last[k]).Seconds())
	}
	led.mu.Unlock()
	report("stale-s", staleS)
	for _, bucket := range []string{topology.BucketHosts, topology.BucketVerdicts, verifier.BucketEvidence} {
		s, err := js.Stream(ctx, "KV_"+bucket)
		if err != nil {
			b.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		report("kv-"+bucket+"-MB", float64(info.State.Bytes)/1e6)
	}
	var logBytes int64
	for _, logDir := range logs {
		files, _ := filepath.Glob(filepath.Join(logDir, "audit.jsonl*"))
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				logBytes += fi.Size()
			}
		}
	}
	elapsed := 2*interval + time.Duration(len(attacks))*phase
	report("jsonl-KB/host/day", float64(logBytes)/float64(hosts)/elapsed.Seconds()*86400/1e3)
	if chDSN != "" {
		onDisk, raw := clickHouseBytes(ctx, b, chDSN)
		report("clickhouse-KB/host/day", float64(onDisk)/float64(hosts)/elapsed.Seconds()*86400/1e3)
		report("clickhouse-raw-KB/host/day", float64(raw)/float64(hosts)/elapsed.Seconds()*86400/1e3)
	}
	alive(b, services)
	for _, s := range services {
		report("rss-"+s.name+"-MB", s.peakRSS()/1e6)
	}
	report("peak-rss-MB", peakRSS()/1e6)
	b.Logf("fleet of %d hosts (%.1f targets each) every %s: %d honest verdicts in the quiet interval, %d missed in all, adversary sent %v",
		hosts, 2.5, interval, len(d), totalMissed, sentByAttack)
}

// clickHouseBytes is the size of the active parts of the database of dsn:
// on disk (compressed) and uncompressed.
func clickHouseBytes(ctx context.Context, b *testing.B, dsn string) (onDisk, raw uint64) {
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	// Merged first, as a day's parts would be.
	if err := conn.Exec(ctx, "OPTIMIZE TABLE audit_links FINAL"); err != nil {
		b.Logf("clickhouse: optimize: %v", err)
	}
	row := conn.QueryRow(ctx, "SELECT sum(bytes_on_disk), sum(data_uncompressed_bytes) FROM system.parts WHERE database = ? AND active",
		opts.Auth.Database)
	if err := row.Scan(&onDisk, &raw); err != nil {
		b.Fatal(err)
	}
	return onDisk, raw
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// peakRSS is this process's peak resident set (VmHWM), in bytes: the
// three NATS servers and the simulated fleet.
func peakRSS() float64 { return vmHWM("/proc/self/status") }

// vmHWM reads the peak resident set (VmHWM) from a /proc status file, in
// bytes; -1 when it cannot.
func vmHWM(path string) float64 {
	raw, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024
		}
	}
	return -1
}

// flood publishes what next makes, as fast as the stream takes it (up to
// 256 acknowledgements awaited at once), until ctx ends; it returns how
// many it published.
func flood(ctx context.Context, js jetstream.JetStream, next func(i int) *nats.Msg) int {
	n := 0
	for ; ctx.Err() == nil; n++ {
		if _, err := js.PublishMsgAsync(next(n), jetstream.WithStallWait(time.Second)); err != nil {
			continue
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
	}
	return n
}

// keyChurn: evidence in the adversary's name signed by ever new keys,
// each a pending key of its record.
func keyChurn(ctx context.Context, js jetstream.JetStream, h *host) int {
	return flood(ctx, js, func(int) *nats.Msg {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		p, _ := events.NewEvidenceCollected(h.name, unit(targets[0], time.Now()), interval)
		m, _, _ := binding.NewMsg(events.Source("collector", h.name), p,
			binding.WithSigner(dsse.NewSigner(key, func() (uint64, error) { return 1, nil })))
		return m
	})
}

// junk: messages on the adversary's evidence subject no decoder takes.
func junk(ctx context.Context, js jetstream.JetStream) int {
	return flood(ctx, js, func(i int) *nats.Msg {
		m := nats.NewMsg(events.EvidenceSubject("adversary", "systemd.unit"))
		m.Data = []byte(`{"junk":` + strconv.Itoa(i) + `}`)
		return m
	})
}

// replays: the adversary's own events, old ones again byte for byte
// (duplicates) and new ones claiming an old sequence (replays).
func replays(ctx context.Context, js jetstream.JetStream, h *host) int {
	p, _ := events.NewEvidenceCollected(h.name, unit(targets[0], time.Now()), interval)
	first, _, _ := binding.NewMsg(events.Source("collector", h.name), p, binding.WithSigner(h.signer()))
	old := dsse.NewSigner(h.key, func() (uint64, error) { return 1, nil })
	return flood(ctx, js, func(i int) *nats.Msg {
		if i%2 == 0 {
			m := nats.NewMsg(first.Subject)
			for k, v := range first.Header {
				m.Header[k] = slices.Clone(v)
			}
			m.Header.Del(jetstream.MsgIDHeader) // stored again: the stream would drop it
			m.Data = first.Data
			return m
		}
		p, _ := events.NewEvidenceCollected(h.name, unit(targets[0], time.Now()), interval)
		m, _, _ := binding.NewMsg(events.Source("collector", h.name), p, binding.WithSigner(old))
		return m
	})
}

// bigCopies: a real event's headers, its signature included, on 900 KiB
// of other data.
func bigCopies(ctx context.Context, js jetstream.JetStream, h *host) int {
	p, _ := events.NewEvidenceCollected(h.name, unit(targets[0], time.Now()), interval)
	signed, _, _ := binding.NewMsg(events.Source("collector", h.name), p, binding.WithSigner(h.signer()))
	big := bytes.Repeat([]byte("x"), 900<<10)
	return flood(ctx, js, func(int) *nats.Msg {
		m := nats.NewMsg(signed.Subject)
		for k, v := range signed.Header {
			m.Header[k] = slices.Clone(v)
		}
		m.Header.Del(jetstream.MsgIDHeader)
		m.Data = big
		return m
	})
}

// binaries are the service binaries buildServices made.
type binaries struct{ verifier, auditor string }

// buildServices builds the verifier and auditor binaries into dir.
func buildServices(b *testing.B, dir string) binaries {
	const module = "github.com/runtimetruth/runtimetruth"
	out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		module+"/services/verifier/cmd/runtimetruth-verifier",
		module+"/services/auditor/cmd/runtimetruth-auditor").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return binaries{verifier: filepath.Join(dir, "runtimetruth-verifier"), auditor: filepath.Join(dir, "runtimetruth-auditor")}
}

// service is a service process of the benchmark.
type service struct {
	name, bin, config string
	cmd               *exec.Cmd
	out               *bytes.Buffer
	done              chan struct{}
	restarts          int
	rss               float64 // its peak RSS, read when it stops
}

// startService starts bin with cfg as its configuration file (JSON).
func startService(b *testing.B, bin, dir, name string, cfg map[string]any) *service {
	raw, err := json.Marshal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		b.Fatal(err)
	}
	s := &service{name: name, bin: bin, config: path}
	s.start(b)
	return s
}

// start starts the service's process.
func (s *service) start(b *testing.B) {
	s.cmd, s.out, s.done = exec.Command(s.bin, "-config", s.config), &bytes.Buffer{}, make(chan struct{})
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", s.name, err)
	}
	done := s.done
	go func() {
		_ = s.cmd.Wait()
		close(done)
	}()
}

// supervise restarts a service that has exited (at most three times, then
// fails the benchmark with its output); true when it restarted one.
func supervise(b *testing.B, services []*service) bool {
	restarted := false
	for _, s := range services {
		select {
		case <-s.done:
		default:
			continue
		}
		if s.restarts == 3 {
			b.Fatalf("%s exited a fourth time (%v):\n%s", s.name, s.cmd.ProcessState, s.out)
		}
		b.Logf("%s exited (%v), restarted: %s", s.name, s.cmd.ProcessState, lastLine(s.out.String()))
		s.restarts++
		s.start(b)
		restarted = true
	}
	return restarted
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// alive fails the benchmark, with a service's output, when one has exited.
func alive(b *testing.B, services []*service) {
	for _, s := range services {
		select {
		case <-s.done:
			b.Fatalf("%s exited (%v):\n%s", s.name, s.cmd.ProcessState, s.out)
		default:
		}
	}
}

// peakRSS is the service's peak resident set so far, in bytes.
func (s *service) peakRSS() float64 {
	if s.rss == 0 {
		s.rss = vmHWM(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	}
	return s.rss
}

// stop ends the service (SIGTERM, then SIGKILL after 30 s).
func (s *service) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
