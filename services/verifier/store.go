package verifier

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// BucketEvidence is the key-value bucket of the latest snapshot per host
// and target, key <host>.<kind>.<identifier> (topology.VerdictKey). It is
// what Baselines.Approve promotes. Defined in topology
// (topology.BucketEvidence).
const BucketEvidence = topology.BucketEvidence

// Topology returns the definitions the verifier ensures when it starts:
// topology.Verifier(replicas, consumer), that is topology.New(replicas)
// with the verifier's durable consumer named consumer, plus the
// evidence-latest bucket.
func Topology(replicas int, consumer string) topology.Topology {
	return topology.Verifier(replicas, consumer)
}

// Observation is the latest snapshot of a target seen on a host, as kept
// in the evidence-latest bucket (encodeRecord, decodeObservation).
type Observation struct {
	Host   string        `json:"host"`
	Target events.Target `json:"target"`
	// Digest is the snapshot's digest.
	Digest string `json:"digest"`
	// EvidenceID and EvidenceSequence identify the evidence.collected
	// event: its id and its EVIDENCE stream sequence (what "latest" orders
	// by).
	EvidenceID       string `json:"evidence_id"`
	EvidenceSequence uint64 `json:"evidence_sequence"`
	// Time is the event's time.
	Time time.Time `json:"time"`
	// Snapshot is the snapshot document as received.
	Snapshot json.RawMessage `json:"snapshot"`
	// AtBaseline is set (by Baselines.Observations, never stored) when the
	// host's latest snapshot had the evidence of the baseline it was
	// verified against: Snapshot and Digest are then that baseline's,
	// EvidenceID and EvidenceSequence the snapshot's, Time its verdict's.
	AtBaseline bool `json:"at_baseline,omitempty"`
	// SignedBy and SignedSeq are the key id and sequence number of the
	// evidence's verified signature (empty under enrollment off): the
	// snapshot is authentic evidence of Host signed by that key.
	SignedBy  string `json:"signed_by,omitempty"`
	SignedSeq uint64 `json:"signed_seq,omitempty"`
}

// VerdictRecord is the latest verdict per host and target, as kept in the
// verdicts-latest bucket (encodeRecord, decodeVerdictRecord).
type VerdictRecord struct {
	// ID and Time are the verdict event's.
	ID   string    `json:"id"`
	Time time.Time `json:"time"`
	// EvidenceID and EvidenceSequence identify the verified evidence
	// event.
	EvidenceID       string `json:"evidence_id"`
	EvidenceSequence uint64 `json:"evidence_sequence"`
	// Verdict is the verdict event's data.
	Verdict events.Verdict `json:"verdict"`
	// AtBaseline is set when the snapshot passed with its baseline's
	// evidence (nothing but captured_at differed). The verifier keeps no
	// copy of such a snapshot in evidence-latest: this record stands for
	// it there, and the baseline of digest Verdict.BaselineDigest is the
	// host's latest snapshot (Baselines.Observations).
	AtBaseline bool `json:"at_baseline,omitempty"`
	// SignedBy and SignedSeq are the key id and sequence number of the
	// verified evidence's signature (Config.Enrollment on): evidence of the
	// same key with a sequence number at or below SignedSeq is a replay.
	SignedBy  string `json:"signed_by,omitempty"`
	SignedSeq uint64 `json:"signed_seq,omitempty"`
	// Handled lists the evidence events of this host and target verified
	// last, up to 16, the oldest first (EvidenceID's among them), each as
	// its HandledMark: a message delivered again with one of these ids is
	// a duplicate, acknowledged without a second verdict, however long
	// after the first delivery and whether or not JetStream still knows
	// the verdict's message id.
	Handled []string `json:"handled,omitempty"`
	// Unconfirmed lists, as their HandledMark, the handled evidence events
	// whose verdicts were not yet confirmed stored: the record is written
	// before the verdicts are published, and the ids whose verdicts the
	// stream stored are left out of the key's next record, or, when none
	// is written within confirmWithin, of a write of their own
	// (latestBucket.confirmLater). A message delivered again with one
	// of these ids has its verdict looked up in VERDICTS and published only
	// if it is not there (the same verdict id): one verdict per evidence
	// id across a crash or a NATS restart between the writes, without
	// relying on the stream's duplicate window.
	Unconfirmed []string `json:"unconfirmed,omitempty"`
	// IntervalSeconds is the verified evidence's collection interval
	// (EvidenceCollected.IntervalSeconds): with it, how long the host and
	// target may stay silent before a stale verdict (Config.StaleAfter).
	IntervalSeconds int64 `json:"interval_seconds,omitempty"`
}

