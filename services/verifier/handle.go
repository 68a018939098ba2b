package verifier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// handler verifies one evidence event.
type handler struct {
	js        jetstream.JetStream
	pub       *natsbus.Publisher
	tel       *metrics
	source    string
	baselines jetstream.KeyValue
	attest    *attestation.Checker
	latest    *latestBucket  // evidence-latest
	verdicts  *latestBucket  // verdicts-latest
	auth      *authenticator // nil: Config.Enrollment off

	verdictStream jetstream.Stream // VERDICTS, where stored looks verdicts up
	// crash, set by tests, stops a batch at a point (CrashBefore…) when
	// it returns true.
	crash atomic.Pointer[func(point string) bool]

	mu     sync.Mutex
	parsed map[string]*parsed // baseline key → the last baseline decoded, by revision
}

func newHandler(ctx context.Context, js jetstream.JetStream, pub *natsbus.Publisher, tel *metrics, source string,
	attest *attestation.Checker) (*handler, error) {
	h := &handler{js: js, pub: pub, tel: tel, source: source, attest: attest, parsed: map[string]*parsed{}}
	for name, dst := range map[string]*jetstream.KeyValue{topology.BucketBaselines: &h.baselines} {
		kv, err := js.KeyValue(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("%s bucket: %w", name, err)
		}
		*dst = kv
	}
	s, err := js.Stream(ctx, topology.StreamVerdicts)
	if err != nil {
		return nil, fmt.Errorf("%s stream: %w", topology.StreamVerdicts, err)
	}
	h.verdictStream = s
	for name, b := range map[string]struct {
		dst   **latestBucket
		order func([]byte) (ordering, error)
	}{BucketEvidence: {&h.latest, observationOrder}, topology.BucketVerdicts: {&h.verdicts, verdictOrder}} {
		kv, err := js.KeyValue(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("%s bucket: %w", name, err)
		}
		*b.dst = newLatestBucket(kv, b.order)
	}
	return h, nil
}

// VerdictID is the id of the verdict of an evidence event: a UUIDv5 of the
// evidence id. A redelivered snapshot yields the same verdict id, which the
// VERDICTS stream drops as a duplicate.
func VerdictID(evidenceID string) string {
	return events.VerdictIDs.ID(evidenceID)
}

// item is one message of a batch on its way to a verdict.
type item struct {
	m    jetstream.Msg
	ctx  context.Context // carries the span of handling m
	e    event.Event
	ev   events.EvidenceCollected
	snap *snapshot.Snapshot
	key  string // topology.VerdictKey
	bkey string // topology.BaselineKey of the baseline target
	ord  ordering
	sig  dsse.Signature // the verified signature (Config.Enrollment on)
	err  error          // the message's result once settled
	done bool           // settled: err is final

	// atBaseline: the snapshot passed with its baseline's evidence
	// (nothing but captured_at differs).
	atBaseline bool

	verdict events.Verdict
	vm      *nats.Msg
	ve      event.Event
	ack     *jetstream.PubAck
}

func (it *item) fail(err error) { it.err, it.done = err, true }

