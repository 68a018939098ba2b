package verifier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// The verifier's periodic duties (health.Duties): while the last run of
// one failed, the verifier is not ready (/readyz 503 naming it), and each
// failed run is counted (health.MetricDutyFailures).
const (
	// DutySilence is the silence sweep: stale verdicts for silent targets.
	DutySilence = "silence sweep"
	// DutyRegistry is the watch that keeps the registry's view.
	DutyRegistry = "registry watch"
)

// MinStaleAfter is the least stale_after of a target by default: three
// collection intervals, but never less than this.
const MinStaleAfter = 2 * time.Minute

// StaleVerdictID is the id of the stale verdict that follows the evidence
// event evidenceID when nothing authentic comes after it: one id per
// silence, whichever verifier instance, or restart of one, publishes it.
func StaleVerdictID(evidenceID string) string {
	return events.StaleIDs.ID(evidenceID)
}

// staleWatch turns silence into a verdict. Every so often (Config's
// stale_after floor over two, at most a minute) it lists the
// verdicts-latest bucket (keys, revisions and write times only: a
// metadata-only watch read to its end), and when a host's target's record
// was last written longer ago than its stale_after, with an authentic
// verdict in it, it publishes a stale verdict naming the last evidence and
// its time, then writes the record as stale, a compare-and-set on the
// revision it saw. A listing costs one entry per host and target, however
// often they are written (a watch of every write cost the verifier about
// 40 CPU-µs per snapshot at benchmark rates). Fresh evidence replaces the
// record (a later evidence sequence) and so ends the silence. Every
// instance lists; the id is the same for all (StaleVerdictID), so the
// VERDICTS stream keeps one verdict, and one instance's write wins, after
// which the others see the record stale.
type staleWatch struct {
	kv     jetstream.KeyValue
	pub    *natsbus.Publisher
	source string
	after  time.Duration // Config.StaleAfter: 0 means three intervals, at least MinStaleAfter
	every  time.Duration // how often records are checked
	now    func() time.Time
	tel    *metrics
	log    *slog.Logger

	keys map[string]*staleKey
}

// staleKey is what the watch knows of one record.
type staleKey struct {
	rev     uint64
	written time.Time
	// checked is the revision read in full; due is then when that record
	// is stale (zero: never, a stale record or a one-off collection).
	checked uint64
	due     time.Time
}

func newStaleWatch(kv jetstream.KeyValue, pub *natsbus.Publisher, source string, after time.Duration, tel *metrics, log *slog.Logger) *staleWatch {
	floor := after
	if floor <= 0 {
		floor = MinStaleAfter
	}
	every := min(max(floor/2, 50*time.Millisecond), time.Minute)
	return &staleWatch{kv: kv, pub: pub, source: source, after: after, every: every, now: time.Now, tel: tel, log: log,
		keys: map[string]*staleKey{}}
}

// staleAfter is how long a target collected every interval may be silent.
func (s *staleWatch) staleAfter(interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0 // a one-off collection: nothing more is expected
	}
	if s.after > 0 {
		return s.after
	}
	return max(3*interval, MinStaleAfter)
}

// run lists and sweeps every s.every until ctx ends, reporting each
// round to duties (DutySilence): a listing that fails, or records that
// could not be checked or made stale, fail the service's readiness until
// a round succeeds.
func (s *staleWatch) run(ctx context.Context, duties *health.Duties) {
	tick := time.NewTicker(s.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := s.list(ctx)
		if err == nil {
			err = s.sweep(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.WarnContext(ctx, "turn silence into stale verdicts", "err", err)
		}
		duties.Report(ctx, DutySilence, err)
	}
}

// list reads the revision and write time of every record, forgetting
// the keys that are gone.
func (s *staleWatch) list(ctx context.Context) error {
	w, err := s.kv.WatchAll(ctx, jetstream.MetaOnly(), jetstream.IgnoreDeletes())
	if err != nil {
		return fmt.Errorf("list %s: %w", s.kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	seen := make(map[string]bool, len(s.keys))
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("list %s: the watch ended", s.kv.Bucket())
			}
			if e == nil { // every current record delivered
				for key := range s.keys {
					if !seen[key] {
						delete(s.keys, key)
					}
				}
				return nil
			}
			seen[e.Key()] = true
			k := s.keys[e.Key()]
			if k == nil {
				k = &staleKey{}
				s.keys[e.Key()] = k
			}
			k.rev, k.written = e.Revision(), e.Created()
		}
	}
}