// ordering is what latestBucket orders and merges records by: the
// members of a record that say which evidence it is of, and (a verdict
// record's) which evidence events it lists handled.
type ordering struct {
	EvidenceID       string `json:"evidence_id"`
	EvidenceSequence uint64 `json:"evidence_sequence"`
	// SignedBy, SignedSeq, Handled and Unconfirmed are a verdict
	// record's (VerdictRecord).
	SignedBy    string   `json:"signed_by,omitempty"`
	SignedSeq   uint64   `json:"signed_seq,omitempty"`
	Handled     []string `json:"handled,omitempty"`
	Unconfirmed []string `json:"unconfirmed,omitempty"`
}

// ordering is what latestBucket orders the record by.
func (o *Observation) ordering() ordering {
	return ordering{EvidenceID: o.EvidenceID, EvidenceSequence: o.EvidenceSequence, SignedBy: o.SignedBy, SignedSeq: o.SignedSeq}
}

// ordering is what latestBucket orders and merges the record by.
func (r *VerdictRecord) ordering() ordering {
	return ordering{
		EvidenceID: r.EvidenceID, EvidenceSequence: r.EvidenceSequence, SignedBy: r.SignedBy, SignedSeq: r.SignedSeq,
		Handled: r.Handled, Unconfirmed: r.Unconfirmed,
	}
}

// unconfirmed reports whether the record lists evidence id among those
// whose verdict is not confirmed stored.
func (o ordering) unconfirmed(id string) bool {
	return slices.Contains(o.Unconfirmed, HandledMark(id))
}

// handled reports whether the record lists evidence id among those
// handled (by its HandledMark, or the id itself as records listed them
// before the marks).
func (o ordering) handled(id string) bool {
	return o.EvidenceID == id || slices.Contains(o.Handled, HandledMark(id)) || slices.Contains(o.Handled, id)
}