// handleBatch verifies a batch of evidence events, each as handle did one
// by one: it verifies every snapshot against its baseline, records it as
// its host's latest (unless it has its baseline's evidence: see
// VerdictRecord.AtBaseline), publishes the verdict and records it as the
// latest verdict, and only then reports the message handled. The work is
// shared across the batch: one latest-snapshot and one latest-verdict
// write per host and target (the newest of the batch; the older ones
// would be replaced at once), one baseline read per baseline, the
// verdicts published without waiting on each in turn, the writes of
// different keys made at once. A malformed event is a permanent error (dead-lettered); a
// store or publish failure is retried. spans[i] carries the span of
// handling msgs[i], the parent of its verdict's publish span.
func (h *handler) handleBatch(ctx context.Context, msgs []jetstream.Msg, spans []context.Context) []error {
	items := make([]*item, len(msgs))
	for i, m := range msgs {
		it := &item{m: m, ctx: spans[i]}
		items[i] = it
		e, ev, snap, err := binding.ReadEvidence(m)
		if err != nil {
			if errors.Is(err, events.ErrInvalid) {
				err = natsbus.Permanent(err)
			}
			it.fail(err)
			continue
		}
		md, err := m.Metadata()
		if err != nil {
			it.fail(natsbus.Permanent(fmt.Errorf("metadata: %w", err)))
			continue
		}
		it.e, it.ev, it.snap = e, ev, snap
		it.key = topology.VerdictKey(ev.Host, ev.Target)
		it.bkey = topology.BaselineKey(ev.BaselineTarget())
		it.ord = ordering{EvidenceID: e.ID(), EvidenceSequence: md.Sequence.Stream}
	}
	var refused refusals
	if h.auth != nil {
		h.auth.checkBatch(pending(items), &refused) // sets it.sig, it.ord.SignedBy and SignedSeq
	}

	for _, it := range pending(items) {
		cur, found, err := h.verdicts.lookup(ctx, it.key)
		handled := found && cur.handled(it.e.ID())
		switch {
		case err != nil:
			it.fail(err)
			continue
		case handled && cur.unconfirmed(it.e.ID()) && !h.verdicts.confirming(it.key, HandledMark(it.e.ID())):
			// Handled, but its verdict not confirmed stored: the
			// verifier stopped, or NATS did, between the record and the
			// publish's acknowledgement. The verdict is published again
			// only when VERDICTS does not hold it (the same id).
			stored, err := h.stored(ctx, it.ev.Host, VerdictID(it.e.ID()))
			switch {
			case err != nil:
				it.fail(err)
			case stored:
				if err := h.verdicts.confirm(ctx, it.key, []string{HandledMark(it.e.ID())}); err != nil {
					it.fail(err)
					continue
				}
				h.tel.duplicate(it.ctx)
				it.fail(nil)
			}
			continue
		case handled:
			// Handled before: a redelivery (the verdict was published and
			// recorded, the acknowledgement lost), or the same event sent
			// again byte for byte and stored again (a collector's re-send
			// after a NATS restart, or past the duplicate window), whether
			// JetStream still knows the message ids or not. Its id is in
			// its signed claim, so it is that event: a duplicate, which
			// changes nothing, never a rejection. (A replay is a different
			// event claiming an old sequence: below.)
			h.tel.duplicate(it.ctx)
			it.fail(nil)
			continue
		case found && h.auth != nil && it.ord.EvidenceSequence > cur.EvidenceSequence:
			// A message stored after the latest verified one, signed
			// before it: a replay. (A message stored before it is a late
			// delivery, verified without becoming the latest.)
			h.auth.replayed(&refused, it, cur.ordering)
		}
	}
	if h.auth != nil {
		h.auth.record(ctx, &refused)
	}

	baselines := h.baselinesOf(ctx, pending(items))
	for _, it := range pending(items) {
		bl := baselines[it.bkey]
		verdict, same, err := h.verify(ctx, it.e.ID(), it.ev, it.snap, bl.p, bl.err)
		if err != nil {
			it.fail(err)
			continue
		}
		it.atBaseline = same && verdict.Status == events.StatusPass
		id := VerdictID(it.e.ID())
		// The verdict's trace context is its publish span's, a child of
		// the span of handling the evidence (PublishAll sets it).
		vm, ve, err := binding.NewMsg(h.source, verdict, binding.WithID(id))
		if err != nil && verdict.Status == events.StatusDrift && events.ReasonOf(err) == events.ReasonTooLarge {
			verdict = tooLarge(verdict)
			vm, ve, err = binding.NewMsg(h.source, verdict, binding.WithID(id))
		}
		if err != nil {
			it.fail(natsbus.Permanent(fmt.Errorf("build verdict: %w", err)))
			continue
		}
		it.verdict, it.vm, it.ve = verdict, vm, ve
	}

	// The latest snapshot per host and target, before its verdict says to
	// approve it. A snapshot with its baseline's evidence is not kept: its
	// verdict record says so (VerdictRecord.AtBaseline), and the baseline
	// stands for it (Baselines.Observations). That is most snapshots of a
	// fleet, and this write is a third of the bus's work per snapshot.
	h.putNewest(ctx, h.latest, items, func(it *item) func(ordering) ([]byte, error) {
		if it.atBaseline {
			return func(ordering) ([]byte, error) { return nil, nil }
		}
		obs := &Observation{
			Host: it.ev.Host, Target: it.ev.Target, Digest: it.ev.Digest,
			EvidenceID: it.e.ID(), EvidenceSequence: it.ord.EvidenceSequence,
			Time: it.e.Time().UTC(), Snapshot: it.ev.Snapshot,
			SignedBy: it.ord.SignedBy, SignedSeq: it.ord.SignedSeq,
		}
		return func(ordering) ([]byte, error) {
			b, err := encodeRecord(obs)
			if err != nil {
				return nil, fmt.Errorf("encode latest snapshot: %w", err)
			}
			return b, nil
		}
	})

	if h.crashed(CrashBeforeRecord, items) {
		return h.results(items)
	}

	// The record lists the ids handled (VerdictRecord.Handled, as their
	// HandledMark), merged by the bucket with those it lists, before
	// their verdicts are published, as unconfirmed too
	// (VerdictRecord.Unconfirmed); once the stream has stored the
	// verdicts, they are confirmed. A message delivered again after a stop
	// between the two is a duplicate when VERDICTS holds its verdict, and
	// has the same verdict published when it does not: one verdict per
	// evidence id, whatever stops where.
	batch := map[string][]string{}
	for _, it := range pending(items) {
		batch[it.key] = append(batch[it.key], HandledMark(it.e.ID()))
	}
	for _, it := range pending(items) {
		it.ord.Handled, it.ord.Unconfirmed = batch[it.key], batch[it.key]
	}
	h.putNewest(ctx, h.verdicts, items, func(it *item) func(ordering) ([]byte, error) {
		rec := VerdictRecord{
			ID: it.ve.ID(), Time: it.ve.Time().UTC(), EvidenceID: it.e.ID(), Verdict: it.verdict,
			AtBaseline: it.atBaseline, IntervalSeconds: it.ev.IntervalSeconds,
		}
		return func(o ordering) ([]byte, error) {
			r := rec
			r.EvidenceSequence, r.SignedBy, r.SignedSeq, r.Handled, r.Unconfirmed = o.EvidenceSequence, o.SignedBy, o.SignedSeq, o.Handled, o.Unconfirmed
			b, err := encodeRecord(&r)
			if err != nil {
				return nil, fmt.Errorf("encode verdict record: %w", err)
			}
			return b, nil
		}
	})
	if h.crashed(CrashBeforePublish, items) {
		return h.results(items)
	}

	h.publishVerdicts(ctx, pending(items))
	if h.crashed(CrashBeforeConfirm, items) {
		return h.results(items)
	}
	confirmed := map[string][]string{}
	for _, it := range pending(items) {
		confirmed[it.key] = append(confirmed[it.key], HandledMark(it.e.ID()))
	}
	// Written with the keys' next records, or within confirmWithin
	// (latestBucket.confirmLater): ids left unconfirmed by a stop have
	// their verdicts looked up when delivered again.
	h.verdicts.confirmLater(confirmed)
	h.crashed(CrashBeforeAck, items)
	return h.results(items)
}

