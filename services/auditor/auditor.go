package auditor

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// Settings carries the auditor's dependencies.
type Settings struct {
	// Logger receives the start and stop lines and sink trouble (never
	// one line per message); nil discards.
	Logger *slog.Logger
	// Conn, when set, is used instead of connecting as Config.NATS says
	// (the embedded mode of `runtimetruth up`); the auditor never closes
	// it.
	Conn *nats.Conn
	// Version is the auditor's version, named in the SIEM records it
	// sends (syslog.format).
	Version string
	// Telemetry receives a span per message appended (a child of its
	// producer's span), a span per batch committed (linked to those), and
	// the metrics (natsbus's consume counters, MetricChainHead, MetricLag,
	// MetricAppended); zero fields mean the OpenTelemetry globals.
	Telemetry telemetry.Providers
}

// Auditor appends every message of the pipeline's streams to the audit
// chains. It is a lifecycle component: New, Start, Shutdown.
type Auditor struct {
	cfg      Config
	log      *slog.Logger
	instance string
	source   string
	version  string
	conn     *nats.Conn
	in       *instruments
	gauges   metric.Registration

	budget *budget // bytes of the messages held (Config.MaxInflightBytes)

	mu     sync.Mutex
	state  lifecycle.State
	client *natsbus.Client
	w      *Writer // nil until the sinks are up
	cp     *checkpointer
	sinks  *sinkSet
	leases *leases
	drains *drains
	cancel context.CancelFunc
	done   chan struct{}
	pos    map[string]*atomic.Uint64 // stream → position committed (streamLoop.pos)

	// unready says why the sinks are not up (Ready), nil once they are.
	smu     sync.Mutex
	unready error
	// duties are the periodic duties nothing else would notice stopping
	// (DutyCheckpoint).
	duties *health.Duties

	// test hooks (export_test.go)
	wrapSink func(Sink) Sink
	dropAcks func() bool
	aborting bool
}

// ErrShutdown is returned by Start after Shutdown.
var ErrShutdown = errors.New("auditor shut down")

// New checks cfg and returns an auditor; it connects nowhere until Start.
func New(cfg Config, set Settings) (*Auditor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := lifecycle.Logger(set.Logger)
	instance := lifecycle.Instance(cfg.Instance)
	if cfg.Lease.TTL == 0 {
		cfg.Lease.TTL = 30 * time.Second
	}
	a := &Auditor{cfg: cfg, log: log, instance: instance, source: events.Source("auditor", instance), version: set.Version, conn: set.Conn,
		in: newInstruments(set.Telemetry), budget: newBudget(cfg.MaxInflightBytes),
		duties: health.NewDuties(set.Telemetry.Meter(ScopeName))}
	a.unready = errors.New("not started")
	return a, nil
}

// Name names the component in logs.
func (a *Auditor) Name() string { return "auditor" }

// Heads returns the committed head of every chain (nil before the sinks
// are up).
func (a *Auditor) Heads() map[string]link.Head {
	w := a.writer()
	if w == nil {
		return nil
	}
	return w.Heads()
}

// Sync waits until every message the audited streams hold when it is
// called is in the chains, or ctx ends (the embedded `runtimetruth up
// --once` calls it before shutting down, so that its run is audited).
func (a *Auditor) Sync(ctx context.Context) error {
	a.mu.Lock()
	c, pos, state := a.client, a.pos, a.state
	a.mu.Unlock()
	if state == lifecycle.New {
		return errors.New("auditor not started")
	}
	js := c.JS
	want := map[string]uint64{}
	for _, s := range a.cfg.Streams {
		st, err := js.Stream(ctx, s)
		if err != nil {
			return fmt.Errorf("stream %s: %w", s, err)
		}
		want[s] = st.CachedInfo().State.LastSeq
	}
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		behind := ""
		w := a.writer()
		for s, seq := range want {
			if w == nil || position(w, pos, s) < seq {
				behind = s
				break
			}
		}
		if behind == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("audit of stream %s up to seq %d: %w", behind, want[behind], ctx.Err())
		case <-t.C:
		}
	}
}