// HandledMark is how a verdict record lists an evidence id among those
// handled (VerdictRecord.Handled): the first 96 bits of the id's SHA-256,
// in unpadded base64url (16 characters). A record lists 16, so the marks
// take 272 bytes of it where the ids took 624. Two ids of the same host
// and target sharing a mark would make the second a duplicate of the
// first: by chance, one in 2^90; on purpose, only by the host, whose
// signed id it is, against its own evidence.
func HandledMark(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

// setBounded sets m[key] to v, emptying m first when it holds limit
// entries: the verifier's in-memory caches start over rather than grow
// past their bound (each key then costs one more read).
func setBounded[V any](m map[string]V, limit int, key string, v V) {
	if len(m) >= limit {
		clear(m)
	}
	m[key] = v
}

// maxCached bounds latestBucket's memory of revisions: past it the memory
// starts over (every key costs one more read).
const maxCached = 100_000

// latestBucket keeps the newest record per key in a bucket, newest by
// EVIDENCE stream sequence, whatever order records arrive in and however
// many verifiers write: a write is a compare-and-set on the revision it
// read. It remembers the revisions it wrote, so that a verifier writing
// alone needs no read before a write, and a batch one round trip for all
// its writes (putAll).
type latestBucket struct {
	kv jetstream.KeyValue
	// order decodes a stored record (decodeObservation,
	// decodeVerdictRecord) and returns its ordering.
	order func([]byte) (ordering, error)
	mu    sync.Mutex
	known map[string]seen
	// writing serializes this process's writes of a key (striped by
	// hash), so that concurrent batches do not race each other's
	// compare-and-set.
	writing [64]sync.Mutex
	// wrote keeps how this process encoded the records it wrote last (at
	// most maxWrote), so that addHandled can write one again with more
	// ids without reading and decoding it.
	wrote map[string]written
	// confirmed holds, per key, the marks of evidence whose verdicts
	// this process saw stored while the record still lists them
	// unconfirmed (confirmLater): the key's next write leaves them out,
	// and flushConfirmed writes those that no write took along.
	confirmed map[string]*noted
}

// written is a record this process wrote: its revision, the ordering it
// was encoded with and its encoder.
type written struct {
	rev   uint64
	o     ordering
	value func(ordering) ([]byte, error)
}

// maxWrote bounds latestBucket.wrote: the records that a batch verified
// out of order may find written by another batch are the last few
// written.
const maxWrote = 1024

type seen struct {
	rev uint64
	ordering
}

func newLatestBucket(kv jetstream.KeyValue, order func([]byte) (ordering, error)) *latestBucket {
	return &latestBucket{kv: kv, order: order, known: map[string]seen{}, wrote: map[string]written{}, confirmed: map[string]*noted{}}
}

// observationOrder and verdictOrder decode the records of evidence-latest
// and verdicts-latest for latestBucket.
func observationOrder(data []byte) (ordering, error) {
	o, err := decodeObservation(data)
	return o.ordering(), err
}

func verdictOrder(data []byte) (ordering, error) {
	r, err := decodeVerdictRecord(data)
	return r.ordering(), err
}

// lookup returns what the bucket holds for key (from memory when this
// process wrote or read it last).
func (b *latestBucket) lookup(ctx context.Context, key string) (seen, bool, error) {
	b.mu.Lock()
	s, ok := b.known[key]
	b.mu.Unlock()
	if ok {
		return s, true, nil
	}
	return b.read(ctx, key)
}

func (b *latestBucket) read(ctx context.Context, key string) (seen, bool, error) {
	var e jetstream.KeyValueEntry
	err := natsbus.Retry(ctx, func(ctx context.Context) (err error) {
		e, err = b.kv.Get(ctx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return seen{}, false, nil
	}
	if err != nil {
		return seen{}, false, fmt.Errorf("read %s/%s: %w", b.kv.Bucket(), key, err)
	}
	o, err := b.order(e.Value())
	if err != nil {
		// Unreadable: anything newer replaces it.
		o = ordering{}
	}
	s := seen{rev: e.Revision(), ordering: o}
	b.remember(key, s)
	return s, true, nil
}

func (b *latestBucket) remember(key string, s seen) {
	b.mu.Lock()
	defer b.mu.Unlock()
	setBounded(b.known, maxCached, key, s)
}

func (b *latestBucket) forget(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.known, key)
}

// put stores the record of o, encoded by value, under key unless the
// bucket holds a record of the same or a later evidence sequence; it
// reports whether it wrote. A verdict record's Handled is merged: o's
// (the ids of a batch) after those the stored record lists, cut to the
// newest maxHandled, so that no batch's ids are lost to another's write,
// and a record of a later sequence gets the batch's ids added
// (addHandled).
func (b *latestBucket) put(ctx context.Context, key string, o ordering, value func(ordering) ([]byte, error)) (bool, error) {
	w := &b.writing[b.stripe(key)]
	w.Lock()
	defer w.Unlock()
	for attempt := 0; ; attempt++ {
		cur, found, err := b.lookup(ctx, key)
		if err != nil {
			return false, err
		}
		rec, done := b.merged(key, cur.ordering, o)
		if found && cur.EvidenceSequence >= o.EvidenceSequence {
			if len(o.Handled) == 0 || slices.Equal(rec.Handled, cur.Handled) && slices.Equal(rec.Unconfirmed, cur.Unconfirmed) {
				return false, nil
			}
			err := b.setMarks(ctx, key, cur, rec.Handled, rec.Unconfirmed)
			if err == nil {
				b.confirmedWritten(key, done)
				return false, nil
			}
			b.forget(key)
			if attempt < 8 && errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				continue
			}
			return false, err
		}
		data, err := value(rec)
		if err != nil || data == nil {
			return false, err
		}
		var rev uint64
		err = natsbus.Retry(ctx, func(ctx context.Context) (err error) {
			if found {
				rev, err = b.kv.Update(ctx, key, data, cur.rev)
			} else {
				rev, err = b.kv.Create(ctx, key, data)
			}
			return err
		})
		if err == nil {
			b.remember(key, seen{rev: rev, ordering: rec})
			b.keep(key, written{rev: rev, o: rec, value: value})
			b.confirmedWritten(key, done)
			return true, nil
		}
		b.forget(key)
		if attempt < 8 && (errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)) {
			continue // another writer was first: read again
		}
		return false, fmt.Errorf("write %s/%s: %w", b.kv.Bucket(), key, err)
	}
}

