package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/metric"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/spool"
)

// Errors of the collector API; check them with errors.Is.
var (
	// ErrUnknownTarget means no configured target has the name.
	ErrUnknownTarget = errors.New("unknown target")
	// ErrNotRunning means the collector is not started, or shut down.
	ErrNotRunning = errors.New("collector not running")
	// ErrCollectionFailed means a collection failed; its collection.failed
	// event was spooled.
	ErrCollectionFailed = errors.New("collection failed")
	// ErrSpoolFull means the spool refused a collection's events.
	ErrSpoolFull = errors.New("spool full: event refused")
)

// Settings are what code, not configuration, hands the collector.
type Settings struct {
	// Logger receives the collector's logs; nil discards them.
	Logger *slog.Logger
	// Conn, when set, is used instead of connecting with Config.NATS
	// (embedded mode); the collector never closes it.
	Conn *nats.Conn
	// Telemetry receives a span per collection (its context travels in
	// the collection's events) and per publish, and the metrics (the
	// Metric constants, and natsbus's published and publish_errors); zero
	// fields mean the OpenTelemetry globals.
	Telemetry telemetry.Providers
}

// Collector collects its targets on their intervals and delivers the
// events through its spool. Build it with New; it follows the lifecycle
// contract (Start returns quickly, Shutdown drains).
type Collector struct {
	cfg    Config
	log    *slog.Logger
	ext    *nats.Conn
	source string
	// controlSubject is CollectNowSubject(cfg.Host): the one control
	// subject the collector subscribes to and answers on.
	controlSubject string
	signer         *dsse.Signer // set by Start, before any collection
	targets        []*target
	byName         map[string]*target
	tel            telemetry.Providers
	in             *instruments

	// onSpooled, when set (tests), sees the ids of each spooled batch.
	onSpooled func(ids []string)

	mu         sync.Mutex
	state      lifecycle.State
	client     *natsbus.Client
	pub        *natsbus.Publisher
	spool      *spool.Spool
	gauges     metric.Registration
	sub        *nats.Subscription
	stopLoops  context.CancelFunc
	workCtx    context.Context
	stopWork   context.CancelFunc
	stopSender context.CancelFunc
	loops      sync.WaitGroup
	inflight   sync.WaitGroup
	senderDone chan struct{}
	full       atomic.Bool
}

// target is one configured target and its collection state.
type target struct {
	cfg TargetConfig

	mu     sync.Mutex // one collection at a time
	failed bool       // the last collection failed (for logging transitions)
	store  *integrity.Store
}

// New checks cfg and builds a collector; it does no I/O.
func New(cfg Config, set Settings) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := set.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Collector{
		cfg:            cfg,
		log:            log.With("component", "collector", "host", cfg.Host),
		ext:            set.Conn,
		source:         events.Source("collector", cfg.Host),
		controlSubject: CollectNowSubject(cfg.Host),
		byName:         map[string]*target{},
		tel:            set.Telemetry,
		in:             newInstruments(set.Telemetry),
	}
	for _, tc := range cfg.Targets {
		t := &target{cfg: tc}
		c.targets = append(c.targets, t)
		c.byName[tc.Name] = t
	}
	return c, nil
}

// Name names the component in lifecycle logs.
func (c *Collector) Name() string { return "collector" }

// CollectNowSubject is the request-reply subject of a host's collector:
// rt.ctl.collect.<host>. It lies outside every stream's subjects (a
// request to a stream subject would be stored and answered by JetStream).
func CollectNowSubject(host string) string { return events.CollectNowSubject(host) }

// Start loads the collector's signing identity (LoadIdentity: generated on
// first start), opens the spool, connects (unless Settings.Conn is given),
// subscribes to CollectNowSubject and starts the sender and one goroutine
// per target, whose first collection runs at once. It returns without
// waiting for NATS: events wait in the spool until it is reachable.
func (c *Collector) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != lifecycle.New {
		return fmt.Errorf("start: %w (already started)", ErrNotRunning)
	}
	id, err := LoadIdentity(c.cfg)
	if err != nil {
		return err
	}
	c.signer = id.Signer()
	c.log.Info("signing events", "key_id", id.KeyID(), "key_file", id.KeyFile)
	sp, err := spool.Open(c.cfg.SpoolDir(), spool.Options{
		MaxBytes:     c.cfg.Spool.MaxBytes,
		MaxEvents:    c.cfg.Spool.MaxEvents,
		SegmentBytes: min(spool.DefaultSegmentBytes, max(c.cfg.Spool.MaxBytes/8, 1<<20)),
	})
	if err != nil {
		return err
	}
	for _, r := range sp.Recovered() {
		c.in.recovered.Add(ctx, r.Bytes)
		c.log.Warn("spool damage cut on open", "segment", r.Segment, "offset", r.Offset, "bytes", r.Bytes, "reason", r.Reason)
	}
	cl, err := natsbus.OpenClient(c.cfg.NATS, "runtimetruth-collector/"+c.cfg.Host, c.ext, c.log, c.tel)
	if err != nil {
		_ = sp.Close()
		return err
	}
	if c.sub, err = cl.Conn.Subscribe(c.controlSubject, c.handleControl); err != nil {
		cl.Close()
		_ = sp.Close()
		return fmt.Errorf("start collector: %w", err)
	}
	c.client, c.pub, c.spool = cl, cl.Pub, sp
	if c.gauges, err = c.in.observeSpool(func() (int, int64, bool) {
		n, b := sp.Pending()
		return n, b, true
	}); err != nil {
		c.log.Warn("spool gauges not registered", "err", err)
	}

	base := context.WithoutCancel(ctx)
	var loopCtx, sendCtx context.Context
	loopCtx, c.stopLoops = context.WithCancel(base)
	c.workCtx, c.stopWork = context.WithCancel(base)
	sendCtx, c.stopSender = context.WithCancel(base)
	c.senderDone = make(chan struct{})
	go c.send(sendCtx)
	for _, t := range c.targets {
		c.loops.Add(1)
		go c.loop(loopCtx, t)
	}
	c.state = lifecycle.Running
	pending, _ := sp.Pending()
	c.log.Info("collector started", "targets", len(c.targets), "spool", sp.Dir(), "spool_pending", pending,
		"control_subject", c.controlSubject)
	return nil
}