// results are the handler's results of items, counting the verdicts
// published.
func (h *handler) results(items []*item) []error {
	out := make([]error, len(items))
	for i, it := range items {
		if it.done {
			out[i] = lasting(it.err)
			continue
		}
		if it.ack.Duplicate {
			h.tel.duplicate(it.ctx)
			continue
		}
		h.tel.verdict(it.ctx, it.verdict.Status, it.ev.Target)
	}
	return out
}

// Where a test may stop the handler (handler.crash), as a crash would:
// before one of its writes, the rest of the batch undone and its
// messages redelivered.
const (
	CrashBeforeRecord  = "before the verdict record"
	CrashBeforePublish = "before the verdicts are published"
	CrashBeforeConfirm = "before the verdicts are confirmed"
	CrashBeforeAck     = "before the acknowledgements"
)

// errCrashed is the result of the messages of a batch a test stopped: as
// a stopping process's, retried.
var errCrashed = fmt.Errorf("stopped by a test (handler.crash): %w", context.Canceled)

// crashed reports whether a test stops the batch at point; then every
// item not settled fails, to be redelivered.
func (h *handler) crashed(point string, items []*item) bool {
	crash := h.crash.Load()
	if crash == nil || !(*crash)(point) {
		return false
	}
	for _, it := range pending(items) {
		it.fail(errCrashed)
	}
	return true
}

