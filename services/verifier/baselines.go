package verifier

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Baseline is a stored baseline (events.Baseline) with where it was read
// or written and, from Approve, the evidence it adopted.
type Baseline struct {
	events.Baseline
	// Revision is the bucket revision the baseline was read or written
	// at (not stored).
	Revision uint64 `json:"-"`
	// Evidence is the latest snapshot Approve adopted (its host, the key
	// that signed it, its time); nil for a baseline read or put (not
	// stored).
	Evidence *Observation `json:"-"`
}

// Errors of Baselines.
var (
	// ErrNoBaseline: the target has no baseline.
	ErrNoBaseline = errors.New("no baseline")
	// ErrNoSnapshot: no snapshot of the target has been received.
	ErrNoSnapshot = errors.New("no snapshot")
	// ErrAmbiguous: the target's latest snapshots differ between hosts
	// and Approve was not told which host's to promote.
	ErrAmbiguous = errors.New("ambiguous snapshot")
	// ErrInvalidBaseline: a baseline (given, or found in the bucket) is
	// not valid.
	ErrInvalidBaseline = errors.New("invalid baseline")
	// ErrUnchangedDigest: a Put that changes a baseline's settings but
	// not its snapshot, which baseline.changed.v1 cannot record.
	ErrUnchangedDigest = errors.New("baseline snapshot unchanged")
	// ErrNotAnnounced: a baseline or a host's keys were written but the
	// event announcing it (baseline.changed, host.key.changed) could not
	// be published.
	ErrNotAnnounced = errors.New("change written but not announced")
	// ErrNoDigest: Approve was not told the digest of the snapshot the
	// operator reviewed (ApproveOptions.Digest).
	ErrNoDigest = errors.New("no reviewed digest")
	// ErrDigestChanged: the latest snapshot Approve would adopt is not
	// the one the operator reviewed (it changed since, or another was
	// named).
	ErrDigestChanged = errors.New("the latest snapshot is not the reviewed one")
	// ErrUnauthenticated: the latest snapshot carries no verified
	// signature (the verifier that received it runs with enrollment off);
	// Approve adopts it only with ApproveOptions.AllowUnauthenticated.
	ErrUnauthenticated = errors.New("unauthenticated evidence")
	// ErrSignerNotEnrolled: the key that signed the latest snapshot is
	// not, now, an enrolled key of its host in the host registry
	// (pending, revoked, another host's or unknown: the error wraps
	// ErrNotEnrolled, ErrRevoked, ErrNoSuchKey or ErrNoSuchHost too).
	ErrSignerNotEnrolled = errors.New("evidence signed by a key that is not its host's enrolled one")
)

// maxBaselineSize bounds a stored baseline: a bucket value is at most
// events.MaxEventSize with its headers.
const maxBaselineSize = events.MaxEventSize - 16<<10

// parsed is a decoded, checked baseline.
type parsed struct {
	Baseline
	snap *snapshot.Snapshot
	sels []diff.Selector

	// For the verifier (set by forVerifier): the canonical snapshot from
	// its evidence member on, and the verification of a snapshot that
	// has the same (all but captured_at), which is the verification of
	// the baseline against itself.
	evidence     []byte
	unchanged    *diff.Result
	unchangedErr error
}

// forVerifier prepares p for verifying snapshots against it: most have
// the baseline's evidence, and their verification is the same.
func (p *parsed) forVerifier() {
	p.evidence = evidencePart(p.Snapshot)
	p.unchanged, p.unchangedErr = diff.Verify(p.snap, p.snap, p.sels)
}

// sameEvidence reports whether a snapshot, as canonical JSON, has the
// baseline's evidence, schema version and target: all of it that
// diff.Verify reads. (Canonical JSON writes equal snapshots alike.)
func (p *parsed) sameEvidence(canonical []byte) bool {
	e := evidencePart(canonical)
	return e != nil && p.evidence != nil && bytes.Equal(e, p.evidence)
}