// position is how far the auditor went through stream: the highest stream
// sequence in its chains, or past it, the last one it committed a batch
// for (a partition's batches account for other partitions' messages too).
func position(w *Writer, pos map[string]*atomic.Uint64, stream string) uint64 {
	p := w.Applied(stream)
	if c := pos[stream]; c != nil {
		p = max(p, c.Load())
	}
	return p
}

// writer returns the writer, nil until the sinks are up.
func (a *Auditor) writer() *Writer {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.w
}

// InflightBytes returns the bytes of the messages the auditor holds now
// (pulled or read back, not yet acknowledged), at most about
// Config.MaxInflightBytes.
func (a *Auditor) InflightBytes() int64 { return a.budget.held() }

// Ready reports whether the auditor audits: started, not shutting down,
// its sinks up and its checkpoints sent (DutyCheckpoint: the last round
// of them failed). While it waits for the ClickHouse sink the error says
// so and why (health.Checker: /readyz answers 503 with it).
func (a *Auditor) Ready(ctx context.Context) error {
	a.smu.Lock()
	unready := a.unready
	a.smu.Unlock()
	return errors.Join(unready, a.duties.Ready(ctx))
}

func (a *Auditor) setUnready(err error) {
	a.smu.Lock()
	defer a.smu.Unlock()
	a.unready = err
}

