package verifier

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// A batch verified after a newer one of the same host and target wrote
// its verdict record adds its evidence ids to that record, which stays
// the newer one's otherwise: whether this process wrote the record (it
// encodes it again) or another did (it reads and decodes it).
func TestHandledOutOfOrder(t *testing.T) {
	ctx, _, kv := recordBucket(t)
	read := func(key string) VerdictRecord {
		r, _ := readRecord(ctx, t, kv, key)
		return r
	}
	for _, tc := range []struct {
		name   string
		reopen bool // the older batch is another process's
	}{{"written by this process", false}, {"written by another", true}} {
		key := "web-01." + map[bool]string{false: "a", true: "b"}[tc.reopen]
		b := newLatestBucket(kv, verdictOrder)
		wrote, err := b.put(ctx, key, ordering{EvidenceID: "new", EvidenceSequence: 9, Handled: marks("new")}, record("new", 9))
		require.NoError(t, err)
		require.True(t, wrote)
		if tc.reopen {
			b = newLatestBucket(kv, verdictOrder)
		}
		wrote, err = b.put(ctx, key, ordering{EvidenceID: "old", EvidenceSequence: 5, Handled: marks("old", "older")}, record("old", 5))
		require.NoError(t, err, tc.name)
		assert.False(t, wrote, "%s: the older record is not written", tc.name)
		r := read(key)
		assert.Equal(t, "new", r.EvidenceID, tc.name)
		assert.Equal(t, uint64(9), r.EvidenceSequence, tc.name)
		assert.Equal(t, "verdict-new", r.ID, tc.name)
		assert.Equal(t, marks("new", "old", "older"), r.Handled, tc.name)
		cur, _, err := b.lookup(ctx, key)
		require.NoError(t, err)
		assert.True(t, cur.handled("older"), "%s: remembered", tc.name)

		// And once more: the rewritten record is encoded again in turn.
		_, err = b.put(ctx, key, ordering{EvidenceID: "oldest", EvidenceSequence: 2, Handled: marks("oldest")}, record("oldest", 2))
		require.NoError(t, err)
		r = read(key)
		assert.Equal(t, "verdict-new", r.ID, tc.name)
		assert.Equal(t, marks("new", "old", "older", "oldest"), r.Handled, tc.name)
	}
}

// marks is the HandledMark of each id.
func marks(ids ...string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = HandledMark(id)
	}
	return out
}

// A record lists the ids handled by their marks; one written before the
// marks lists the ids themselves, and is read as it was.
func TestOrderingHandled(t *testing.T) {
	id := "01a23551-f0a7-7c68-904b-ab378fb19073"
	assert.Len(t, HandledMark(id), 16)
	assert.NotEqual(t, HandledMark(id), HandledMark(id[:len(id)-1]+"4"))
	for _, tc := range []struct {
		name string
		o    ordering
		want bool
	}{
		{"its mark", ordering{EvidenceID: "other", Handled: marks("a", id, "b")}, true},
		{"the id itself (a record before the marks)", ordering{EvidenceID: "other", Handled: []string{"a", id}}, true},
		{"the record's own evidence", ordering{EvidenceID: id}, true},
		{"not listed", ordering{EvidenceID: "other", Handled: marks("a", "b")}, false},
	} {
		assert.Equal(t, tc.want, tc.o.handled(id), tc.name)
	}
}

// putAll settles each write as put would: a key this process knows is
// written by one compare-and-set publish among the others; one another
// writer moved on, one never read, one deleted, one holding a newer
// record (whose ids are merged) go through put.
func TestPutAll(t *testing.T) {
	ctx, js, kv := recordBucket(t)
	read := func(key string) (VerdictRecord, uint64) { return readRecord(ctx, t, kv, key) }
	b := newLatestBucket(kv, verdictOrder)
	other := newLatestBucket(kv, verdictOrder)
	at := func(id string, seq uint64) ordering {
		return ordering{EvidenceID: id, EvidenceSequence: seq, Handled: marks(id)}
	}
	// What this process and another wrote before.
	for _, key := range []string{"known", "moved", "deleted", "newer"} {
		wrote, err := b.put(ctx, key, at(key+"-1", 1), record(key+"-1", 1))
		require.NoError(t, err)
		require.True(t, wrote)
	}
	_, err := other.put(ctx, "moved", at("moved-2", 2), record("moved-2", 2))
	require.NoError(t, err)
	_, err = other.put(ctx, "newer", at("newer-9", 9), record("newer-9", 9))
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, "deleted"))
	b.forget("deleted") // as after a restart: the tombstone is what a read finds
	_, err = other.put(ctx, "unread", at("unread-1", 1), record("unread-1", 1))
	require.NoError(t, err)

	ws := []*write{
		{key: "known", o: at("known-5", 5), value: record("known-5", 5)},
		{key: "moved", o: at("moved-5", 5), value: record("moved-5", 5)},
		{key: "deleted", o: at("deleted-5", 5), value: record("deleted-5", 5)},
		{key: "newer", o: at("newer-5", 5), value: record("newer-5", 5)},
		{key: "unread", o: at("unread-5", 5), value: record("unread-5", 5)},
		{key: "fresh", o: at("fresh-5", 5), value: record("fresh-5", 5)},
		{key: "nothing", o: at("nothing-5", 5), value: func(ordering) ([]byte, error) { return nil, nil }},
	}
	b.putAll(ctx, js, ws)
	for _, w := range ws {
		require.NoError(t, w.err, w.key)
		switch w.key {
		case "newer":
			assert.False(t, w.wrote, w.key)
			r, _ := read(w.key)
			assert.Equal(t, "newer-9", r.EvidenceID)
			assert.Equal(t, marks("newer-1", "newer-9", "newer-5"), r.Handled, "the batch's id merged into the newer record")
		case "nothing":
			assert.False(t, w.wrote, w.key)
			_, err := kv.Get(ctx, w.key)
			assert.ErrorIs(t, err, jetstream.ErrKeyNotFound)
		default:
			assert.True(t, w.wrote, w.key)
			r, rev := read(w.key)
			assert.Equal(t, w.key+"-5", r.EvidenceID, w.key)
			cur, found, err := b.lookup(ctx, w.key)
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, rev, cur.rev, "%s: the revision written is remembered", w.key)
			assert.Equal(t, r.Handled, cur.Handled, w.key)
		}
	}
	known, _ := read("known")
	assert.Equal(t, marks("known-1", "known-5"), known.Handled)
}