// write is one record putAll stores: what put takes, and its result.
type write struct {
	key   string
	o     ordering
	value func(ordering) ([]byte, error)

	wrote bool
	err   error

	rec  ordering // the ordering stored (o with the merged Handled)
	done []string // the confirmed marks rec leaves out (confirmLater)
	fut  jetstream.PubAckFuture
	sync bool // left to put: the bucket is newer, or the write failed
}

// putAll stores each write's record as put does, the writes sent at once
// and their acknowledgements awaited together (one round trip for the
// lot, where put makes one each): a compare-and-set publish on the key's
// subject, expecting the revision this process knows. What that cannot
// settle (a record of the same or a later evidence sequence there, whose
// Handled put merges; a revision that moved; any error) goes through put,
// which reads the key again. The keys must differ.
func (b *latestBucket) putAll(ctx context.Context, js jetstream.JetStream, ws []*write) {
	var unknown []string
	for _, w := range ws {
		b.mu.Lock()
		_, ok := b.known[w.key]
		b.mu.Unlock()
		if !ok {
			unknown = append(unknown, w.key)
		}
	}
	// The keys this process has not read yet (after a start), read at
	// once rather than one by one below.
	eachAtOnce(len(unknown), func(i int) { _, _, _ = b.lookup(ctx, unknown[i]) })

	unlock := b.lockAll(ws)
	for _, w := range ws {
		b.send(js, w)
	}
	for _, w := range ws {
		if w.fut == nil {
			continue
		}
		select {
		case ack := <-w.fut.Ok():
			b.remember(w.key, seen{rev: ack.Sequence, ordering: w.rec})
			b.keep(w.key, written{rev: ack.Sequence, o: w.rec, value: w.value})
			b.confirmedWritten(w.key, w.done)
			w.wrote = true
		case <-w.fut.Err(): //nolint:errcheck // put writes it again, and keeps its error
			b.forget(w.key)
			w.sync = true
		case <-ctx.Done():
			w.sync = true
		}
		w.fut = nil
	}
	unlock()
	for _, w := range ws {
		if w.sync {
			w.wrote, w.err = b.put(ctx, w.key, w.o, w.value)
		}
	}
}

// send publishes w's record, if it has one to write over what this
// process knows of the key, with the key's revision expected; else it
// settles w or leaves it to put.
func (b *latestBucket) send(js jetstream.JetStream, w *write) {
	b.mu.Lock()
	cur, found := b.known[w.key]
	b.mu.Unlock()
	if !found {
		// Unknown still (its read failed), or absent: put creates it
		// (kv.Create also takes over a deleted key).
		w.sync = true
		return
	}
	if cur.EvidenceSequence >= w.o.EvidenceSequence {
		w.sync = len(w.o.Handled) > 0 // put merges the ids, or finds nothing to do
		return
	}
	w.rec, w.done = b.merged(w.key, cur.ordering, w.o)
	data, err := w.value(w.rec)
	if err != nil || data == nil {
		w.err = err
		return
	}
	m := &nats.Msg{Subject: "$KV." + b.kv.Bucket() + "." + w.key, Header: nats.Header{}, Data: data}
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(cur.rev, 10))
	f, err := js.PublishMsgAsync(m)
	if err != nil {
		w.sync = true
		return
	}
	w.fut = f
}