// stored reports whether VERDICTS holds the verdict of id published for
// host: its messages on rt.verdict.<host>.* read by sequence, their
// message ids compared (a rare path: a redelivery after a stop between
// the record and the publish's acknowledgement). Verdicts the stream no
// longer holds (consumed by every consumer) are not found: then the
// verdict is published again under its id, which a consumer of VERDICTS
// (the auditor links an id once per chain) treats as the same event.
func (h *handler) stored(ctx context.Context, host, id string) (bool, error) {
	subject := events.VerdictSubject(host, events.StatusPass)
	subject = subject[:strings.LastIndexByte(subject, '.')] + ".*"
	for seq, n := uint64(1), 0; n < maxStoredScan; n++ {
		var m *jetstream.RawStreamMsg
		err := natsbus.Retry(ctx, func(ctx context.Context) (err error) {
			m, err = h.verdictStream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("look up verdict %s: %w", id, err)
		}
		if m.Header.Get(binding.HeaderMsgID) == id {
			return true, nil
		}
		seq = m.Sequence + 1
	}
	return false, fmt.Errorf("look up verdict %s: more than %d verdicts of %s in VERDICTS", id, maxStoredScan, host)
}

// maxStoredScan bounds the verdicts stored looks at.
const maxStoredScan = 100_000

// lasting marks an error that will not pass as permanent, so that its
// message is dead-lettered with the reason and terminated, not retried
// into the consumer's window, which every host shares: a request the
// server refuses as bad (a JetStream API error 400: a value over the
// bucket's limit, a malformed request; not a lost compare-and-set), a
// message over the server's payload limit, an invalid subject. Anything
// else is retried (a timeout, no leader yet, a reconnection, a full
// stream, whatever a leader change answers), within the host's retry
// budget (natsbus.Options.TenantRetries).
func lasting(err error) error {
	if err == nil || natsbus.IsPermanent(err) {
		return err
	}
	apiErr, ok := errors.AsType[*jetstream.APIError](err)
	switch {
	case ok && apiErr.Code == 400 && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists),
		errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrBadSubject):
		return natsbus.Permanent(err)
	}
	return err
}

// pending returns the items not settled yet.
func pending(items []*item) []*item {
	out := make([]*item, 0, len(items))
	for _, it := range items {
		if !it.done {
			out = append(out, it)
		}
	}
	return out
}

