package attestor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
	"github.com/runtimetruth/runtimetruth/pkg/platform/eventtrace"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Settings carries the attestor's dependencies.
type Settings struct {
	// Logger receives the start and stop lines and one line per failed
	// request (never a key, password or token); nil discards.
	Logger *slog.Logger
	// Conn, when set, is used instead of connecting as Config.NATS says;
	// the attestor never closes it.
	Conn *nats.Conn
	// Signer, when set, replaces the signer Config.Signing describes.
	Signer attestation.Signer
	// Telemetry receives a span per sign request (the parent of the
	// attestation event's publish span, whose context the event carries)
	// and the metrics (MetricSignatures, MetricSignFailures, natsbus's
	// published and publish_errors); zero fields mean the OpenTelemetry
	// globals.
	Telemetry telemetry.Providers
}

// SignRequest is the JSON request on the sign subject: sign the baseline
// of Target as stored in the baselines bucket.
type SignRequest struct {
	Target events.Target `json:"target"`
	// Digest, when set, is the baseline digest the requester reviewed:
	// the attestor refuses to sign any other.
	Digest string `json:"digest,omitempty"`
}

// SignReply is the JSON reply: what was signed, stored and announced, or
// Error.
type SignReply struct {
	Target events.Target `json:"target"`
	// BaselineDigest, StatementDigest and BundleDigest identify what was
	// signed (sha256:<hex>).
	BaselineDigest  string `json:"baseline_digest,omitempty"`
	StatementDigest string `json:"statement_digest,omitempty"`
	BundleDigest    string `json:"bundle_digest,omitempty"`
	// CertificateIdentity and OIDCIssuer name a keyless signer, KeyHint a
	// key.
	CertificateIdentity string `json:"certificate_identity,omitempty"`
	OIDCIssuer          string `json:"oidc_issuer,omitempty"`
	KeyHint             string `json:"key_hint,omitempty"`
	// Key and Revision locate the stored attestation in the baselines
	// bucket.
	Key      string `json:"key,omitempty"`
	Revision uint64 `json:"revision,omitempty"`
	// EventID is the id of the attestation.created event.
	EventID string `json:"event_id,omitempty"`
	// Error says why nothing, or not everything, was done.
	Error string `json:"error,omitempty"`
}

// Errors of the attestor.
var (
	// ErrShutdown is returned by Start after Shutdown, and answered to
	// requests that arrive while shutting down.
	ErrShutdown = errors.New("attestor shut down")
	// ErrBaseline: the stored baseline is missing, unreadable, or not the
	// one the request names.
	ErrBaseline = errors.New("cannot sign baseline")
	// ErrNotAnnounced: the attestation was stored, but its event could not
	// be published.
	ErrNotAnnounced = errors.New("attestation stored but not announced")
)

// Attestor answers sign requests: it signs the stored baseline of a
// target, stores the statement and bundle next to it in the baselines
// bucket (events.AttestationKey) and publishes an attestation.created
// event. It is a lifecycle component: New, Start, Shutdown.
type Attestor struct {
	cfg    Config
	log    *slog.Logger
	source string
	conn   *nats.Conn
	signer attestation.Signer
	in     *instruments

	mu     sync.Mutex
	state  lifecycle.State
	client *natsbus.Client
	sub    *nats.Subscription
	kv     jetstream.KeyValue
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{}
	wg     sync.WaitGroup
}

// New checks cfg, loads the signing key (mode key) and returns an attestor;
// it connects nowhere until Start.
func New(cfg Config, set Settings) (*Attestor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := lifecycle.Logger(set.Logger)
	instance := lifecycle.Instance(cfg.Instance)
	signer := set.Signer
	if signer == nil {
		var err error
		if signer, err = newSigner(cfg.Signing); err != nil {
			return nil, err
		}
	}
	a := &Attestor{
		cfg: cfg, log: log, source: events.Source("attestor", instance), conn: set.Conn, signer: signer,
		slots: make(chan struct{}, cfg.Concurrency),
	}
	a.in = newInstruments(set.Telemetry, a.mode())
	return a, nil
}