// evidencePart returns a canonical snapshot from its evidence member on
// (captured_at, the first member, is a time without a quote), or nil.
func evidencePart(canonical []byte) []byte {
	if !bytes.HasPrefix(canonical, []byte(`{"captured_at":"`)) {
		return nil
	}
	i := bytes.Index(canonical, []byte(`,"evidence":`))
	if i < 0 {
		return nil
	}
	return canonical[i:]
}

// check parses the snapshot and selectors and checks that the target,
// digest and identity agree with them. It returns the normal form: the
// snapshot canonical, the selectors parsed and de-duplicated.
func check(b events.Baseline) (*parsed, error) {
	s, err := snapshot.Parse(b.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot: %w", ErrInvalidBaseline, err)
	}
	got := events.Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}
	if b.Target == (events.Target{}) {
		b.Target = got
	}
	if b.Target != got {
		return nil, fmt.Errorf("%w: target %s, but the snapshot's target is %s", ErrInvalidBaseline, b.Target, got)
	}
	canon, err := s.Canonical()
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot: %w", ErrInvalidBaseline, err)
	}
	digest, err := s.Digest()
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot: %w", ErrInvalidBaseline, err)
	}
	if b.Digest != "" && b.Digest != digest {
		return nil, fmt.Errorf("%w: digest %s, but the snapshot's digest is %s", ErrInvalidBaseline, b.Digest, digest)
	}
	sels, err := diff.ParseSelectors(b.Protect)
	if err != nil {
		return nil, fmt.Errorf("%w: protect: %w", ErrInvalidBaseline, err)
	}
	protect := make([]string, len(sels))
	for i, sel := range sels {
		protect[i] = sel.String()
	}
	if id := b.RequiredIdentity; id != nil && (strings.TrimSpace(id.Issuer) == "" || strings.TrimSpace(id.Identity) == "") {
		return nil, fmt.Errorf("%w: required_identity needs an issuer and an identity", ErrInvalidBaseline)
	}
	if len(b.ApprovedBy) > events.MaxNameLength || strings.ContainsFunc(b.ApprovedBy, isControl) {
		return nil, fmt.Errorf("%w: approved_by: control characters or longer than %d bytes", ErrInvalidBaseline, events.MaxNameLength)
	}
	b.Snapshot, b.Digest, b.Protect = canon, digest, protect
	if len(b.Protect) == 0 {
		b.Protect = nil
	}
	return &parsed{Baseline: Baseline{Baseline: b}, snap: s, sels: sels}, nil
}

func isControl(r rune) bool { return r < 0x20 || 0x7F <= r && r <= 0x9F }

// decodeBaseline is the decoder of a stored baseline: read strictly
// (decodeRecord) and checked (check), under the key of its target.
func decodeBaseline(e jetstream.KeyValueEntry) (*parsed, error) {
	b, err := decodeRecord[events.Baseline](e.Value(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidBaseline, e.Key(), err)
	}
	p, err := check(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Key(), err)
	}
	if topology.BaselineKey(p.Target) != e.Key() {
		return nil, fmt.Errorf("%w: %s holds the baseline of %s", ErrInvalidBaseline, e.Key(), p.Target)
	}
	p.Revision = e.Revision()
	return p, nil
}

// Baselines reads and writes the baselines bucket. Every change is
// announced with a baseline.changed event (rt.baseline.<target>), published
// after the write with an id derived from the target and the revision, so a
// retried announcement is dropped as a duplicate.
type Baselines struct {
	js     jetstream.JetStream
	pub    *natsbus.Publisher // baseline.changed, through the OpenTelemetry globals
	source string

	mu sync.Mutex
	s  stores
}

// NewBaselines returns the baselines reached through js; the events it
// publishes carry source (events.Source("cli", user), say; empty means
// /verifier/<host name>). The buckets must exist (topology.Ensure, or a
// verifier's Start, creates them).
func NewBaselines(js jetstream.JetStream, source string) *Baselines {
	if source == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "unknown"
		}
		source = events.Source("verifier", host)
	}
	return &Baselines{js: js, pub: natsbus.NewPublisher(js, telemetry.Providers{}), source: source}
}