// lockAll takes the writing locks of the keys of ws, in order, and
// returns their release.
func (b *latestBucket) lockAll(ws []*write) func() {
	var stripes []int
	for _, w := range ws {
		stripes = append(stripes, b.stripe(w.key))
	}
	slices.Sort(stripes)
	stripes = slices.Compact(stripes)
	for _, i := range stripes {
		b.writing[i].Lock()
	}
	return func() {
		for _, i := range stripes {
			b.writing[i].Unlock()
		}
	}
}

// stripe is the index of key's writing lock.
func (b *latestBucket) stripe(key string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(b.writing)))
}

// maxHandled is how many evidence ids of a host and target its verdict
// record lists (VerdictRecord.Handled).
const maxHandled = 16

// mergeHandled is ids after prior, each once, cut to the newest
// maxHandled.
func mergeHandled(prior, ids []string) []string {
	out := slices.Clone(prior)
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	if len(out) > maxHandled {
		out = out[len(out)-maxHandled:]
	}
	return out
}

// merged is the ordering to store under key over cur, the stored one: o,
// and, for a verdict record (o lists handled ids), the ids cur lists
// merged in (mergeHandled), the unconfirmed ones without those this
// process saw confirmed (done, returned: confirmedWritten once stored).
func (b *latestBucket) merged(key string, cur, o ordering) (rec ordering, done []string) {
	rec = o
	if len(o.Handled) == 0 {
		return rec, nil
	}
	rec.Handled = mergeHandled(cur.Handled, o.Handled)
	rec.Unconfirmed = mergeHandled(cur.Unconfirmed, o.Unconfirmed)
	b.mu.Lock()
	if n := b.confirmed[key]; n != nil {
		done = slices.Clone(n.marks)
	}
	b.mu.Unlock()
	if len(done) > 0 {
		rec.Unconfirmed = slices.DeleteFunc(rec.Unconfirmed, func(m string) bool { return slices.Contains(done, m) })
	}
	if len(rec.Unconfirmed) == 0 {
		rec.Unconfirmed = nil
	}
	return rec, done
}

// noted is the confirmations of a key noted (confirmLater), and since
// when.
type noted struct {
	marks []string
	since time.Time
}

// confirmLater notes the marks of each key as confirmed: their verdicts
// are stored. The key's next write leaves them out of its unconfirmed
// ones (merged), and keepConfirming writes those no write took along
// within confirmWithin, so that under load a batch's confirmations ride
// along with the next records of their keys instead of costing a write
// each.
func (b *latestBucket) confirmLater(marks map[string][]string) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for key, m := range marks {
		n := b.confirmed[key]
		if n == nil {
			n = &noted{since: now}
			b.confirmed[key] = n
		}
		n.marks = append(n.marks, m...)
	}
}

// confirming reports whether mark of key is noted confirmed
// (confirmLater) and not written yet.
func (b *latestBucket) confirming(key, mark string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.confirmed[key]
	return n != nil && slices.Contains(n.marks, mark)
}

// confirmedWritten forgets the confirmed marks done of key: a record
// without them is stored.
func (b *latestBucket) confirmedWritten(key string, done []string) {
	if len(done) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.confirmed[key]
	if n == nil {
		return
	}
	n.marks = slices.DeleteFunc(n.marks, func(m string) bool { return slices.Contains(done, m) })
	if len(n.marks) == 0 {
		delete(b.confirmed, key)
	}
}

// flushConfirmed writes the confirmations noted (confirmLater) at or
// before noted, that no record write took along (confirmAll). One not
// written leaves its ids unconfirmed: a redelivery then looks their
// verdicts up, and finds them.
func (b *latestBucket) flushConfirmed(ctx context.Context, js jetstream.JetStream, noted time.Time) {
	marks := map[string][]string{}
	b.mu.Lock()
	for key, n := range b.confirmed {
		if !n.since.After(noted) {
			marks[key] = n.marks
			delete(b.confirmed, key)
		}
	}
	b.mu.Unlock()
	if len(marks) > 0 {
		b.confirmAll(ctx, js, marks)
	}
}

// confirmWithin is how long confirmations wait for a record write of
// their key to take them along (keepConfirming): a third of the
// consumer's ack wait, so that an evidence event redelivered after a lost
// acknowledgement finds its verdict confirmed.
const confirmWithin = topology.AckWait / 3