// sweep checks every record written longer ago than the least
// stale_after, reading it in full once per revision, and makes the
// silent ones stale; it returns the first failure and how many there
// were.
func (s *staleWatch) sweep(ctx context.Context) error {
	now := s.now()
	floor := s.after
	if floor <= 0 {
		floor = MinStaleAfter
	}
	var first error
	failed := 0
	fail := func(key string, err error) {
		if first == nil {
			first = fmt.Errorf("%s: %w", key, err)
		}
		failed++
	}
	for key, k := range s.keys {
		if ctx.Err() != nil {
			return nil
		}
		if now.Sub(k.written) < floor {
			continue
		}
		if k.checked != k.rev {
			if err := s.check(ctx, key, k); err != nil {
				fail(key, err)
				continue
			}
		}
		if !k.due.IsZero() && !now.Before(k.due) {
			if err := s.markStale(ctx, key, k); err != nil {
				fail(key, err)
			}
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d records failed, the first %w", failed, len(s.keys), first)
	}
	return nil
}

// read returns the record under key at revision rev (false when it has
// moved on).
func (s *staleWatch) read(ctx context.Context, key string, rev uint64) (*VerdictRecord, bool, error) {
	e, err := s.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", key, err)
	}
	if e.Revision() != rev {
		return nil, false, nil
	}
	r, err := decodeVerdictRecord(e.Value())
	if err != nil {
		return nil, false, fmt.Errorf("read %s: %w", key, err)
	}
	return &r, true, nil
}

// check reads k's record and sets when it is due to be stale.
func (s *staleWatch) check(ctx context.Context, key string, k *staleKey) error {
	r, ok, err := s.read(ctx, key, k.rev)
	if err != nil || !ok {
		return err // moved on: the watch brings the new revision
	}
	k.checked, k.due = k.rev, time.Time{}
	if d := s.staleAfter(time.Duration(r.IntervalSeconds) * time.Second); d > 0 && r.Verdict.Status != events.StatusStale {
		k.due = k.written.Add(d)
	}
	return nil
}

// markStale publishes the stale verdict of k's record and writes the
// record as stale, unless it moved on meanwhile.
func (s *staleWatch) markStale(ctx context.Context, key string, k *staleKey) error {
	r, ok, err := s.read(ctx, key, k.rev)
	if err != nil || !ok {
		return err
	}
	last := r.Time.UTC()
	v := events.Verdict{
		Status: events.StatusStale, Host: r.Verdict.Host, Target: r.Verdict.Target, EvidenceID: r.EvidenceID,
		SnapshotDigest: r.Verdict.SnapshotDigest, BaselineDigest: r.Verdict.BaselineDigest,
		LastSeen: last.Format(time.RFC3339Nano),
		Error: fmt.Sprintf("no authentic evidence since %s (stale after %s)", last.Format(time.RFC3339),
			s.staleAfter(time.Duration(r.IntervalSeconds)*time.Second)),
	}
	vm, ve, err := binding.NewMsg(s.source, v, binding.WithID(StaleVerdictID(r.EvidenceID)))
	if err != nil {
		return fmt.Errorf("build stale verdict of %s on %s: %w", v.Target, v.Host, err)
	}
	ack, err := s.pub.Publish(ctx, vm)
	if err != nil {
		return fmt.Errorf("publish stale verdict of %s on %s: %w", v.Target, v.Host, err)
	}
	rec := *r
	rec.ID, rec.Time, rec.Verdict = ve.ID(), ve.Time().UTC(), v
	value, err := encodeRecord(&rec)
	if err != nil {
		return fmt.Errorf("encode stale verdict record: %w", err)
	}
	if _, err := s.kv.Update(ctx, key, value, k.rev); err != nil {
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return nil // fresh evidence, or another instance, was first
		}
		return fmt.Errorf("write stale verdict record %s: %w", key, err)
	}
	k.due = time.Time{}
	if !ack.Duplicate {
		s.tel.verdict(ctx, events.StatusStale, v.Target)
	}
	return nil
}