// putNewest writes, for every key of the pending items, the record of the
// newest of them (by evidence sequence) to b, the keys at once
// (latestBucket.putAll), encoded by record(it) given the ordering b
// stores it with; an encoding to nil writes nothing; a failed write fails
// every item of its key (to be retried).
func (h *handler) putNewest(ctx context.Context, b *latestBucket, items []*item, record func(*item) func(ordering) ([]byte, error)) {
	newest := map[string]*item{}
	var keys []string
	for _, it := range pending(items) {
		cur, ok := newest[it.key]
		if !ok {
			keys = append(keys, it.key)
		}
		if !ok || it.ord.EvidenceSequence > cur.ord.EvidenceSequence {
			newest[it.key] = it
		}
	}
	ws := make([]*write, len(keys))
	for i, key := range keys {
		it := newest[key]
		ws[i] = &write{key: key, o: it.ord, value: record(it)}
	}
	b.putAll(ctx, h.js, ws)
	failed := map[string]error{}
	for _, w := range ws {
		switch {
		case w.err != nil:
			failed[w.key] = w.err
		case !w.wrote && b == h.verdicts:
			h.tel.staleWrite(ctx)
		}
	}
	if len(failed) == 0 {
		return
	}
	for _, it := range pending(items) {
		if err, ok := failed[it.key]; ok {
			it.fail(err)
		}
	}
}

// baselineResult is a baseline read once for a batch.
type baselineResult struct {
	p   *parsed
	err error
}

// baselinesOf reads the baseline of every item's baseline target, each
// once and all at once, after the items arrived (so a baseline approved
// before a snapshot was published is the one it is verified against).
func (h *handler) baselinesOf(ctx context.Context, items []*item) map[string]baselineResult {
	targets := map[string]events.Target{}
	for _, it := range items {
		targets[it.bkey] = it.ev.BaselineTarget()
	}
	keys := make([]string, 0, len(targets))
	for key := range targets {
		keys = append(keys, key)
	}
	results := make([]baselineResult, len(keys))
	eachAtOnce(len(keys), func(i int) {
		results[i].p, results[i].err = h.baseline(ctx, keys[i], targets[keys[i]])
	})
	out := make(map[string]baselineResult, len(keys))
	for i, key := range keys {
		out[key] = results[i]
	}
	return out
}