// Start connects (unless Settings.Conn is set), ensures the topology,
// takes the writer leases, opens the sinks and brings them level
// (Writer.Recover), and starts one loop per stream. It returns within
// Config.StartTimeout.
//
// A ClickHouse sink that cannot be reached does not fail Start, nor does
// anything else that goes wrong while it brings ClickHouse level (reading
// its heads, catching it up): Start returns and the auditor waits for it in
// the background, trying again with the sinks' backoff (50 ms doubling to
// 5 s) and logging each attempt, until it is up or Shutdown. Meanwhile
// nothing is pulled and Ready names the sink. Only sinks that disagree
// (ErrFork) stop the wait: the auditor then stays up, not ready, saying
// so.
func (a *Auditor) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.state.CanStart(ErrShutdown); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.StartTimeout)
	defer cancel()

	c, err := natsbus.OpenClient(a.cfg.NATS, "runtimetruth-auditor", a.conn, a.log, a.in.p)
	if err != nil {
		return err
	}
	st, err := a.prepare(ctx, c.JS)
	if err != nil {
		c.Close()
		return err
	}
	up, err := a.bringUp(ctx, st)
	if err != nil && !a.waitable(err) {
		err = errors.Join(err, st.sinks.close())
		st.drains.stop()
		st.leases.release(context.WithoutCancel(ctx))
		c.Close()
		return err
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var wg sync.WaitGroup
	a.state, a.client, a.cancel, a.done = lifecycle.Running, c, stop, done
	a.sinks, a.leases, a.drains, a.pos = st.sinks, st.leases, st.drains, st.pos
	if err == nil {
		a.install(ctx, up)
		a.launch(runCtx, &wg, up)
	} else {
		count(a.in.sinkWaits, 1)
		a.sinkDown(ctx, 1, retryFirst, err)
		wg.Go(func() { a.waitSinks(runCtx, st, &wg) })
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	a.log.InfoContext(ctx, "auditor started", "streams", a.cfg.Streams, "consumer", a.cfg.PartitionConsumer(),
		"partition", a.cfg.Partition, "partitions", a.cfg.Partitions, "chains", len(a.headsLocked()), "keyed", a.cfg.HMAC.KeyFile != "",
		"waiting_for_sinks", err != nil, "max_inflight_bytes", a.cfg.MaxInflightBytes)
	return nil
}

func (a *Auditor) headsLocked() map[string]link.Head {
	if a.w == nil {
		return nil
	}
	return a.w.Heads()
}

// startState is what Start prepares before the sinks are brought up: the
// bus side (topology, leases, consumers, drains) and the sinks opened so
// far.
type startState struct {
	js     jetstream.JetStream
	h      chain.Hasher
	cpKey  ed25519.PrivateKey
	leases *leases
	drains *drains
	sinks  *sinkSet
	cons   []jetstream.Consumer // per a.cfg.Streams
	pos    map[string]*atomic.Uint64
}

// prepare ensures the topology, takes the leases, opens the JSONL and
// syslog sinks and binds the consumers.
func (a *Auditor) prepare(ctx context.Context, js jetstream.JetStream) (*startState, error) {
	if err := topology.Ensure(ctx, js, a.cfg.Replicas); err != nil {
		return nil, err
	}
	key, err := LoadKey(a.cfg.HMAC.KeyFile)
	if err != nil {
		return nil, err
	}
	cpKey, err := a.loadCheckpointKey()
	if err != nil {
		return nil, err
	}
	// The leases first: the heads are read from the sinks only once no
	// other instance can be writing them.
	consumer := a.cfg.PartitionConsumer()
	if a.cfg.Partitioned() {
		for _, s := range a.cfg.Streams {
			if err := a.ensurePartitionConsumer(ctx, js, s); err != nil {
				return nil, err
			}
		}
	}
	// One lease per partition consumer and stream: the partition's
	// writer.
	ls, err := acquireLeases(ctx, js, a.cfg.Replicas, a.cfg.Lease.TTL, a.instance, consumer, a.cfg.Streams, a.leaseLost)
	if err != nil {
		return nil, err
	}
	st := &startState{js: js, h: chain.NewHasher(key), cpKey: cpKey, leases: ls, sinks: &sinkSet{}, pos: map[string]*atomic.Uint64{}}
	fail := func(err error) (*startState, error) {
		st.drains.stop()
		err = errors.Join(err, st.sinks.close())
		ls.release(context.WithoutCancel(ctx))
		return nil, err
	}
	if st.sinks, err = a.openSinks(ctx, st.h); err != nil {
		st.sinks = &sinkSet{}
		return fail(err)
	}
	for _, s := range a.cfg.Streams {
		cons, err := js.Consumer(ctx, s, consumer)
		if err != nil {
			return fail(fmt.Errorf("consumer %s on %s: %w", consumer, s, err))
		}
		st.cons = append(st.cons, cons)
		st.pos[s] = new(atomic.Uint64)
	}
	if a.cfg.Partitioned() && a.cfg.Partition == 0 {
		if st.drains, err = a.drainUnpartitioned(ctx, js); err != nil {
			return fail(err)
		}
	}
	return st, nil
}

// running is what the stream loops need once the sinks are up.
type running struct {
	js    jetstream.JetStream
	w     *Writer
	cp    *checkpointer
	loops []*streamLoop
}

// bringUp opens the ClickHouse sink (once) when configured, brings every
// sink level (Writer.Recover) and makes the stream loops. It may be called
// again after it failed.
func (a *Auditor) bringUp(ctx context.Context, st *startState) (*running, error) {
	if a.cfg.ClickHouse.DSN != "" && !st.sinks.hasClickHouse() {
		s, err := a.openClickHouse(ctx)
		if err != nil {
			return nil, err
		}
		st.sinks.setClickHouse(a.spec(s, a.cfg.ClickHouse.Required))
	}
	w := NewWriter(st.h, st.sinks.specs(), a.log, a.in.p)
	if a.cfg.Partitioned() {
		w.Owns(a.cfg.Owns)
	}
	w.StrictPayloads(a.cfg.StrictPayloads)
	w.Allow(a.cfg.Allowance)
	w.Fence(st.leases.check)
	if ch := st.sinks.clickHouse(); ch != nil && ch.Required {
		// An id looked up by the links table's columns, rather than by
		// reading the log.
		w.LookupIDs(ch.Sink)
	}
	if err := w.Recover(ctx); err != nil {
		return nil, err
	}
	up := &running{js: st.js, w: w, cp: a.newCheckpointer(w, st.sinks.cps, st.cpKey)}
	pull := pullSize(a.cfg.MaxInflightBytes, len(a.cfg.Streams))
	for i, s := range a.cfg.Streams {
		cons := st.cons[i]
		batch := a.cfg.Batch
		if info := cons.CachedInfo(); info != nil && info.Config.MaxAckPending > 0 {
			batch = min(batch, info.Config.MaxAckPending)
		}
		st.pos[s].Store(w.Applied(s))
		l := &streamLoop{stream: s, consumer: a.cfg.PartitionConsumer(), source: a.source, batch: batch, idle: a.cfg.IdleWait,
			js: st.js, cons: cons, w: w, log: a.log, dropAcks: a.dropAcks, budget: a.budget, pull: pull,
			tel: natsbus.NewConsumeTelemetry(a.in.p, s, a.cfg.PartitionConsumer()), in: a.in, pos: st.pos[s],
			appended: metric.WithAttributeSet(attribute.NewSet(AttrStream.String(s))),
			aborted:  func() bool { a.mu.Lock(); defer a.mu.Unlock(); return a.aborting }}
		if a.cfg.Partitioned() {
			l.owns, l.partitioned = a.cfg.Owns, true
		}
		up.loops = append(up.loops, l)
	}
	return up, nil
}

// waitable reports whether Start waits for the sinks after bringUp failed
// with err: with a ClickHouse sink, anything but sinks that disagree.
func (a *Auditor) waitable(err error) bool {
	return a.cfg.ClickHouse.DSN != "" && !errors.Is(err, ErrFork)
}

// install makes up the auditor's writer (a.mu held) and registers the
// gauges over it.
func (a *Auditor) install(ctx context.Context, up *running) {
	a.w, a.cp = up.w, up.cp
	var err error
	if a.gauges, err = a.in.observe(up.w, a.pos, a.budget, up.js, a.cfg.Streams); err != nil {
		a.log.WarnContext(ctx, "audit chain gauges not registered", "err", err)
	}
	a.setUnready(nil)
}

// launch starts the stream loops and the checkpointer.
func (a *Auditor) launch(ctx context.Context, wg *sync.WaitGroup, up *running) {
	for _, l := range up.loops {
		wg.Go(func() { l.run(ctx) })
	}
	if up.cp != nil {
		wg.Go(func() { up.cp.run(ctx) })
	}
}

// sinkDown records and logs a failed attempt to bring the sinks up.
func (a *Auditor) sinkDown(ctx context.Context, attempt int, wait time.Duration, err error) {
	a.setUnready(fmt.Errorf("clickhouse sink not up (attempt %d): %w", attempt, err))
	a.log.WarnContext(ctx, "clickhouse sink not up; waiting for it (nothing is pulled meanwhile)", "attempt", attempt,
		"retry_in", wait, "err", err)
}

// waitSinks tries to bring the sinks up (bringUp) with the sinks' backoff
// until it succeeds, then starts the stream loops; it gives up only on
// sinks that disagree, or when ctx ends (Shutdown).
func (a *Auditor) waitSinks(ctx context.Context, st *startState, wg *sync.WaitGroup) {
	var up *running
	var fatal error
	attempts := 1 // Start's
	ok := backoff(ctx, func() error {
		attempts++
		var err error
		if up, err = a.bringUp(ctx, st); err != nil && !a.waitable(err) {
			fatal = err
			return nil
		}
		return err
	}, func(_ int, wait time.Duration, err error) {
		count(a.in.sinkWaits, 1)
		a.sinkDown(ctx, attempts, wait, err)
	})
	if !ok {
		return
	}
	if fatal != nil {
		a.setUnready(fmt.Errorf("cannot resume from the sinks: %w", fatal))
		a.log.ErrorContext(ctx, "the auditor cannot resume from its sinks and audits nothing; see the runbook, then restart it", "err", fatal)
		return
	}
	a.mu.Lock()
	if ctx.Err() != nil { // Shutdown: it closes the sinks
		a.mu.Unlock()
		return
	}
	a.install(ctx, up)
	a.mu.Unlock()
	a.log.InfoContext(ctx, "clickhouse sink up; auditing", "attempts", attempts, "chains", len(up.w.Heads()))
	a.launch(ctx, wg, up)
}

// drainUnpartitioned acknowledges, as they come, the messages of the
// unpartitioned consumer (Config.Consumer, the topology's auditor
// consumer) on every stream where it exists: nobody reads it while the
// chains are partitioned, and on the interest-retention streams its
// unacknowledged messages would hold everything until the stream's limits
// refuse new events (DiscardNew). Partition 0 does it; the partitions'
// own consumers keep their messages until they are linked. Each drain is
// the shared consume loop (natsbus.ConsumeBatch, with its spans, counters
// and pull backoff) with a handler that acknowledges everything; the
// drains run until stopped.
func (a *Auditor) drainUnpartitioned(ctx context.Context, js jetstream.JetStream) (*drains, error) {
	var conss []jetstream.Consumer
	for _, s := range a.cfg.Streams {
		cons, err := js.Consumer(ctx, s, a.cfg.Consumer)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("drain consumer %s on %s: %w", a.cfg.Consumer, s, err)
		}
		conss = append(conss, cons)
	}
	opts := natsbus.Options{JetStream: js, Source: a.source, Logger: a.log, Telemetry: a.in.p}
	// Counted when handed back to be acknowledged: an ack the server does
	// not confirm shows in natsbus's consume errors, and the message is
	// drained (and counted) again when redelivered.
	ack := func(_ context.Context, msgs []jetstream.Msg, _ []context.Context) []error {
		count(a.in.unlinked, len(msgs), a.in.drained)
		return make([]error, len(msgs))
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d := &drains{cancel: cancel}
	for _, cons := range conss {
		d.wg.Go(func() {
			if err := natsbus.ConsumeBatch(runCtx, cons, ack, opts); err != nil {
				a.log.ErrorContext(runCtx, "drain of the unpartitioned consumer not started", "consumer", a.cfg.Consumer, "err", err)
			}
		})
	}
	return d, nil
}

// drains are the consume loops of drainUnpartitioned.
type drains struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// stop stops the drains and waits until each has stopped (their
// prefetched messages released). A nil *drains has none.
func (d *drains) stop() {
	if d == nil {
		return
	}
	d.cancel()
	d.wg.Wait()
}

// ensurePartitionConsumer creates or updates this partition's durable
// consumer on stream (Config.PartitionConsumer) with the settings of the
// configured consumer, or, when that does not exist, of the topology's
// auditor consumer: no filter, so the partition reads the whole stream
// and picks its chains' messages.
func (a *Auditor) ensurePartitionConsumer(ctx context.Context, js jetstream.JetStream, stream string) error {
	var cc jetstream.ConsumerConfig
	found := false
	if c, err := js.Consumer(ctx, stream, a.cfg.Consumer); err == nil {
		cc, found = c.CachedInfo().Config, true
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("consumer %s on %s: %w", a.cfg.Consumer, stream, err)
	}
	if !found {
		for _, c := range topology.New(a.cfg.Replicas).Consumers {
			if c.Stream == stream && c.Config.Durable == topology.ConsumerAuditor {
				cc, found = c.Config, true
			}
		}
	}
	if !found {
		return fmt.Errorf("consumer %s on %s: %w (and the topology defines no auditor consumer there to copy)",
			a.cfg.Consumer, stream, jetstream.ErrConsumerNotFound)
	}
	name := a.cfg.PartitionConsumer()
	cc.Name, cc.Durable = name, name
	cc.Description = fmt.Sprintf("audit chains of partition %d of %d", a.cfg.Partition, a.cfg.Partitions)
	for k := range cc.Metadata {
		if strings.HasPrefix(k, "_nats.") { // the server's own, set on every request
			delete(cc.Metadata, k)
		}
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, stream, cc); err != nil {
		return fmt.Errorf("ensure consumer %s on %s: %w", name, stream, err)
	}
	return nil
}

// Shutdown stops pulling, lets each stream finish (or, past ctx's
// deadline, give back) the batch in hand, sends a last checkpoint, closes
// the sinks and the connection it opened. It is safe without Start and
// safe to call twice.
func (a *Auditor) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	if !a.state.Stop() {
		a.mu.Unlock()
		return nil
	}
	cancel, done := a.cancel, a.done
	a.mu.Unlock()
	a.setUnready(errors.New("shutting down"))

	cancel()
	a.drains.stop()
	var errs []error
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("auditor: streams did not stop: %w", ctx.Err()))
	}
	a.mu.Lock()
	w, cp, gauges, sinks := a.w, a.cp, a.gauges, a.sinks
	a.mu.Unlock()
	if cp != nil {
		cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if err := cp.emit(cctx); err != nil {
			errs = append(errs, err)
		}
		ccancel()
	}
	if gauges != nil {
		if err := gauges.Unregister(); err != nil {
			errs = append(errs, fmt.Errorf("unregister audit gauges: %w", err))
		}
	}
	if w != nil {
		errs = append(errs, w.Close())
	} else {
		errs = append(errs, sinks.close()) // still waiting for ClickHouse
	}
	// Last, once everything is written: a standby reads the heads after
	// this instance's last write.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	a.leases.release(rctx)
	rcancel()
	a.client.Close()
	a.mu.Lock()
	a.state = lifecycle.Stopped
	a.mu.Unlock()
	a.log.InfoContext(ctx, "auditor stopped")
	return errors.Join(errs...)
}