// keepConfirming writes, every second until ctx ends, the confirmations
// noted longer than confirmWithin ago (Verifier.Start; its consume loop
// writes the rest after the last batch).
func (b *latestBucket) keepConfirming(ctx context.Context, js jetstream.JetStream) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			b.flushConfirmed(ctx, js, now.Add(-confirmWithin))
		}
	}
}

// keep remembers how the record under key was written.
func (b *latestBucket) keep(key string, w written) {
	b.mu.Lock()
	defer b.mu.Unlock()
	setBounded(b.wrote, maxWrote, key, w)
}

// setMarks rewrites the verdict record under key, of revision cur.rev,
// to list handled and unconfirmed: the ids of a batch older than the
// record, verified while another batch wrote it (a host's snapshots
// verified out of order, concurrently), or the record's once a batch's
// verdicts are confirmed stored (confirm). A record this process wrote is
// encoded again as it was, with the new lists; another is read, decoded
// and encoded in full.
func (b *latestBucket) setMarks(ctx context.Context, key string, cur seen, handled, unconfirmed []string) error {
	b.mu.Lock()
	w, ok := b.wrote[key]
	b.mu.Unlock()
	if ok && w.rev == cur.rev {
		o := w.o
		o.Handled, o.Unconfirmed = handled, unconfirmed
		value, err := w.value(o)
		if err != nil {
			return fmt.Errorf("encode %s/%s: %w", b.kv.Bucket(), key, err)
		}
		return b.rewrite(ctx, key, cur, o, value, w.value)
	}
	e, err := b.kv.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read %s/%s: %w", b.kv.Bucket(), key, err)
	}
	if e.Revision() != cur.rev {
		return jetstream.ErrKeyRevisionMismatch
	}
	r, err := decodeVerdictRecord(e.Value())
	if err != nil {
		return fmt.Errorf("read %s/%s: %w", b.kv.Bucket(), key, err)
	}
	r.Handled, r.Unconfirmed = handled, unconfirmed
	value, err := encodeRecord(&r)
	if err != nil {
		return fmt.Errorf("encode %s/%s: %w", b.kv.Bucket(), key, err)
	}
	o := cur.ordering
	o.Handled, o.Unconfirmed = handled, unconfirmed
	return b.rewrite(ctx, key, cur, o, value, nil)
}

// confirmAll confirms the marks of each key (confirm), the records this
// process wrote last encoded again and sent at once, their
// acknowledgements awaited together (one round trip, as putAll); any
// other goes through confirm.
func (b *latestBucket) confirmAll(ctx context.Context, js jetstream.JetStream, marks map[string][]string) {
	keys := slices.Sorted(maps.Keys(marks))
	type sent struct {
		key string
		o   ordering
		w   written
		fut jetstream.PubAckFuture
	}
	var out []sent
	var slow []string
	ws := make([]*write, len(keys))
	for i, key := range keys {
		ws[i] = &write{key: key}
	}
	unlock := b.lockAll(ws)
	for _, key := range keys {
		b.mu.Lock()
		cur, found := b.known[key]
		w, ok := b.wrote[key]
		b.mu.Unlock()
		if !found || !ok || w.rev != cur.rev {
			slow = append(slow, key)
			continue
		}
		o := w.o
		o.Unconfirmed = slices.DeleteFunc(slices.Clone(o.Unconfirmed), func(m string) bool { return slices.Contains(marks[key], m) })
		if len(o.Unconfirmed) == len(w.o.Unconfirmed) {
			continue // confirmed already
		}
		if len(o.Unconfirmed) == 0 {
			o.Unconfirmed = nil
		}
		data, err := w.value(o)
		if err != nil {
			slow = append(slow, key)
			continue
		}
		m := &nats.Msg{Subject: "$KV." + b.kv.Bucket() + "." + key, Header: nats.Header{}, Data: data}
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(cur.rev, 10))
		f, err := js.PublishMsgAsync(m)
		if err != nil {
			slow = append(slow, key)
			continue
		}
		out = append(out, sent{key: key, o: o, w: w, fut: f})
	}
	for _, s := range out {
		select {
		case ack := <-s.fut.Ok():
			b.remember(s.key, seen{rev: ack.Sequence, ordering: s.o})
			b.keep(s.key, written{rev: ack.Sequence, o: s.o, value: s.w.value})
		case <-s.fut.Err(): //nolint:errcheck // confirm writes it again
			b.forget(s.key)
			slow = append(slow, s.key)
		case <-ctx.Done():
		}
	}
	unlock()
	for _, key := range slow {
		_ = b.confirm(ctx, key, marks[key])
	}
}