// newSigner builds the configured signer. Errors name files, never their
// content.
func newSigner(s SigningConfig) (attestation.Signer, error) {
	if s.Mode == ModeKey {
		data, err := os.ReadFile(s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
		var password []byte
		if s.KeyPasswordFile != "" {
			p, err := os.ReadFile(s.KeyPasswordFile)
			if err != nil {
				return nil, fmt.Errorf("signing key password: %w", err)
			}
			password = bytes.TrimRight(p, "\r\n")
		}
		key, err := attestation.LoadPrivateKey(data, password)
		if err != nil {
			return nil, fmt.Errorf("signing key %s: %w", s.KeyFile, err)
		}
		return attestation.NewKeySigner(key)
	}
	kc := attestation.KeylessConfig{FulcioURL: s.FulcioURL, RekorURL: s.RekorURL, TSAURL: s.TSAURL, Timeout: s.Timeout}
	if s.TrustedRootFile != "" {
		tr, err := attestation.LoadTrustedRoot(s.TrustedRootFile)
		if err != nil {
			return nil, err
		}
		kc.TrustedRoot = tr
	}
	path := s.IdentityTokenFile
	return attestation.NewKeylessSigner(kc, func(context.Context) (string, error) {
		data, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("identity token: %w", err)
		}
		return strings.TrimSpace(string(data)), nil
	})
}

// Name names the component in logs.
func (a *Attestor) Name() string { return "attestor" }

// Start connects (unless Settings.Conn is set), ensures the BASELINES
// stream and the baselines bucket, and subscribes to sign requests.
func (a *Attestor) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.state.CanStart(ErrShutdown); err != nil {
		return err
	}
	c, err := natsbus.OpenClient(a.cfg.NATS, "runtimetruth-attestor", a.conn, a.log, a.in.p)
	if err != nil {
		return err
	}
	kv, err := a.prepare(ctx, c)
	if err != nil {
		c.Close()
		return err
	}
	a.client, a.kv = c, kv
	a.ctx, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	sub, err := c.Conn.QueueSubscribe(a.cfg.Subject, a.cfg.QueueGroup, a.handle)
	if err == nil {
		if err = c.Conn.FlushTimeout(a.cfg.StartTimeout); err != nil {
			_ = sub.Unsubscribe()
		}
	}
	if err != nil {
		a.cancel()
		c.Close()
		return fmt.Errorf("subscribe %s: %w", a.cfg.Subject, err)
	}
	a.sub, a.state = sub, lifecycle.Running
	a.log.InfoContext(ctx, "attestor started", "source", a.source, "subject", a.cfg.Subject,
		"queue_group", a.cfg.QueueGroup, "mode", a.mode())
	return nil
}

func (a *Attestor) mode() string {
	switch a.signer.(type) {
	case *attestation.KeySigner:
		return ModeKey
	case *attestation.KeylessSigner:
		return ModeKeyless
	}
	return "custom"
}

// Topology returns what the attestor ensures: the BASELINES stream (where
// attestation.created events go) and the baselines bucket, of
// topology.New(replicas).
func Topology(replicas int) topology.Topology {
	all := topology.New(replicas)
	var t topology.Topology
	for _, s := range all.Streams {
		if s.Name == topology.StreamBaselines {
			t.Streams = append(t.Streams, s)
		}
	}
	for _, b := range all.Buckets {
		if b.Bucket == topology.BucketBaselines {
			t.Buckets = append(t.Buckets, b)
		}
	}
	return t
}

func (a *Attestor) prepare(ctx context.Context, c *natsbus.Client) (jetstream.KeyValue, error) {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.StartTimeout)
	defer cancel()
	if err := c.Ensure(ctx, Topology(a.cfg.Replicas)); err != nil {
		return nil, err
	}
	kv, err := c.JS.KeyValue(ctx, topology.BucketBaselines)
	if err != nil {
		return nil, fmt.Errorf("baselines bucket: %w", err)
	}
	return kv, nil
}

