package verifier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sigstore/sigstore-go/pkg/root"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Settings carries the verifier's dependencies.
type Settings struct {
	// Logger receives the start and stop lines (never one per message);
	// nil discards.
	Logger *slog.Logger
	// Conn, when set, is used instead of connecting as Config.NATS says
	// (the embedded mode of `runtimetruth up`); the verifier never closes
	// it.
	Conn *nats.Conn
	// TrustedMaterial verifies the attestations of baselines that name a
	// required identity (a Sigstore trusted root); nil means the one of
	// Config.Attestation.TrustedRootFile, and without either such
	// baselines get error verdicts.
	TrustedMaterial root.TrustedMaterial
	// Telemetry receives the spans (one per evidence message, a child of
	// the collector's; one per verdict published, a child of that) and the
	// metrics (natsbus's consume and publish counters and the Metric
	// constants of this package); zero fields mean the OpenTelemetry
	// globals.
	Telemetry telemetry.Providers
}

// Batching of the consume loop (natsbus.ConsumeBatch).
const (
	// maxBatch bounds the snapshots one worker handles together: their
	// latest-record writes and baseline reads are made once per key, their
	// verdicts published without waiting on each in turn.
	maxBatch = 64
	// prefetch is how many messages are pulled ahead of the workers; with
	// the batches in hand it stays within the consumer's MaxAckPending.
	prefetch = topology.MaxAckPending / 2
	// hostRetries bounds a host's evidence waiting for a retry
	// (natsbus.Options.TenantRetries): a sixteenth of the consumer's
	// window, which every host shares; a retryable failure beyond it is
	// dead-lettered, so one host's failing evidence never holds the
	// window for the others.
	hostRetries = topology.MaxAckPending / 16
)

// hostOf is the host token of an evidence message's subject
// (rt.evidence.<host>.<kind>): the tenant of the verifier's retry budget.
func hostOf(m jetstream.Msg) string { return events.HostToken(m.Subject()) }

// Verifier verifies every evidence snapshot against its target's baseline
// and publishes one verdict per snapshot. It is a lifecycle component:
// New, Start, Shutdown.
type Verifier struct {
	cfg    Config
	log    *slog.Logger
	source string
	conn   *nats.Conn
	attest *attestation.Checker
	tel    telemetry.Providers
	m      *metrics
	duties *health.Duties

	mu      sync.Mutex
	state   lifecycle.State
	client  *natsbus.Client
	cancel  context.CancelFunc
	done    chan struct{}
	handler *handler
}

// ErrShutdown is returned by Start after Shutdown.
var ErrShutdown = errors.New("verifier shut down")

// New checks cfg and returns a verifier; it connects nowhere until Start.
func New(cfg Config, set Settings) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := lifecycle.Logger(set.Logger)
	instance := lifecycle.Instance(cfg.Instance)
	trusted := set.TrustedMaterial
	if trusted == nil && cfg.Attestation.TrustedRootFile != "" {
		tr, err := attestation.LoadTrustedRoot(cfg.Attestation.TrustedRootFile)
		if err != nil {
			return nil, err
		}
		trusted = tr
	}
	return &Verifier{cfg: cfg, log: log, source: events.Source("verifier", instance), conn: set.Conn,
		attest: attestation.NewChecker(trusted, attestation.CheckerOptions{Telemetry: set.Telemetry}),
		tel:    set.Telemetry, m: newMetrics(set.Telemetry), duties: health.NewDuties(set.Telemetry.Meter(ScopeName))}, nil
}

// Name names the component in logs.
func (v *Verifier) Name() string { return "verifier" }