// leaseLost stops the stream loops at once, committing nothing more: the
// lease of a stream lapsed or was taken (another instance may be writing
// its chains). It runs apart from the renewal that found the loss, which
// Shutdown waits for under a.mu.
func (a *Auditor) leaseLost(err error) {
	go func() {
		a.log.Error("auditor stopped writing: its writer lease is lost; restart it to wait as a standby", "err", err)
		count(a.in.leaseLost, 1)
		a.mu.Lock()
		a.aborting = true
		cancel := a.cancel
		a.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	}()
}

// LoadKey reads an HMAC key file (a final newline is not part of the key);
// an empty path is no key.
func LoadKey(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := regfile.Read(path, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("hmac key: %w", err)
	}
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	if len(b) < 16 {
		return nil, fmt.Errorf("hmac key %s: %d bytes, want at least 16", path, len(b))
	}
	return b, nil
}

// LoadCheckpointKey reads the checkpoint signing key: a PEM PKCS #8
// Ed25519 private key file (openssl genpkey -algorithm ed25519).
func LoadCheckpointKey(path string) (ed25519.PrivateKey, error) {
	b, err := regfile.Read(path, chain.MaxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key: %w", err)
	}
	return chain.ParsePrivateKey(b, path)
}

// LoadCheckpointPublicKey reads the key that checks checkpoints: a PEM
// PKIX Ed25519 public key file, or the private key file.
func LoadCheckpointPublicKey(path string) (ed25519.PublicKey, error) {
	b, err := regfile.Read(path, chain.MaxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("checkpoint public key: %w", err)
	}
	return chain.ParsePublicKey(b, path)
}

// ReadCheckpoints reads every checkpoint in a file of JSON checkpoint
// lines or of a syslog receiver's RFC 5424 messages (chain.ReadCheckpoints:
// from the messages of MSGID checkpoint only), checking each signature
// against pub when pub is not nil; skipped counts the other lines.
func ReadCheckpoints(path string, pub ed25519.PublicKey) (cps []chain.Checkpoint, skipped int, err error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("checkpoints: %w", err)
	}
	defer func() { _ = f.Close() }()
	return chain.ReadCheckpoints(f, path, pub)
}