// handle runs on the subscription's goroutine: it takes a slot (waiting
// while Concurrency requests are in hand) and signs in the background.
func (a *Attestor) handle(m *nats.Msg) {
	a.in.received(context.Background())
	a.mu.Lock()
	stopped := a.state != lifecycle.Running
	if !stopped {
		a.wg.Add(1)
	}
	a.mu.Unlock()
	if stopped {
		a.reply(m, SignReply{Error: ErrShutdown.Error()})
		return
	}
	select {
	case a.slots <- struct{}{}:
	case <-a.ctx.Done():
		a.wg.Done()
		a.reply(m, SignReply{Error: ErrShutdown.Error()})
		return
	}
	go func() {
		defer func() { <-a.slots; a.wg.Done() }()
		ctx, cancel := context.WithTimeout(a.ctx, a.cfg.RequestTimeout)
		defer cancel()
		ctx, span := a.in.startRequest(ctx, m)
		var req SignRequest
		rep := SignReply{}
		err := strictjson.Decode(m.Data, &req)
		if err != nil {
			err = fmt.Errorf("%w: %w", errInvalidRequest, err)
		} else {
			rep, err = a.Sign(ctx, req)
		}
		if err != nil {
			rep.Target, rep.Error = req.Target, err.Error()
			a.log.WarnContext(ctx, "sign request failed", "target", req.Target.String(), "err", err)
		}
		a.in.endRequest(ctx, span, req.Target, err)
		a.reply(m, rep)
	}()
}

func (a *Attestor) reply(m *nats.Msg, rep SignReply) {
	if m.Reply == "" {
		return
	}
	data, err := json.Marshal(rep)
	if err == nil {
		err = m.Respond(data)
	}
	if err != nil {
		a.log.Warn("sign reply failed", "err", err)
	}
}

// Sign signs the stored baseline of req.Target, stores the attestation next
// to it and announces it. It is what a sign request runs; Start is needed
// first.
func (a *Attestor) Sign(ctx context.Context, req SignRequest) (SignReply, error) {
	rep := SignReply{Target: req.Target}
	a.mu.Lock()
	kv, c := a.kv, a.client
	a.mu.Unlock()
	if kv == nil {
		return rep, errors.New("attestor not started")
	}
	if req.Target.Kind == "" || req.Target.Identifier == "" {
		return rep, fmt.Errorf("%w: the request names no target", ErrBaseline)
	}
	var e jetstream.KeyValueEntry
	err := natsbus.Retry(ctx, func(ctx context.Context) (err error) {
		e, err = kv.Get(ctx, topology.BaselineKey(req.Target))
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return rep, fmt.Errorf("%w: no baseline for %s", ErrBaseline, req.Target)
	}
	if err != nil {
		return rep, fmt.Errorf("read baseline of %s: %w", req.Target, err)
	}
	var stored events.Baseline
	if err := json.Unmarshal(e.Value(), &stored); err != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrBaseline, req.Target, err)
	}
	s, err := snapshot.Parse(stored.Snapshot)
	if err != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrBaseline, req.Target, err)
	}
	digest, err := s.Digest()
	if err != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrBaseline, req.Target, err)
	}
	switch {
	case (events.Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}) != req.Target:
		return rep, fmt.Errorf("%w: the baseline stored for %s is a snapshot of %s:%s", ErrBaseline, req.Target, s.Target.Kind, s.Target.Identifier)
	case stored.Digest != "" && stored.Digest != digest:
		return rep, fmt.Errorf("%w: %s: stored digest %s, but the snapshot's is %s", ErrBaseline, req.Target, stored.Digest, digest)
	case req.Digest != "" && req.Digest != digest:
		return rep, fmt.Errorf("%w: %s: the stored baseline is %s, not the requested %s", ErrBaseline, req.Target, digest, req.Digest)
	}
	stmt, err := statement.Build(s)
	if err != nil {
		return rep, fmt.Errorf("%w: %s: %w", ErrBaseline, req.Target, err)
	}
	signed, err := a.signer.Sign(ctx, stmt)
	if err != nil {
		return rep, err
	}
	bundleDigest, err := events.BundleDigest(signed.Bundle)
	if err != nil {
		return rep, fmt.Errorf("bundle: %w", err)
	}
	rec := attestation.Record{
		Target: req.Target, BaselineDigest: digest, BaselineRevision: e.Revision(),
		Statement: string(stmt), Bundle: signed.Bundle,
		CertificateIdentity: signed.Identity, OIDCIssuer: signed.Issuer, KeyHint: signed.KeyHint,
		SignedAt: time.Now().UTC(),
	}
	rev, err := attestation.PutRecord(ctx, kv, rec)
	if err != nil {
		return rep, err
	}
	rep.BaselineDigest, rep.StatementDigest, rep.BundleDigest = digest, statement.Digest(stmt), bundleDigest
	rep.CertificateIdentity, rep.OIDCIssuer, rep.KeyHint = signed.Identity, signed.Issuer, signed.KeyHint
	rep.Key, rep.Revision = events.AttestationKey(req.Target), rev

	ev := events.AttestationCreated{
		Target: req.Target, BaselineDigest: digest, PredicateType: statement.PredicateType,
		StatementDigest: rep.StatementDigest, BundleDigest: bundleDigest, Bundle: signed.Bundle,
		CertificateIdentity: signed.Identity, OIDCIssuer: signed.Issuer,
	}
	id := events.AttestationCreatedIDs.ID(rep.Key, digest, bundleDigest)
	m, _, err := binding.NewMsg(a.source, ev, binding.WithID(id))
	if err != nil {
		return rep, fmt.Errorf("%w: %w", ErrNotAnnounced, err)
	}
	if _, err := c.Pub.PublishRetrying(ctx, m); err != nil {
		return rep, fmt.Errorf("%w: %s at revision %d: %w", ErrNotAnnounced, rep.Key, rev, err)
	}
	rep.EventID = id
	return rep, nil
}