// stores are the buckets Baselines reads and writes.
type stores struct {
	baselines jetstream.KeyValue
	evidence  jetstream.KeyValue // evidence-latest
	verdicts  jetstream.KeyValue // verdicts-latest
	// hosts is the host registry, opened when Approve first checks a
	// signer (hostsBucket): a bus without it can still store baselines.
	hosts jetstream.KeyValue
}

func (b *Baselines) buckets(ctx context.Context) (stores, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, dst := range map[string]*jetstream.KeyValue{
		topology.BucketBaselines: &b.s.baselines, BucketEvidence: &b.s.evidence, topology.BucketVerdicts: &b.s.verdicts,
	} {
		if *dst != nil {
			continue
		}
		kv, err := b.js.KeyValue(ctx, name)
		if err != nil {
			return stores{}, fmt.Errorf("%s bucket: %w", name, err)
		}
		*dst = kv
	}
	return b.s, nil
}

// hostsBucket returns the host registry's bucket.
func (b *Baselines) hostsBucket(ctx context.Context) (jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.s.hosts != nil {
		return b.s.hosts, nil
	}
	kv, err := b.js.KeyValue(ctx, topology.BucketHosts)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("no %q bucket (the host registry) on this bus: a verifier creates it when it starts", topology.BucketHosts)
	}
	if err != nil {
		return nil, fmt.Errorf("%s bucket: %w", topology.BucketHosts, err)
	}
	b.s.hosts = kv
	return kv, nil
}

func (b *Baselines) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	s, err := b.buckets(ctx)
	return s.baselines, err
}

// Get returns a target's baseline, ErrNoBaseline, or ErrInvalidBaseline
// for a stored value that does not check.
func (b *Baselines) Get(ctx context.Context, target events.Target) (*Baseline, error) {
	kv, err := b.bucket(ctx)
	if err != nil {
		return nil, err
	}
	p, err := getBaseline(ctx, kv, target)
	if err != nil {
		return nil, err
	}
	return &p.Baseline, nil
}

func getBaseline(ctx context.Context, kv jetstream.KeyValue, target events.Target) (*parsed, error) {
	e, err := kv.Get(ctx, topology.BaselineKey(target))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w for %s", ErrNoBaseline, target)
	}
	if err != nil {
		return nil, fmt.Errorf("read baseline of %s: %w", target, err)
	}
	return decodeBaseline(e)
}

// List returns every baseline, ordered by target.
func (b *Baselines) List(ctx context.Context) ([]Baseline, error) {
	kv, err := b.bucket(ctx)
	if err != nil {
		return nil, err
	}
	all, err := entries(ctx, kv, events.BaselineKeysFilter) // baselines only, not their attestation records
	if err != nil {
		return nil, err
	}
	out := make([]Baseline, 0, len(all))
	for _, e := range all {
		p, err := decodeBaseline(e)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Baseline)
	}
	slices.SortFunc(out, func(x, y Baseline) int { return strings.Compare(x.Target.String(), y.Target.String()) })
	return out, nil
}

