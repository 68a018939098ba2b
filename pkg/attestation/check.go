package attestation

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sigstore/sigstore-go/pkg/root"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// Baseline is what Checker needs to know of a baseline that requires an
// attestation.
type Baseline struct {
	// Target is the baseline's target.
	Target events.Target
	// Digest is its digest, sha256:<hex>.
	Digest string
	// SchemaVersion is its snapshot schema version; 0 means
	// snapshot.SchemaVersion.
	SchemaVersion int
	// Identity and Issuer are the required signer (exact matches).
	Identity, Issuer string
}

// ErrAttestationRequired wraps every failure of Checker: the baseline
// names a required signer and no attestation by it verifies.
var ErrAttestationRequired = errors.New("baseline requires a verified attestation")

// CheckerOptions tune a Checker's cache.
type CheckerOptions struct {
	// MaxEntries bounds the cache; past it the cache starts over. 0 means
	// 10 000.
	MaxEntries int
	// FailureTTL is how long a failed verification is remembered; 0 means
	// one minute. Successes are remembered until the certificate expires
	// when it was checked at the current time, else for good.
	FailureTTL time.Duration
	// Now replaces the clock (tests).
	Now func() time.Time
	// Telemetry receives MetricChecks; zero fields mean the OpenTelemetry
	// globals.
	Telemetry telemetry.Providers
}

// ScopeName is the instrumentation scope of the package's metrics.
const ScopeName = "github.com/runtimetruth/runtimetruth/pkg/attestation"

// MetricChecks counts the checks of a Checker by result: "hit" (answered
// from the cache) or "miss" (verified).
const MetricChecks = "runtimetruth.attestation.checks"

// AttrResult is MetricChecks' attribute: CheckHit or CheckMiss.
const AttrResult = attribute.Key("result")

// The results of MetricChecks.
const (
	CheckHit  = "hit"
	CheckMiss = "miss"
)

// Checker verifies the attestation of a baseline that names a required
// identity — the verifier service's check before it trusts such a
// baseline. Outcomes are cached by digest: of the baseline, the statement,
// the bundle, and the required signer; a replaced baseline or attestation
// is a new key, so the cache never has to be invalidated. It is safe for
// concurrent use.
type Checker struct {
	trusted root.TrustedMaterial
	opts    CheckerOptions

	mu    sync.Mutex
	cache map[[sha256.Size]byte]cached

	checks    metric.Int64Counter
	hit, miss metric.MeasurementOption
}

type cached struct {
	res   *Result
	err   error
	until time.Time // zero: for good
}

// NewChecker returns a checker verifying keyless signatures against
// trusted (nil fails every check, closed).
func NewChecker(trusted root.TrustedMaterial, opts CheckerOptions) *Checker {
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = 10_000
	}
	if opts.FailureTTL <= 0 {
		opts.FailureTTL = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Checker{trusted: trusted, opts: opts, cache: map[[sha256.Size]byte]cached{},
		hit:  metric.WithAttributeSet(attribute.NewSet(AttrResult.String(CheckHit))),
		miss: metric.WithAttributeSet(attribute.NewSet(AttrResult.String(CheckMiss)))}
	// An instrument that cannot be created is a no-op one; the SDK reports
	// why through otel.Handle.
	c.checks, _ = opts.Telemetry.Meter(ScopeName).Int64Counter(MetricChecks, metric.WithUnit("{check}"),
		metric.WithDescription("Attestation checks, by result: answered from the cache or verified."))
	return c
}

// CheckStored reads the attestation stored next to the baseline in the
// baselines bucket kv and checks it (Check).
func (c *Checker) CheckStored(ctx context.Context, kv jetstream.KeyValue, b Baseline) (*Result, error) {
	rec, err := GetRecord(ctx, kv, b.Target)
	if errors.Is(err, ErrNoAttestation) {
		return nil, fmt.Errorf("%w: %s must be signed by %s (issuer %s), and no attestation is stored; ask the attestor to sign it",
			ErrAttestationRequired, b.Target, b.Identity, b.Issuer)
	}
	if err != nil {
		if errors.Is(err, ErrInvalidRecord) {
			return nil, fmt.Errorf("%w: %w", ErrAttestationRequired, err)
		}
		return nil, err // reading failed: retry
	}
	return c.Check(b, rec)
}

// Check verifies rec as the attestation of b, in RuntimeTruth's order
// (signature and identity, then statement and digest binding), or answers
// from the cache.
func (c *Checker) Check(b Baseline, rec *Record) (*Result, error) {
	if b.SchemaVersion == 0 {
		b.SchemaVersion = snapshot.SchemaVersion
	}
	key := cacheKey(b, rec)
	now := c.opts.Now()
	c.mu.Lock()
	e, ok := c.cache[key]
	c.mu.Unlock()
	if ok && (e.until.IsZero() || now.Before(e.until)) {
		c.checks.Add(context.Background(), 1, c.hit)
		return e.res, e.err
	}
	c.checks.Add(context.Background(), 1, c.miss)
	res, err := c.verify(b, rec)
	e = cached{res: res, err: err}
	switch {
	case err != nil:
		e.until = now.Add(c.opts.FailureTTL)
	case res.CurrentTime:
		e.until = res.NotAfter
	}
	c.mu.Lock()
	if len(c.cache) >= c.opts.MaxEntries {
		clear(c.cache)
	}
	c.cache[key] = e
	c.mu.Unlock()
	return res, err
}

func (c *Checker) verify(b Baseline, rec *Record) (*Result, error) {
	v, err := NewVerifier(Policy{Identity: b.Identity, Issuer: b.Issuer, TrustedMaterial: c.trusted})
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrAttestationRequired, b.Target, err)
	}
	res, err := v.Verify(b.Digest, b.SchemaVersion, []byte(rec.Statement), rec.Bundle)
	if err != nil {
		return nil, fmt.Errorf("%w: %s must be signed by %s (issuer %s): %w", ErrAttestationRequired, b.Target, b.Identity, b.Issuer, err)
	}
	return res, nil
}

func cacheKey(b Baseline, rec *Record) [sha256.Size]byte {
	h := sha256.New()
	for _, s := range []string{b.Digest, strconv.Itoa(b.SchemaVersion), b.Identity, b.Issuer} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	st := sha256.Sum256([]byte(rec.Statement))
	bu := sha256.Sum256(rec.Bundle)
	h.Write(st[:])
	h.Write(bu[:])
	var k [sha256.Size]byte
	h.Sum(k[:0])
	return k
}