// Shutdown stops taking requests, finishes those in hand (their replies
// included) and closes the connection it opened. It is safe without Start
// and safe to call twice; it returns ctx's error if the requests in hand do
// not finish in time (they are then cancelled).
func (a *Attestor) Shutdown(ctx context.Context) error {
	a.mu.Lock()
	if !a.state.Stop() {
		a.mu.Unlock()
		return nil
	}
	sub, c, cancel := a.sub, a.client, a.cancel
	a.mu.Unlock()

	var err error
	if uerr := sub.Unsubscribe(); uerr != nil && !errors.Is(uerr, nats.ErrConnectionClosed) {
		err = fmt.Errorf("unsubscribe: %w", uerr)
	}
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		cancel()
		<-done
		err = errors.Join(err, fmt.Errorf("drain attestor: %w", ctx.Err()))
	}
	cancel()
	if ferr := c.Conn.FlushTimeout(time.Second); ferr != nil && !errors.Is(ferr, nats.ErrConnectionClosed) {
		err = errors.Join(err, fmt.Errorf("flush: %w", ferr))
	}
	c.Close()
	a.mu.Lock()
	a.state = lifecycle.Stopped
	a.mu.Unlock()
	a.log.InfoContext(ctx, "attestor stopped")
	return err
}

// RequestSign asks an attestor over nc to sign the baseline of target
// (digest, when set, is the baseline digest the caller reviewed) and
// returns its reply; a reply with an error is an error.
func RequestSign(ctx context.Context, nc *nats.Conn, subject string, req SignRequest) (*SignReply, error) {
	if subject == "" {
		subject = DefaultSubject
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	msg := &nats.Msg{Subject: subject, Data: data}
	// The attestor's span of the request continues the caller's trace.
	eventtrace.InjectMsg(ctx, telemetry.Propagator(), msg)
	m, err := nc.RequestMsgWithContext(ctx, msg)
	if err != nil {
		return nil, fmt.Errorf("sign request on %s: %w", subject, err)
	}
	var rep SignReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return nil, fmt.Errorf("sign reply: %w", err)
	}
	if rep.Error != "" {
		return &rep, fmt.Errorf("attestor: %s", rep.Error)
	}
	return &rep, nil
}