// Put makes bl its target's baseline and announces it (created or
// updated). The snapshot is parsed strictly and stored as canonical JSON;
// Target and Digest, when given, must match it; Protect must hold valid
// selectors; ApprovedAt defaults to now. Putting the baseline that is
// already there changes nothing and announces nothing; changing only
// Protect, RequiredIdentity or the approval fails with ErrUnchangedDigest
// (delete the baseline first). It returns the stored baseline.
func (b *Baselines) Put(ctx context.Context, bl events.Baseline) (*Baseline, error) {
	kv, err := b.bucket(ctx)
	if err != nil {
		return nil, err
	}
	if bl.ApprovedAt.IsZero() {
		bl.ApprovedAt = time.Now().UTC()
	}
	p, err := check(bl)
	if err != nil {
		return nil, err
	}
	value, err := encodeRecord(p.Baseline.Baseline)
	if err != nil {
		return nil, fmt.Errorf("encode baseline: %w", err)
	}
	if len(value) > maxBaselineSize {
		return nil, fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrInvalidBaseline, len(value), maxBaselineSize)
	}
	key := topology.BaselineKey(p.Target)
	for attempt := 0; ; attempt++ {
		cur, err := getBaseline(ctx, kv, p.Target)
		var rev uint64
		change := events.BaselineCreated
		switch {
		case errors.Is(err, ErrNoBaseline):
			rev, err = kv.Create(ctx, key, value)
		case errors.Is(err, ErrInvalidBaseline):
			// A damaged value is replaced; the event says updated from
			// nothing it can name, so announce a creation.
			var e jetstream.KeyValueEntry
			if e, err = kv.Get(ctx, key); err == nil {
				rev, err = kv.Update(ctx, key, value, e.Revision())
			}
		case err != nil:
			return nil, err
		case cur.Digest == p.Digest:
			if sameSettings(cur.Baseline.Baseline, p.Baseline.Baseline) {
				return &cur.Baseline, nil
			}
			return nil, fmt.Errorf("%w: the baseline of %s already has digest %s; baseline.changed.v1 cannot record a change of only its protect selectors, identity or approval: delete the baseline, then approve again",
				ErrUnchangedDigest, p.Target, p.Digest)
		default:
			change = events.BaselineUpdated
			rev, err = kv.Update(ctx, key, value, cur.Revision)
		}
		if err != nil {
			if attempt < 8 && (errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)) {
				continue // a concurrent change: decide again
			}
			return nil, fmt.Errorf("write baseline of %s: %w", p.Target, err)
		}
		out := p.Baseline
		out.Revision = rev
		ev := events.BaselineChanged{Target: p.Target, Change: change, Digest: p.Digest, Actor: p.ApprovedBy}
		if change == events.BaselineUpdated {
			ev.PreviousDigest = cur.Digest
		}
		if err := b.announce(ctx, ev, rev); err != nil {
			return &out, err
		}
		return &out, nil
	}
}

func sameSettings(a, b events.Baseline) bool {
	if !slices.Equal(a.Protect, b.Protect) {
		return false
	}
	switch {
	case a.RequiredIdentity == nil && b.RequiredIdentity == nil:
		return true
	case a.RequiredIdentity == nil || b.RequiredIdentity == nil:
		return false
	}
	return *a.RequiredIdentity == *b.RequiredIdentity
}

// Delete removes a target's baseline and announces it; actor names who
// did (may be empty). A target without a baseline is ErrNoBaseline.
func (b *Baselines) Delete(ctx context.Context, target events.Target, actor string) error {
	kv, err := b.bucket(ctx)
	if err != nil {
		return err
	}
	key := topology.BaselineKey(target)
	for attempt := 0; ; attempt++ {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return fmt.Errorf("%w for %s", ErrNoBaseline, target)
		}
		if err != nil {
			return fmt.Errorf("read baseline of %s: %w", target, err)
		}
		ev := events.BaselineChanged{Target: target, Change: events.BaselineRemoved, Actor: actor}
		if cur, err := decodeBaseline(e); err == nil {
			ev.PreviousDigest = cur.Digest
		}
		if err := kv.Delete(ctx, key, jetstream.LastRevision(e.Revision())); err != nil {
			if attempt < 8 && errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				continue
			}
			return fmt.Errorf("delete baseline of %s: %w", target, err)
		}
		// The attestation of the removed baseline goes with it.
		if err := deleteRecord(ctx, kv, target); err != nil {
			return err
		}
		if ev.PreviousDigest == "" {
			// A damaged value has no digest to name as removed.
			return nil
		}
		return b.announce(ctx, ev, e.Revision())
	}
}

// deleteRecord removes the attestation record of target, if there is one.
func deleteRecord(ctx context.Context, kv jetstream.KeyValue, target events.Target) error {
	key := events.AttestationKey(target)
	if _, err := kv.Get(ctx, key); errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err := kv.Delete(ctx, key); err != nil {
		return fmt.Errorf("delete attestation of %s: %w", target, err)
	}
	return nil
}