// loop collects t now and then every interval, with ±10% jitter so that
// collectors started together drift apart.
func (c *Collector) loop(ctx context.Context, t *target) {
	defer c.loops.Done()
	interval := t.cfg.interval()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		_, _ = c.run(t, interval)
		timer.Reset(jitter(interval))
	}
}

func jitter(d time.Duration) time.Duration {
	spread := d / 5
	if spread <= 0 {
		return d
	}
	return d - spread/2 + rand.N(spread)
}

// run collects t unless the collector is stopping.
func (c *Collector) run(t *target, interval time.Duration) (Result, error) {
	c.mu.Lock()
	if c.state != lifecycle.Running {
		c.mu.Unlock()
		return Result{Target: t.cfg.Name, Kind: t.cfg.Kind}, ErrNotRunning
	}
	c.inflight.Add(1)
	ctx := c.workCtx
	c.mu.Unlock()
	defer c.inflight.Done()
	return c.collect(ctx, t, interval)
}

// CollectNow collects the named target at once (every target when name is
// empty) and returns when its events are in the spool, or when ctx ends
// (the collection then finishes in the background). It returns an error
// wrapping ErrCollectionFailed when a collection failed (its
// collection.failed event is spooled), ErrSpoolFull when the spool refused
// the events, ErrUnknownTarget for a name not configured.
func (c *Collector) CollectNow(ctx context.Context, name string) error {
	_, err := c.collectNow(ctx, name)
	return err
}

func (c *Collector) collectNow(ctx context.Context, name string) ([]Result, error) {
	var ts []*target
	if name == "" {
		ts = c.targets
	} else if t, ok := c.byName[name]; ok {
		ts = []*target{t}
	} else {
		return nil, fmt.Errorf("%w %q", ErrUnknownTarget, name)
	}
	results := make([]Result, len(ts))
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		// Its evidence carries the target's interval: the regular
		// collections go on, and silence after this one is still found.
		wg.Go(func() { results[i], errs[i] = c.run(t, t.cfg.interval()) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return results, errors.Join(errs...)
	case <-ctx.Done():
		return nil, context.Cause(ctx) // the collections finish in the background
	}
}

// Shutdown stops scheduling, lets in-flight collections finish (cancelling
// them when ctx ends first), waits for the spool to be delivered within
// ctx, then stops the sender and closes the spool and its own connection.
// Events not delivered by then stay in the spool for the next start. Safe
// without Start and safe to call twice.
func (c *Collector) Shutdown(ctx context.Context) error {
	c.mu.Lock()
	if !c.state.Stop() {
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()

	var errs []error
	if err := c.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		errs = append(errs, fmt.Errorf("unsubscribe %s: %w", c.sub.Subject, err))
	}
	c.stopLoops()
	idle := make(chan struct{})
	go func() {
		c.inflight.Wait()
		c.loops.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-ctx.Done():
		c.log.Warn("cancelling in-flight collections", "cause", context.Cause(ctx))
		c.stopWork()
		<-idle // sources honour cancellation: subprocesses are killed
	}
	c.stopWork()

	if err := c.spool.WaitEmpty(ctx); err != nil {
		n, b := c.spool.Pending()
		c.log.Warn("undelivered events stay in the spool", "events", n, "bytes", b, "cause", err)
	}
	c.stopSender()
	<-c.senderDone
	if c.gauges != nil {
		if err := c.gauges.Unregister(); err != nil {
			errs = append(errs, fmt.Errorf("unregister spool gauges: %w", err))
		}
	}
	if err := c.spool.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close spool: %w", err))
	}
	c.client.Close()
	c.mu.Lock()
	c.state = lifecycle.Stopped
	c.mu.Unlock()
	c.log.Info("collector stopped")
	return errors.Join(errs...)
}