// Start connects (unless Settings.Conn is set; a server not up yet is
// waited for), ensures the streams, consumers and buckets (Topology), and
// starts verifying in the background. It returns within
// Config.StartTimeout.
func (v *Verifier) Start(ctx context.Context) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.state.CanStart(ErrShutdown); err != nil {
		return err
	}
	// An unreachable server is retried in the background until prepare's
	// start timeout; a refused one fails here.
	c, err := natsbus.OpenClient(v.cfg.NATS, "runtimetruth-verifier", v.conn, v.log, v.tel)
	if err != nil {
		return err
	}
	h, cons, err := v.prepare(ctx, c)
	if err != nil {
		if c.Owned() {
			if !c.Conn.IsConnected() {
				err = fmt.Errorf("connect to NATS: no server reached within start_timeout %s: %w", v.cfg.StartTimeout, err)
			}
			c.Close()
		}
		return err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	var silence sync.WaitGroup
	silence.Go(func() {
		newStaleWatch(h.verdicts.kv, h.pub, v.source, v.cfg.StaleAfter, v.m, v.log).run(runCtx, v.duties)
	})
	silence.Go(func() { h.verdicts.keepConfirming(runCtx, h.js) })
	if h.auth != nil {
		view := newHostsView(h.auth.hosts.kv, v.log)
		h.auth.hosts.view = view
		silence.Go(func() { view.run(runCtx, v.duties) })
	}
	go func() {
		defer close(done)
		defer silence.Wait()
		err := natsbus.ConsumeBatch(runCtx, cons, h.handleBatch, natsbus.Options{
			JetStream: h.js, Source: v.source, Concurrency: v.cfg.Concurrency, MaxBatch: maxBatch, Prefetch: prefetch,
			HandlerTimeout: v.cfg.HandlerTimeout, Logger: v.log, Telemetry: v.tel,
			Tenant: hostOf, TenantRetries: hostRetries, Duties: v.duties,
		})
		if err != nil {
			v.log.ErrorContext(runCtx, "consume evidence", "err", err)
		}
		// The confirmations of the last batches (handler.confirmLater).
		fctx, cancel := context.WithTimeout(context.WithoutCancel(runCtx), natsbus.DefaultAckTimeout)
		defer cancel()
		h.verdicts.flushConfirmed(fctx, h.js, time.Now())
	}()
	v.state, v.client, v.cancel, v.done, v.handler = lifecycle.Running, c, cancel, done, h
	v.log.InfoContext(ctx, "verifier started", "source", v.source, "consumer", v.cfg.Consumer,
		"replicas", v.cfg.Replicas, "concurrency", v.cfg.Concurrency)
	return nil
}

func (v *Verifier) prepare(ctx context.Context, c *natsbus.Client) (*handler, jetstream.Consumer, error) {
	ctx, cancel := context.WithTimeout(ctx, v.cfg.StartTimeout)
	defer cancel()
	js := c.JS
	if err := c.Ensure(ctx, Topology(v.cfg.Replicas, v.cfg.Consumer)); err != nil {
		return nil, nil, err
	}
	cons, err := js.Consumer(ctx, topology.StreamEvidence, v.cfg.Consumer)
	if err != nil {
		return nil, nil, fmt.Errorf("consumer %s: %w", v.cfg.Consumer, err)
	}
	h, err := newHandler(ctx, js, c.Pub, v.m, v.source, v.attest)
	if err != nil {
		return nil, nil, err
	}
	if mode := Enrollment(v.cfg.Enrollment); mode != EnrollOff {
		kv, err := js.KeyValue(ctx, topology.BucketHosts)
		if err != nil {
			return nil, nil, fmt.Errorf("%s bucket: %w", topology.BucketHosts, err)
		}
		h.auth = &authenticator{hosts: NewHosts(kv, mode).Announcing(js, v.source), keys: newExpandedKeys(), skew: v.cfg.MaxClockSkew, now: time.Now, tel: v.m}
	}
	return h, cons, nil
}

// Ready reports whether the verifier's periodic duties run (health.Checker:
// /readyz answers 503 naming a failing one): the silence sweep
// (DutySilence), the registry's view (DutyRegistry) and dead-lettering
// (natsbus.DutyDeadLetters: the DLQ stream full).
func (v *Verifier) Ready(ctx context.Context) error { return v.duties.Ready(ctx) }

// ViewRevision is the revision of host's record that the running
// verifier's view of the host registry holds (0: none, or enrollment
// off): a change to the record (host revoke, approve, rotate) takes
// effect for evidence the verifier takes once this reaches the record's
// revision after the change, usually within milliseconds.
func (v *Verifier) ViewRevision(host string) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.handler == nil || v.handler.auth == nil || v.handler.auth.hosts.view == nil {
		return 0
	}
	return v.handler.auth.hosts.view.revision(host)
}

// Shutdown stops pulling, finishes the snapshots in hand, hands the
// prefetched ones back to the stream for another instance, and closes the
// connection it opened. It is safe without Start and safe to call twice;
// it returns ctx's error if the snapshots in hand are not finished in time.
func (v *Verifier) Shutdown(ctx context.Context) error {
	v.mu.Lock()
	if !v.state.Stop() {
		v.mu.Unlock()
		return nil
	}
	cancel, done, c := v.cancel, v.done, v.client
	v.mu.Unlock()

	cancel()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("drain verifier: %w", ctx.Err())
	}
	// The releases (naks) are buffered: send them before leaving.
	if ferr := c.Conn.FlushTimeout(time.Second); ferr != nil && !errors.Is(ferr, nats.ErrConnectionClosed) {
		err = errors.Join(err, fmt.Errorf("flush: %w", ferr))
	}
	if c.Owned() {
		c.Close() // also ends handlers still running after a timeout
		if err != nil {
			<-done
		}
	}
	v.mu.Lock()
	v.state = lifecycle.Stopped
	v.mu.Unlock()
	v.log.InfoContext(ctx, "verifier stopped")
	return err
}