// announce publishes a baseline change with an id derived from the target,
// the change and the revision, retrying until ctx ends.
func (b *Baselines) announce(ctx context.Context, ev events.BaselineChanged, rev uint64) error {
	id := events.BaselineChangedIDs.ID(topology.BaselineKey(ev.Target), string(ev.Change), strconv.FormatUint(rev, 10))
	return announce(ctx, b.pub, b.source, ev, id, "baseline of "+ev.Target.String(), rev)
}

// announce publishes p, the event of a change to what written at
// revision rev, with id (derived from the change, so a retry is dropped
// as a duplicate), retrying until ctx ends; a failure is ErrNotAnnounced.
// Baselines and Hosts announce their writes through it.
func announce(ctx context.Context, pub *natsbus.Publisher, source string, p events.Payload, id, what string, rev uint64) error {
	m, _, err := binding.NewMsg(source, p, binding.WithID(id))
	if err == nil {
		_, err = pub.PublishRetrying(ctx, m)
	}
	if err != nil {
		return fmt.Errorf("%w: %s written at revision %d: %w", ErrNotAnnounced, what, rev, err)
	}
	return nil
}

// ApproveOptions qualify Approve.
type ApproveOptions struct {
	// Host selects whose latest snapshot to promote; empty means any host,
	// provided the latest snapshots of every host agree (no differences
	// but captured_at).
	Host string
	// Digest is the digest of the snapshot the operator reviewed
	// (sha256:<hex>, as Candidate, `runtimetruth baseline approve` without
	// --digest, `baseline show` and `status` print it). Approve adopts the
	// latest snapshot when it has this digest, or Reviewed: ErrNoDigest
	// when empty, ErrDigestChanged when neither can be adopted.
	Digest string
	// Reviewed is the snapshot the operator reviewed (its JSON, as the
	// review showed it), for an approval made after the host collected
	// again: an unchanged target's snapshots differ only in captured_at,
	// so each has a new digest. Approve adopts it (its digest must be
	// Digest) when the latest snapshot of its host has the same evidence
	// (nothing but captured_at differs: the host still reports what was
	// reviewed, signed as the latest is); when the evidence changed it
	// refuses with ErrDigestChanged naming both digests and what changed.
	Reviewed []byte
	// By names the approver (baseline.changed's actor).
	By string
	// Protect and RequiredIdentity set the new baseline's; nil keeps the
	// current baseline's (use an empty, non-nil Protect to clear it).
	Protect          []string
	RequiredIdentity *events.SignerIdentity
	// AllowUnauthenticated adopts a snapshot that carries no verified
	// signature (ErrUnauthenticated: the verifier runs with enrollment
	// off, so nothing proves which host sent it). A signed snapshot is
	// checked against the registry all the same.
	AllowUnauthenticated bool
}

// Candidate is what Approve would adopt for a target, for an operator to
// review before approving it.
type Candidate struct {
	// Observation is the latest snapshot Approve would adopt: its digest,
	// host, signing key (SignedBy) and time.
	Observation Observation
	// Current is the target's baseline now; nil when it has none (or an
	// invalid one, which approving replaces).
	Current *Baseline
	// Unauthentic is nil for authentic evidence: signed by a key that is
	// an enrolled key of the observation's host in the host registry.
	// Otherwise it says why not: ErrUnauthenticated (no signature) or
	// ErrSignerNotEnrolled, and Approve refuses the snapshot (the first
	// only without ApproveOptions.AllowUnauthenticated).
	Unauthentic error
}

// Candidate returns what Approve(ctx, target, ApproveOptions{Host: host})
// would adopt, and why it would refuse it (Candidate.Unauthentic). It
// fails as Approve does when there is nothing to adopt: ErrNoSnapshot,
// ErrAmbiguous, ErrBaselineGone.
func (b *Baselines) Candidate(ctx context.Context, target events.Target, host string) (*Candidate, error) {
	st, err := b.buckets(ctx)
	if err != nil {
		return nil, err
	}
	obs, err := st.latestObservation(ctx, target, host)
	if err != nil {
		return nil, err
	}
	c := &Candidate{Observation: *obs}
	cur, err := getBaseline(ctx, st.baselines, target)
	switch {
	case err == nil:
		c.Current = &cur.Baseline
	case errors.Is(err, ErrNoBaseline), errors.Is(err, ErrInvalidBaseline):
	default:
		return nil, err
	}
	if c.Unauthentic, err = b.authenticity(ctx, *obs); err != nil {
		return nil, err
	}
	return c, nil
}

