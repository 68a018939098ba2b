package notifier

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Config is the notifier's configuration.
type Config struct {
	// ServiceConfig is how to reach NATS and the instance named in the
	// source of the notifier's dead letters (/notifier/<instance>).
	natsbus.ServiceConfig `mapstructure:",squash"`
	// Consumer names the notifier's durable consumers, one on VERDICTS
	// (every verdict) and one on EVIDENCE (runnable.modified only).
	Consumer string `mapstructure:"consumer"`
	// Alertmanager is where the alerts go; Webhooks receive each change
	// too (none by default).
	Alertmanager AlertmanagerConfig `mapstructure:"alertmanager"`
	Webhooks     []WebhookConfig    `mapstructure:"webhooks"`
	// StartTimeout bounds Start; ShutdownTimeout bounds Shutdown.
	StartTimeout    time.Duration `mapstructure:"start_timeout"`
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
}

// AlertmanagerConfig configures the Alertmanager receiver.
type AlertmanagerConfig struct {
	// URL is Alertmanager's base URL.
	URL string `mapstructure:"url"`
	// ResendInterval is how often the firing alerts are sent again (and
	// how soon a failed send is retried); Lease how far ahead their
	// endsAt is: keep it several ResendIntervals, and below
	// Alertmanager's resolve_timeout is not needed (endsAt is always
	// set).
	ResendInterval time.Duration `mapstructure:"resend_interval"`
	Lease          time.Duration `mapstructure:"lease"`
	// Timeout bounds one request.
	Timeout time.Duration `mapstructure:"timeout"`
}

// DefaultConsumer is Config.Consumer's default.
const DefaultConsumer = "notifier"

// NewDefaultConfig returns the defaults.
func NewDefaultConfig() Config {
	return Config{
		ServiceConfig: natsbus.NewDefaultServiceConfig(),
		Consumer:      DefaultConsumer,
		Alertmanager:  AlertmanagerConfig{ResendInterval: time.Minute, Lease: 5 * time.Minute, Timeout: 10 * time.Second},
		StartTimeout:  time.Minute, ShutdownTimeout: 20 * time.Second,
	}
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if err := c.ServiceConfig.Validate(); err != nil {
		return err
	}
	a := c.Alertmanager
	switch {
	case c.Consumer == "":
		return config.Invalidf("consumer: empty")
	case a.URL == "":
		return config.Invalidf("alertmanager.url: empty")
	case a.ResendInterval <= 0 || a.Timeout <= 0:
		return config.Invalidf("alertmanager.resend_interval and alertmanager.timeout must be above 0")
	case a.Lease < 2*a.ResendInterval:
		return config.Invalidf("alertmanager.lease %s: want at least twice resend_interval (%s), or firing alerts resolve between two sends", a.Lease, a.ResendInterval)
	case c.StartTimeout <= 0 || c.ShutdownTimeout <= 0:
		return config.Invalidf("start_timeout and shutdown_timeout must be above 0")
	}
	if u, err := url.Parse(a.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return config.Invalidf("alertmanager.url %q: want http(s)://host[:port]", a.URL)
	}
	names := map[string]bool{}
	for _, w := range c.Webhooks {
		if err := w.Validate(); err != nil {
			return config.Invalidf("webhooks: %v", err)
		}
		if names[w.Name] {
			return config.Invalidf("webhooks: %s named twice", w.Name)
		}
		names[w.Name] = true
	}
	return nil
}

// Settings are what the notifier is given besides its configuration.
type Settings struct {
	// Logger logs the start, stop and failed sends (never a line per
	// message); nil discards.
	Logger *slog.Logger
	// Conn, when set, is used instead of connecting as Config.NATS says;
	// the notifier never closes it.
	Conn *nats.Conn
	// Telemetry receives natsbus's consume counters; zero fields mean the
	// OpenTelemetry globals.
	Telemetry telemetry.Providers
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Notifier consumes verdicts and runnable.modified events and keeps
// Alertmanager's alerts in step (package documentation). It is a
// lifecycle component: New, Start, Shutdown.
type Notifier struct {
	cfg    Config
	set    Settings
	log    *slog.Logger
	source string
	alerts *Alerts
	outbox *outbox
	hooks  []*receiver
	am     *Alertmanager
	kick   chan struct{}
	in     *instruments
	// undecodable counts the events that did not decode.
	undecodable atomic.Uint64

	kv     jetstream.KeyValue // the alerts bucket
	conn   *nats.Conn         // closed at Shutdown when the notifier opened it
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New checks cfg and returns a notifier; Start connects.
func New(cfg Config, set Settings) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("notifier: %w", err)
	}
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	if set.Now == nil {
		set.Now = time.Now
	}
	return &Notifier{cfg: cfg, set: set, log: set.Logger, source: events.Source("notifier", cfg.Instance), alerts: NewAlerts(), outbox: newOutbox(),
		am:   &Alertmanager{URL: cfg.Alertmanager.URL, Lease: cfg.Alertmanager.Lease, Client: &http.Client{Timeout: cfg.Alertmanager.Timeout}},
		kick: make(chan struct{}, 1), in: newInstruments(set.Telemetry)}, nil
}

// Alerts is the notifier's alert state.
func (n *Notifier) Alerts() *Alerts { return n.alerts }

// Undecodable counts the events that did not decode.
func (n *Notifier) Undecodable() uint64 { return n.undecodable.Load() }