// confirm takes marks (HandledMark) off the unconfirmed ids of the
// verdict record under key: their verdicts are stored.
func (b *latestBucket) confirm(ctx context.Context, key string, marks []string) error {
	w := &b.writing[b.stripe(key)]
	w.Lock()
	defer w.Unlock()
	for attempt := 0; ; attempt++ {
		cur, found, err := b.lookup(ctx, key)
		if err != nil || !found {
			return err
		}
		rest := slices.DeleteFunc(slices.Clone(cur.Unconfirmed), func(m string) bool { return slices.Contains(marks, m) })
		if len(rest) == len(cur.Unconfirmed) {
			return nil
		}
		if len(rest) == 0 {
			rest = nil
		}
		err = b.setMarks(ctx, key, cur, cur.Handled, rest)
		if err == nil {
			return nil
		}
		b.forget(key)
		if attempt < 8 && errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue
		}
		return err
	}
}

// rewrite writes value, the record of o, over the revision cur.rev of
// key; encode is how it was encoded (nil: not by this process's encoder).
func (b *latestBucket) rewrite(ctx context.Context, key string, cur seen, o ordering, value []byte,
	encode func(ordering) ([]byte, error)) error {
	rev, err := b.kv.Update(ctx, key, value, cur.rev)
	if err != nil {
		return fmt.Errorf("write %s/%s: %w", b.kv.Bucket(), key, err)
	}
	b.remember(key, seen{rev: rev, ordering: o})
	if encode != nil {
		b.keep(key, written{rev: rev, o: o, value: encode})
	}
	return nil
}

// Status reads the latest verdicts (the verdicts-latest bucket), for
// `runtimetruth status`.
type Status struct {
	js jetstream.JetStream
}

// NewStatus returns a Status reading through js.
func NewStatus(js jetstream.JetStream) *Status { return &Status{js: js} }

// ErrNoVerdict is returned by Status.Get for a host and target without a
// verdict.
var ErrNoVerdict = errors.New("no verdict")

// List returns the latest verdict of every host and target, ordered by
// host, then target.
func (s *Status) List(ctx context.Context) ([]VerdictRecord, error) {
	kv, err := s.js.KeyValue(ctx, topology.BucketVerdicts)
	if err != nil {
		return nil, fmt.Errorf("verdicts bucket: %w", err)
	}
	all, err := entries(ctx, kv, ">")
	if err != nil {
		return nil, err
	}
	out, err := decodeEntries(all, "verdict", "", decodeVerdictRecord)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b VerdictRecord) int {
		if c := strings.Compare(a.Verdict.Host, b.Verdict.Host); c != 0 {
			return c
		}
		return strings.Compare(a.Verdict.Target.String(), b.Verdict.Target.String())
	})
	return out, nil
}

// Get returns the latest verdict of a host's target, or ErrNoVerdict.
func (s *Status) Get(ctx context.Context, host string, target events.Target) (*VerdictRecord, error) {
	kv, err := s.js.KeyValue(ctx, topology.BucketVerdicts)
	if err != nil {
		return nil, fmt.Errorf("verdicts bucket: %w", err)
	}
	e, err := kv.Get(ctx, topology.VerdictKey(host, target))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w for %s on %s", ErrNoVerdict, target, host)
	}
	if err != nil {
		return nil, fmt.Errorf("read verdict: %w", err)
	}
	r, err := decodeVerdictRecord(e.Value())
	if err != nil {
		return nil, fmt.Errorf("verdict of %s on %s: %w", target, host, err)
	}
	return &r, nil
}