// authenticity returns why o is not authentic evidence of its host (nil
// when it is), or an error when the registry cannot be read.
func (b *Baselines) authenticity(ctx context.Context, o Observation) (unauthentic, err error) {
	if o.SignedBy == "" {
		return fmt.Errorf("%w: the latest snapshot of %s from %s carries no verified signature (the verifier that received it runs with enrollment off), so nothing proves %s sent it",
			ErrUnauthenticated, o.Target, o.Host, o.Host), nil
	}
	kv, err := b.hostsBucket(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := NewHosts(kv, EnrollManual).Get(ctx, o.Host)
	if errors.Is(err, ErrNoSuchHost) {
		return fmt.Errorf("%w: %s signed the latest snapshot of %s from %s: %w", ErrSignerNotEnrolled, o.SignedBy, o.Target, o.Host, err), nil
	}
	if err != nil {
		return nil, err
	}
	why := ErrNoSuchKey
	if k := rec.KeyOf(o.SignedBy); k != nil {
		switch k.State {
		case events.KeyEnrolled:
			return nil, nil
		case events.KeyRevoked:
			why = ErrRevoked
		default:
			why = fmt.Errorf("%w: it is %s", ErrNotEnrolled, k.State)
		}
	}
	return fmt.Errorf("%w: %s signed the latest snapshot of %s from %s: %w", ErrSignerNotEnrolled, o.SignedBy, o.Target, o.Host, why), nil
}

// Approve promotes the latest snapshot of target (see ApproveOptions.Host)
// to its baseline, as Put does, provided it is the snapshot the operator
// reviewed (ApproveOptions.Digest) and authentic evidence of its host
// (Candidate.Unauthentic). ErrNoSnapshot when none was received,
// ErrAmbiguous when hosts disagree and no host is named, ErrNoDigest,
// ErrDigestChanged, ErrUnauthenticated and ErrSignerNotEnrolled when it
// refuses the snapshot. The baseline returned says what was adopted
// (Baseline.Evidence).
func (b *Baselines) Approve(ctx context.Context, target events.Target, o ApproveOptions) (*Baseline, error) {
	c, err := b.Candidate(ctx, target, o.Host)
	if err != nil {
		return nil, err
	}
	obs := c.Observation
	if o.Digest == "" {
		return nil, fmt.Errorf("%w: name the digest of the snapshot you reviewed (the latest snapshot of %s from %s is %s)", ErrNoDigest, target, obs.Host, obs.Digest)
	}
	// AllowUnauthenticated covers evidence without a signature, never a
	// signer the registry refuses.
	allowed := o.AllowUnauthenticated && errors.Is(c.Unauthentic, ErrUnauthenticated)
	if c.Unauthentic != nil && !allowed {
		return nil, c.Unauthentic
	}
	if obs.Digest != o.Digest {
		if obs, err = reviewedStill(target, obs, o); err != nil {
			return nil, err
		}
	}
	bl := events.Baseline{
		Target: target, Snapshot: obs.Snapshot, Digest: obs.Digest,
		Protect: o.Protect, RequiredIdentity: o.RequiredIdentity,
		ApprovedBy: o.By, Host: obs.Host,
	}
	if cur := c.Current; cur != nil {
		if o.Protect == nil {
			bl.Protect = cur.Protect
		}
		if o.RequiredIdentity == nil {
			bl.RequiredIdentity = cur.RequiredIdentity
		}
	}
	out, err := b.Put(ctx, bl)
	if out != nil {
		out.Evidence = &obs
	}
	return out, err
}

// reviewedStill returns the observation to adopt when the latest snapshot
// latest is not the reviewed one (o.Digest): the reviewed snapshot
// (o.Reviewed), provided its digest is o.Digest and latest has its
// evidence; else ErrDigestChanged, naming both digests and, when the
// reviewed snapshot is known, what changed since.
func reviewedStill(target events.Target, latest Observation, o ApproveOptions) (Observation, error) {
	changed := func(what string) error {
		return fmt.Errorf("%w: the latest snapshot of %s from %s is %s, not the reviewed %s%s: review it again",
			ErrDigestChanged, target, latest.Host, latest.Digest, o.Digest, what)
	}
	if o.Reviewed == nil {
		return Observation{}, changed("")
	}
	reviewed, err := snapshot.Parse(o.Reviewed)
	if err != nil {
		return Observation{}, fmt.Errorf("the reviewed snapshot: %w", err)
	}
	canonical, err := reviewed.Canonical()
	if err != nil {
		return Observation{}, fmt.Errorf("the reviewed snapshot: %w", err)
	}
	digest, err := reviewed.Digest()
	if err != nil {
		return Observation{}, fmt.Errorf("the reviewed snapshot: %w", err)
	}
	if digest != o.Digest {
		return Observation{}, fmt.Errorf("%w: the reviewed snapshot given is %s, not %s", ErrDigestChanged, digest, o.Digest)
	}
	now, err := snapshot.Parse(latest.Snapshot)
	if err != nil {
		return Observation{}, fmt.Errorf("latest snapshot from %s: %w", latest.Host, err)
	}
	res, err := diff.Compare(reviewed, now)
	switch {
	case err != nil:
		return Observation{}, changed(fmt.Sprintf(" (cannot compare them: %v)", err))
	case !res.Empty():
		return Observation{}, changed(", whose evidence changed since:\n" + res.Render())
	case reviewed.Target != now.Target:
		return Observation{}, changed(", of another target")
	}
	// The host still reports what was reviewed, in authentic evidence
	// (latest's signature): adopt the snapshot reviewed.
	latest.Digest, latest.Snapshot = digest, canonical
	return latest, nil
}

// LatestDigest is the digest of the latest snapshot of r's host and
// target as the verdict record r tells it: the digest Approve adopts for
// them (what `runtimetruth status` prints for --digest). A snapshot that
// had its baseline's evidence stands for that baseline (VerdictRecord.
// AtBaseline), so its digest is the baseline's.
func LatestDigest(r VerdictRecord) string {
	if r.AtBaseline && r.Verdict.BaselineDigest != "" {
		return r.Verdict.BaselineDigest
	}
	return r.Verdict.SnapshotDigest
}

// Observations returns the latest snapshot of target on every host, ordered
// by host. A host whose latest snapshot had the evidence of the baseline it
// was verified against (the verifier keeps no copy of those: see
// VerdictRecord.AtBaseline) is given that baseline (Observation.AtBaseline).
func (b *Baselines) Observations(ctx context.Context, target events.Target) ([]Observation, error) {
	st, err := b.buckets(ctx)
	if err != nil {
		return nil, err
	}
	return st.observations(ctx, target, "")
}

// observations returns the latest snapshot of target on host, or on every
// host when host is empty, ordered by host: the host's record in
// evidence-latest, unless its latest verdict is of a newer snapshot that
// had its baseline's evidence; then that baseline, read from the baselines
// bucket's history when it has been replaced since.
func (s stores) observations(ctx context.Context, target events.Target, host string) ([]Observation, error) {
	filter := "*." + events.TargetTokens(target)
	if host != "" {
		filter = topology.VerdictKey(host, target)
	}
	snaps, err := entries(ctx, s.evidence, filter)
	if err != nil {
		return nil, err
	}
	recs, err := entries(ctx, s.verdicts, filter)
	if err != nil {
		return nil, err
	}
	observed, err := decodeEntries(snaps, "latest snapshot", "", decodeObservation)
	if err != nil {
		return nil, err
	}
	latest := make(map[string]Observation, len(observed))
	for _, o := range observed {
		if o.Target == target {
			latest[o.Host] = o
		}
	}
	baselines := map[string]*parsed{} // by digest
	for _, e := range recs {
		r, err := decodeVerdictRecord(e.Value())
		if err != nil {
			return nil, fmt.Errorf("verdict %s: %w", e.Key(), err)
		}
		v := r.Verdict
		if o, ok := latest[v.Host]; !r.AtBaseline || v.Target != target || ok && o.EvidenceSequence >= r.EvidenceSequence {
			continue
		}
		bl, ok := baselines[v.BaselineDigest]
		if !ok {
			if bl, err = baselineOfDigest(ctx, s.baselines, target, v.BaselineDigest); err != nil {
				return nil, fmt.Errorf("latest snapshot of %s from %s: it had the evidence of baseline %s: %w", target, v.Host, v.BaselineDigest, err)
			}
			baselines[v.BaselineDigest] = bl
		}
		latest[v.Host] = Observation{
			Host: v.Host, Target: target, Digest: bl.Digest,
			EvidenceID: r.EvidenceID, EvidenceSequence: r.EvidenceSequence, Time: r.Time,
			Snapshot: bl.Snapshot, AtBaseline: true, SignedBy: r.SignedBy, SignedSeq: r.SignedSeq,
		}
	}
	out := make([]Observation, 0, len(latest))
	for _, o := range latest {
		out = append(out, o)
	}
	slices.SortFunc(out, func(x, y Observation) int { return strings.Compare(x.Host, y.Host) })
	return out, nil
}

// ErrBaselineGone is returned for a host whose latest snapshot had the
// evidence of a baseline that the baselines bucket no longer keeps
// (topology.BaselineHistory revisions back).
var ErrBaselineGone = errors.New("that baseline is no longer kept; the host's next collection will be")

// baselineOfDigest returns the baseline of target with digest: the current
// one, or a revision the bucket keeps.
func baselineOfDigest(ctx context.Context, kv jetstream.KeyValue, target events.Target, digest string) (*parsed, error) {
	cur, err := getBaseline(ctx, kv, target)
	if err == nil && cur.Digest == digest {
		return cur, nil
	}
	history, err := kv.History(ctx, topology.BaselineKey(target))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrBaselineGone
	}
	if err != nil {
		return nil, fmt.Errorf("read baseline history of %s: %w", target, err)
	}
	for _, e := range slices.Backward(history) {
		if e.Operation() != jetstream.KeyValuePut {
			continue
		}
		if p, err := decodeBaseline(e); err == nil && p.Digest == digest {
			return p, nil
		}
	}
	return nil, ErrBaselineGone
}