// Start connects, ensures the notifier's consumers and starts consuming
// and sending; it returns once both consumers exist.
func (n *Notifier) Start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.StartTimeout)
	defer cancel()
	n.hooks = n.hooks[:0]
	for _, w := range n.cfg.Webhooks {
		r, err := newReceiver(w)
		if err != nil {
			return fmt.Errorf("notifier: %w", err)
		}
		n.hooks = append(n.hooks, r)
	}
	conn := n.set.Conn
	if conn == nil {
		c, err := natsbus.Connect(n.cfg.NATS, "runtimetruth-notifier")
		if err != nil {
			return fmt.Errorf("notifier: %w", err)
		}
		conn, n.conn = c, c
	}
	js, err := jetstream.New(conn)
	if err != nil {
		return fmt.Errorf("notifier: %w", err)
	}
	if n.kv, err = js.CreateOrUpdateKeyValue(ctx, alertsBucket(n.cfg.Replicas)); err != nil {
		n.closeConn()
		return fmt.Errorf("notifier: %s bucket: %w", BucketAlerts, err)
	}
	skipped, err := n.load(ctx)
	if err != nil {
		n.closeConn()
		return fmt.Errorf("notifier: %w", err)
	}
	if skipped > 0 {
		n.log.WarnContext(ctx, "notifier: stored alerts that do not read were skipped", "skipped", skipped)
	}
	var cons []jetstream.Consumer
	for _, s := range []struct{ stream, filter string }{
		{topology.StreamVerdicts, events.FilterVerdict}, {topology.StreamEvidence, events.FilterIntegrity},
	} {
		c, err := js.CreateOrUpdateConsumer(ctx, s.stream, jetstream.ConsumerConfig{
			Durable: n.cfg.Consumer, Description: "alerts from verdicts and runnable.modified",
			DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy, AckWait: topology.AckWait,
			MaxDeliver: topology.VerifierMaxDeliver, MaxAckPending: topology.MaxAckPending, FilterSubject: s.filter,
			Replicas: n.cfg.Replicas,
		})
		if err != nil {
			n.closeConn()
			return fmt.Errorf("notifier: consumer %s on %s: %w", n.cfg.Consumer, s.stream, err)
		}
		cons = append(cons, c)
	}
	runCtx, stop := context.WithCancel(context.Background())
	n.cancel = stop
	opts := natsbus.Options{JetStream: js, Source: n.source, Logger: n.log, Telemetry: n.set.Telemetry}
	for _, c := range cons {
		n.wg.Go(func() {
			if err := natsbus.Consume(runCtx, c, n.handle, opts); err != nil {
				n.log.Error("notifier: consume", "err", err)
			}
		})
	}
	n.wg.Go(func() { n.toAlertmanager(runCtx) })
	for _, r := range n.hooks {
		n.wg.Go(func() { n.deliver(runCtx, r) })
	}
	n.log.InfoContext(ctx, "notifier started", "consumer", n.cfg.Consumer, "alertmanager", n.cfg.Alertmanager.URL)
	return nil
}

// handle applies one event to the alerts. An event that does not decode
// changes no alert and is acknowledged: the auditor records it (rejected)
// and the notifier, which may publish nothing, counts it.
//
// What it changed is stored before the event is acknowledged; a store
// that fails leaves the event to be delivered again, and the change,
// kept as unsaved, is stored then.
func (n *Notifier) handle(ctx context.Context, m jetstream.Msg) error {
	e, p, err := binding.Read[events.Payload](m)
	if err != nil {
		n.undecodable.Add(1)
		n.in.undecodable.Add(ctx, 1)
		return nil
	}
	ch := n.alerts.Observe(p, e.ID(), e.Time())
	n.in.alerts.Add(ctx, int64(ch.Fired()), n.in.fired)
	n.in.alerts.Add(ctx, int64(ch.Resolved()), n.in.resolved)
	for _, r := range n.hooks {
		for _, a := range ch.Alerts {
			if !r.cfg.routes(a) {
				continue
			}
			if !n.outbox.add(r.cfg.Name, r.cfg.GroupBy, a, n.set.Now()) {
				n.in.webhookDropped.Add(ctx, 1)
			}
		}
	}
	if ch.Any() {
		select {
		case n.kick <- struct{}{}:
		default:
		}
	}
	return n.save(ctx)
}

// toAlertmanager posts the pending alerts when they change and every
// ResendInterval, until ctx ends.
func (n *Notifier) toAlertmanager(ctx context.Context) {
	t := time.NewTicker(n.cfg.Alertmanager.ResendInterval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.kick:
		}
		pending := n.alerts.Pending()
		if failing && len(pending) > 0 {
			n.in.retried.Add(ctx, 1)
		}
		err := n.am.Post(ctx, pending, n.set.Now())
		if err != nil && ctx.Err() == nil {
			n.in.failed.Add(ctx, 1)
		}
		switch {
		case err == nil:
			n.in.sent.Add(ctx, int64(len(pending)))
			n.alerts.Sent(pending)
			if err := n.save(ctx); err != nil && ctx.Err() == nil {
				n.log.Warn("notifier: store the alerts", "err", err) // stored with the next change or send
			}
			if failing {
				n.log.Info("notifier: alertmanager reachable again")
			}
			failing = false
		case ctx.Err() != nil:
			return
		case !failing: // one line per outage, not per attempt
			n.log.Warn("notifier: alertmanager", "err", err, "alerts", len(pending))
			failing = true
		}
	}
}

// Shutdown stops consuming and sending and waits for both.
func (n *Notifier) Shutdown(ctx context.Context) error {
	if n.cancel != nil {
		n.cancel()
	}
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("notifier: shutdown: %w", ctx.Err())
	}
	n.closeConn()
	return nil
}

func (n *Notifier) closeConn() {
	if n.conn != nil {
		n.conn.Close()
		n.conn = nil
	}
}