// eachAtOnce runs f(0) ... f(n-1) concurrently and waits for them; a
// single call runs on the caller's goroutine.
func eachAtOnce(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// publishVerdicts publishes the items' verdicts without waiting on each
// in turn, then waits for every acknowledgement; a verdict the stream did
// not acknowledge is published again one by one (the stream drops a copy
// it stored), and fails its item if that fails too (natsbus.PublishAll).
// Each verdict's publish span is a child of its evidence's handling span.
func (h *handler) publishVerdicts(ctx context.Context, items []*item) {
	out := make([]natsbus.Outgoing, len(items))
	for i, it := range items {
		out[i] = natsbus.Outgoing{Ctx: it.ctx, Msg: it.vm}
	}
	h.pub.PublishAll(ctx, out)
	for i, it := range items {
		if err := out[i].Err; err != nil {
			it.fail(fmt.Errorf("publish verdict: %w", err))
			continue
		}
		it.ack = out[i].Ack
	}
}

// verify returns the verdict of a snapshot, given its baseline as read
// (bl, or the error reading it), and whether the snapshot has the
// baseline's evidence (nothing but captured_at differs). The baseline is
// the one the event names (EvidenceCollected.Baseline) or else its
// target's. Only a failure to
// read the baseline is an error (to retry); everything about the snapshot
// or the baseline themselves is an error verdict.
//
// A named baseline of another target of the same kind (the reviewed
// snapshot of a sibling: the same unit or repository under another name)
// is compared as the baseline of this target: its target is taken to be
// the snapshot's. A baseline of another kind cannot apply.
func (h *handler) verify(ctx context.Context, evidenceID string, ev events.EvidenceCollected, current *snapshot.Snapshot,
	bl *parsed, blErr error) (events.Verdict, bool, error) {
	v := events.Verdict{Host: ev.Host, Target: ev.Target, EvidenceID: evidenceID, SnapshotDigest: ev.Digest}
	fail := func(format string, args ...any) (events.Verdict, bool, error) {
		v.Status, v.Report, v.Error = events.StatusError, nil, binding.Clip(fmt.Sprintf(format, args...), events.MaxMessageLength, "…")
		return v, false, nil
	}
	named := ev.BaselineTarget()
	switch {
	case errors.Is(blErr, ErrNoBaseline) && named != ev.Target:
		return fail("no baseline for %s (the baseline named for %s); approve one with `runtimetruth baseline approve %s`",
			named, ev.Target, snapshot.ShellQuote(named.String()))
	case errors.Is(blErr, ErrNoBaseline):
		return fail("no baseline for %s; approve one with `runtimetruth baseline approve %s`", ev.Target, snapshot.ShellQuote(ev.Target.String()))
	case errors.Is(blErr, ErrInvalidBaseline):
		return fail("%v", blErr)
	case blErr != nil:
		return v, false, blErr
	}
	v.BaselineDigest = bl.Digest
	if id := bl.RequiredIdentity; id != nil {
		_, err := h.attest.CheckStored(ctx, h.baselines, attestation.Baseline{
			Target: bl.Target, Digest: bl.Digest, SchemaVersion: bl.snap.SchemaVersion, Identity: id.Identity, Issuer: id.Issuer,
		})
		switch {
		case errors.Is(err, attestation.ErrAttestationRequired):
			return fail("%v", err)
		case err != nil:
			return v, false, err // the bucket could not be read: retry
		}
	}
	base := bl.snap
	if named != ev.Target {
		if named.Kind != ev.Target.Kind {
			return fail("the baseline named for %s is %s, of another kind", ev.Target, named)
		}
		b := *bl.snap
		b.Target = current.Target
		base = &b
	}
	var res *diff.Result
	var err error
	same := bl.sameEvidence(ev.Snapshot) // its target's too: never a named sibling's
	if same {
		// Nothing but captured_at differs: the verification is the
		// baseline's against itself, made once.
		res, err = bl.unchanged, bl.unchangedErr
	} else {
		res, err = diff.Verify(base, current, bl.sels)
	}
	if err != nil {
		return fail("%v", err)
	}
	v.Report = report.New(res, bl.sels)
	v.Status = events.StatusPass
	if !res.Empty() {
		v.Status = events.StatusDrift
	}
	return v, same, nil
}

// baseline reads a target's baseline (at key, its topology.BaselineKey),
// decoding it again only when its revision changed.
func (h *handler) baseline(ctx context.Context, key string, target events.Target) (*parsed, error) {
	var e jetstream.KeyValueEntry
	err := natsbus.Retry(ctx, func(ctx context.Context) (err error) {
		e, err = h.baselines.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w for %s", ErrNoBaseline, target)
	}
	if err != nil {
		return nil, fmt.Errorf("read baseline of %s: %w", target, err)
	}
	h.mu.Lock()
	p, ok := h.parsed[key]
	h.mu.Unlock()
	if ok && p.Revision == e.Revision() {
		return p, nil
	}
	p, err = decodeBaseline(e)
	if err != nil {
		return nil, err
	}
	p.forVerifier()
	h.mu.Lock()
	setBounded(h.parsed, maxCached, key, p)
	h.mu.Unlock()
	return p, nil
}

// tooLarge turns a drift verdict whose report does not fit an event into an
// error verdict that says so.
func tooLarge(v events.Verdict) events.Verdict {
	kinds := make([]string, len(v.Report.Changes))
	for i, c := range v.Report.Changes {
		kinds[i] = c.Kind
	}
	v.Status, v.Report = events.StatusError, nil
	v.Error = binding.Clip(fmt.Sprintf("drift in %s, but the report is too large for an event; run `runtimetruth verify` on the host for it",
		strings.Join(kinds, ", ")), events.MaxMessageLength, "…")
	return v
}