func (s stores) latestObservation(ctx context.Context, target events.Target, host string) (*Observation, error) {
	all, err := s.observations(ctx, target, host)
	if err != nil {
		return nil, err
	}
	switch {
	case len(all) == 0 && host != "":
		return nil, fmt.Errorf("%w of %s from %s", ErrNoSnapshot, target, host)
	case len(all) == 0:
		return nil, fmt.Errorf("%w of %s has been received", ErrNoSnapshot, target)
	case host != "":
		return &all[0], nil
	}
	newest := slices.MaxFunc(all, func(x, y Observation) int { return cmp.Compare(x.EvidenceSequence, y.EvidenceSequence) })
	ns, err := snapshot.Parse(newest.Snapshot)
	if err != nil {
		return nil, fmt.Errorf("latest snapshot from %s: %w", newest.Host, err)
	}
	var differ []string
	for _, o := range all {
		s, err := snapshot.Parse(o.Snapshot)
		if err != nil {
			return nil, fmt.Errorf("latest snapshot from %s: %w", o.Host, err)
		}
		if res, err := diff.Compare(ns, s); err != nil || !res.Empty() {
			differ = append(differ, o.Host)
		}
	}
	if len(differ) > 0 {
		return nil, fmt.Errorf("%w: the latest snapshot of %s from %s differs from those of %s; name the host to approve",
			ErrAmbiguous, target, newest.Host, strings.Join(differ, ", "))
	}
	return &newest, nil
}