// Revision is the verdicts bucket's latest revision: what List reads
// after it, with Watch(ctx, revision), misses no verdict.
func (s *Status) Revision(ctx context.Context) (uint64, error) {
	kv, err := s.js.KeyValue(ctx, topology.BucketVerdicts)
	if err != nil {
		return 0, fmt.Errorf("verdicts bucket: %w", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return 0, fmt.Errorf("verdicts bucket: %w", err)
	}
	bs, ok := st.(*jetstream.KeyValueBucketStatus)
	if !ok {
		return 0, fmt.Errorf("verdicts bucket: no stream state")
	}
	return bs.StreamInfo().State.LastSeq, nil
}

// VerdictUpdate is a verdict record stored at a revision of the verdicts
// bucket.
type VerdictUpdate struct {
	Revision uint64
	Record   VerdictRecord
}

// Watch delivers every verdict record stored after revision after, in
// order (those still in the bucket: a key keeps its latest record), and
// each one stored from then on, until ctx ends, when the channel closes.
// A record that does not decode is skipped.
func (s *Status) Watch(ctx context.Context, after uint64) (<-chan VerdictUpdate, error) {
	kv, err := s.js.KeyValue(ctx, topology.BucketVerdicts)
	if err != nil {
		return nil, fmt.Errorf("verdicts bucket: %w", err)
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes(), jetstream.ResumeFromRevision(after+1))
	if err != nil {
		return nil, fmt.Errorf("watch verdicts: %w", err)
	}
	out := make(chan VerdictUpdate)
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		for {
			var e jetstream.KeyValueEntry
			select {
			case u, ok := <-w.Updates():
				if !ok {
					return
				}
				e = u
			case <-ctx.Done():
				return
			}
			if e == nil {
				continue // the marker after what was stored: updates follow
			}
			r, err := decodeVerdictRecord(e.Value())
			if err != nil {
				continue
			}
			select {
			case out <- VerdictUpdate{Revision: e.Revision(), Record: r}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// decodeEntries decodes the value of every entry, in order; the first
// that decode refuses fails it, named what and its key without trim.
func decodeEntries[T any](all []jetstream.KeyValueEntry, what, trim string, decode func([]byte) (T, error)) ([]T, error) {
	out := make([]T, 0, len(all))
	for _, e := range all {
		v, err := decode(e.Value())
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, strings.TrimPrefix(e.Key(), trim), err)
		}
		out = append(out, v)
	}
	return out, nil
}

// entries returns the current entry of every key matching filter, in one
// pass over the bucket.
func entries(ctx context.Context, kv jetstream.KeyValue, filter string) ([]jetstream.KeyValueEntry, error) {
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	var out []jetstream.KeyValueEntry
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok || e == nil { // nil: the current values are all delivered
				return out, nil
			}
			out = append(out, e)
		case <-ctx.Done():
			return nil, fmt.Errorf("read %s: %w", kv.Bucket(), ctx.Err())
		}
	}
}

// StatusWord is a verdict status as status, up and the console show it:
// PASS, DRIFT, STALE, else ERROR.
func StatusWord(s events.Status) string {
	switch s {
	case events.StatusPass:
		return "PASS"
	case events.StatusDrift:
		return "DRIFT"
	case events.StatusStale:
		return "STALE"
	}
	return "ERROR"
}

// Summary summarizes a verdict in one line: an error or stale verdict's
// error, a drift's count of changes and the first. Its text is the
// evidence's: a caller escapes it for its output.
func Summary(v events.Verdict) string {
	switch {
	case v.Status == events.StatusError, v.Status == events.StatusStale:
		return v.Error
	case v.Report != nil && len(v.Report.Changes) > 0:
		n := 0
		for _, c := range v.Report.Changes {
			n += max(1, len(c.Fields))
		}
		first := v.Report.Changes[0]
		field := ""
		if len(first.Fields) > 0 {
			field = "." + first.Fields[0].Field
		}
		return fmt.Sprintf("%d change(s), first %s%s", n, first.Kind, field)
	}
	return ""
}
