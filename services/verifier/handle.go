package verifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/topology"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// handler verifies one evidence event.
type handler struct {
	js        jetstream.JetStream
	source    string
	counts    *counts
	baselines jetstream.KeyValue
	attest    *attestation.Checker
	latest    *latestBucket // evidence-latest
	verdicts  *latestBucket // verdicts-latest

	mu     sync.Mutex
	parsed map[string]*parsed // baseline key → the last baseline decoded, by revision
}

func newHandler(ctx context.Context, js jetstream.JetStream, source string, c *counts, attest *attestation.Checker) (*handler, error) {
	h := &handler{js: js, source: source, counts: c, attest: attest, parsed: map[string]*parsed{}}
	for name, dst := range map[string]*jetstream.KeyValue{topology.BucketBaselines: &h.baselines} {
		kv, err := js.KeyValue(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("%s bucket: %w", name, err)
		}
		*dst = kv
	}
	for name, dst := range map[string]**latestBucket{BucketEvidence: &h.latest, topology.BucketVerdicts: &h.verdicts} {
		kv, err := js.KeyValue(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("%s bucket: %w", name, err)
		}
		*dst = newLatestBucket(kv)
	}
	return h, nil
}

// verdictSpace is the UUIDv5 namespace of verdict ids.
var verdictSpace = uuid.MustParse("4d5a7c0e-9b7e-4b8a-a3c4-2f0e6f1d9c37")

// VerdictID is the id of the verdict of an evidence event: a UUIDv5 of the
// evidence id. A redelivered snapshot yields the same verdict id, which the
// VERDICTS stream drops as a duplicate.
func VerdictID(evidenceID string) string {
	return uuid.NewSHA1(verdictSpace, []byte(evidenceID)).String()
}

// handle verifies one evidence event: it records the snapshot as its host's
// latest, verifies it against the baseline, publishes the verdict and
// records it as the latest verdict. A malformed event is a permanent error
// (dead-lettered); a store or publish failure is retried.
func (h *handler) handle(ctx context.Context, m jetstream.Msg) error {
	e, ev, err := events.Read[events.EvidenceCollected](m)
	if err != nil {
		if errors.Is(err, events.ErrInvalid) {
			return natsbus.Permanent(err)
		}
		return err
	}
	md, err := m.Metadata()
	if err != nil {
		return natsbus.Permanent(fmt.Errorf("metadata: %w", err))
	}
	key := topology.VerdictKey(ev.Host, ev.Target)
	order := ordering{EvidenceID: e.ID(), EvidenceSequence: md.Sequence.Stream}

	obs, err := json.Marshal(Observation{
		Host: ev.Host, Target: ev.Target, Digest: ev.Digest,
		EvidenceID: e.ID(), EvidenceSequence: order.EvidenceSequence,
		Time: e.Time().UTC(), Snapshot: ev.Snapshot,
	})
	if err != nil {
		return fmt.Errorf("encode latest snapshot: %w", err)
	}
	if _, err := h.latest.put(ctx, key, order, obs); err != nil {
		return err
	}

	if cur, found, err := h.verdicts.lookup(ctx, key); err != nil {
		return err
	} else if found && cur.EvidenceID == e.ID() {
		h.counts.duplicate.Add(1) // published and recorded before a redelivery
		return nil
	}

	verdict, err := h.verify(ctx, e.ID(), ev)
	if err != nil {
		return err
	}
	vm, ve, err := events.NewMsg(h.source, verdict, events.WithID(VerdictID(e.ID())), traceOf(e))
	if err != nil && verdict.Status == events.StatusDrift && events.ReasonOf(err) == events.ReasonTooLarge {
		verdict = tooLarge(verdict)
		vm, ve, err = events.NewMsg(h.source, verdict, events.WithID(VerdictID(e.ID())), traceOf(e))
	}
	if err != nil {
		return natsbus.Permanent(fmt.Errorf("build verdict: %w", err))
	}
	var ack *jetstream.PubAck
	err = natsbus.Retry(ctx, func(ctx context.Context) (err error) {
		ack, err = h.js.PublishMsg(ctx, vm)
		return err
	})
	if err != nil {
		return fmt.Errorf("publish verdict: %w", err)
	}

	rec, err := json.Marshal(VerdictRecord{
		ID: ve.ID(), Time: ve.Time().UTC(),
		EvidenceID: e.ID(), EvidenceSequence: order.EvidenceSequence, Verdict: verdict,
	})
	if err != nil {
		return fmt.Errorf("encode verdict record: %w", err)
	}
	wrote, err := h.verdicts.put(ctx, key, order, rec)
	if err != nil {
		return err
	}
	if !wrote {
		h.counts.stale.Add(1)
	}
	if ack.Duplicate {
		h.counts.duplicate.Add(1)
		return nil
	}
	switch verdict.Status {
	case events.StatusPass:
		h.counts.pass.Add(1)
	case events.StatusDrift:
		h.counts.drift.Add(1)
	default:
		h.counts.fail.Add(1)
	}
	return nil
}

func traceOf(e event.Event) events.Option {
	ext := e.Extensions()
	tp, _ := ext[events.ExtTraceparent].(string)
	ts, _ := ext[events.ExtTracestate].(string)
	return events.WithTraceContext(tp, ts)
}

// verify returns the verdict of a snapshot. Only a failure to read the
// baseline is an error (to retry); everything about the snapshot or the
// baseline themselves is an error verdict.
func (h *handler) verify(ctx context.Context, evidenceID string, ev events.EvidenceCollected) (events.Verdict, error) {
	v := events.Verdict{Host: ev.Host, Target: ev.Target, EvidenceID: evidenceID, SnapshotDigest: ev.Digest}
	fail := func(format string, args ...any) (events.Verdict, error) {
		v.Status, v.Report, v.Error = events.StatusError, nil, clip(fmt.Sprintf(format, args...))
		return v, nil
	}
	bl, err := h.baseline(ctx, ev.Target)
	switch {
	case errors.Is(err, ErrNoBaseline):
		return fail("no baseline for %s; approve one with `runtimetruth baseline approve %s`", ev.Target, shellQuote(ev.Target.String()))
	case errors.Is(err, ErrInvalidBaseline):
		return fail("%v", err)
	case err != nil:
		return v, err
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
			return v, err // the bucket could not be read: retry
		}
	}
	current, err := ev.ParseSnapshot()
	if err != nil {
		return fail("snapshot: %v", err)
	}
	res, err := diff.Verify(bl.snap, current, bl.sels)
	if err != nil {
		return fail("%v", err)
	}
	v.Report = report.New(res, bl.sels)
	v.Status = events.StatusPass
	if !res.Empty() {
		v.Status = events.StatusDrift
	}
	return v, nil
}

// baseline reads a target's baseline, decoding it again only when its
// revision changed.
func (h *handler) baseline(ctx context.Context, target events.Target) (*parsed, error) {
	key := topology.BaselineKey(target)
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
	h.mu.Lock()
	if len(h.parsed) >= maxCached {
		clear(h.parsed)
	}
	h.parsed[key] = p
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
	v.Error = clip(fmt.Sprintf("drift in %s, but the report is too large for an event; run `runtimetruth verify` on the host for it",
		strings.Join(kinds, ", ")))
	return v
}

// clip cuts an error text to the verdict's limit.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= events.MaxMessageLength {
		return s
	}
	n := events.MaxMessageLength - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	plain := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@%+=,", r)
	}
	if s != "" && strings.IndexFunc(s, func(r rune) bool { return !plain(r) }) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