// A batch's confirmations (confirmLater) ride along with the next record
// of their key, whether putAll or put writes it, and one that no record
// takes along is written on its own once it waited confirmWithin
// (flushConfirmed); until written, the process knows them confirmed.
func TestConfirmationsRideAlong(t *testing.T) {
	ctx, js, kv := recordBucket(t)
	b := newLatestBucket(kv, verdictOrder)
	read := func(key string) VerdictRecord {
		r, _ := readRecord(ctx, t, kv, key)
		return r
	}
	at := func(id string, seq uint64) ordering {
		return ordering{EvidenceID: id, EvidenceSequence: seq, Handled: marks(id), Unconfirmed: marks(id)}
	}
	for _, key := range []string{"ride", "put", "alone"} {
		wrote, err := b.put(ctx, key, at(key+"-1", 1), record(key+"-1", 1))
		require.NoError(t, err)
		require.True(t, wrote)
		assert.Equal(t, marks(key+"-1"), read(key).Unconfirmed, key)
	}
	b.confirmLater(map[string][]string{"ride": marks("ride-1"), "put": marks("put-1"), "alone": marks("alone-1")})
	assert.True(t, b.confirming("ride", HandledMark("ride-1")))

	// The next batch's record of "ride" (putAll) and of "put" (put) leave
	// the confirmed id out, and list their own unconfirmed.
	ws := []*write{{key: "ride", o: at("ride-2", 2), value: record("ride-2", 2)}}
	b.putAll(ctx, js, ws)
	require.NoError(t, ws[0].err)
	_, err := b.put(ctx, "put", at("put-2", 2), record("put-2", 2))
	require.NoError(t, err)
	for _, key := range []string{"ride", "put"} {
		r := read(key)
		assert.Equal(t, marks(key+"-1", key+"-2"), r.Handled, key)
		assert.Equal(t, marks(key+"-2"), r.Unconfirmed, key)
		assert.False(t, b.confirming(key, HandledMark(key+"-1")), "%s: written", key)
	}

	// "alone" gets no record: its confirmation waits confirmWithin, then
	// is written by itself.
	b.flushConfirmed(ctx, js, time.Now().Add(-confirmWithin))
	assert.Equal(t, marks("alone-1"), read("alone").Unconfirmed, "not due yet")
	assert.True(t, b.confirming("alone", HandledMark("alone-1")))
	b.flushConfirmed(ctx, js, time.Now())
	r := read("alone")
	assert.Empty(t, r.Unconfirmed)
	assert.Equal(t, marks("alone-1"), r.Handled)
	assert.False(t, b.confirming("alone", HandledMark("alone-1")))
	cur, _, err := b.lookup(ctx, "alone")
	require.NoError(t, err)
	assert.False(t, cur.unconfirmed("alone-1"), "remembered")
}

// recordBucket is a bucket of verdict records on a server of its own.
func recordBucket(t *testing.T) (context.Context, jetstream.JetStream, jetstream.KeyValue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	_, url := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, url)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "records"})
	require.NoError(t, err)
	return ctx, js, kv
}

// record encodes the verdict record of evidence id at stream sequence seq,
// as putNewest's value does.
func record(id string, seq uint64) func(ordering) ([]byte, error) {
	return func(o ordering) ([]byte, error) {
		return encodeRecord(&VerdictRecord{
			ID: "verdict-" + id, Time: time.Unix(1700000000, 0).UTC(), EvidenceID: id, EvidenceSequence: seq,
			Verdict: events.Verdict{Host: "web-01", Status: events.StatusPass, EvidenceID: id}, Handled: o.Handled, Unconfirmed: o.Unconfirmed,
		})
	}
}

// readRecord reads the verdict record under key and its revision.
func readRecord(ctx context.Context, t *testing.T, kv jetstream.KeyValue, key string) (VerdictRecord, uint64) {
	t.Helper()
	e, err := kv.Get(ctx, key)
	require.NoError(t, err, key)
	r, err := decodeVerdictRecord(e.Value())
	require.NoError(t, err)
	return r, e.Revision()
}
