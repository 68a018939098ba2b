package verifier

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/natstest"
)

// A batch verified after a newer one of the same host and target wrote
// its verdict record adds its evidence ids to that record, which stays
// the newer one's otherwise: whether this process wrote the record (it
// encodes it again) or another did (it reads and decodes it).
func TestHandledOutOfOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	_, url := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, url)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "handled"})
	require.NoError(t, err)

	record := func(id string, seq uint64) func(ordering) ([]byte, error) {
		return func(o ordering) ([]byte, error) {
			return marshalVerdictRecord(&VerdictRecord{
				ID: "verdict-" + id, Time: time.Unix(1700000000, 0).UTC(), EvidenceID: id, EvidenceSequence: seq,
				Verdict: events.Verdict{Host: "web-01", Status: events.StatusPass}, Handled: o.Handled,
			}, []byte(`{"host":"web-01","status":"pass"}`))
		}
	}
	read := func(key string) VerdictRecord {
		e, err := kv.Get(ctx, key)
		require.NoError(t, err)
		var r VerdictRecord
		require.NoError(t, json.Unmarshal(e.Value(), &r))
		return r
	}
	for _, tc := range []struct {
		name   string
		reopen bool // the older batch is another process's
	}{{"written by this process", false}, {"written by another", true}} {
		key := "web-01." + map[bool]string{false: "a", true: "b"}[tc.reopen]
		b := newLatestBucket(kv)
		wrote, err := b.put(ctx, key, ordering{EvidenceID: "new", EvidenceSequence: 9, Handled: marks("new")}, record("new", 9))
		require.NoError(t, err)
		require.True(t, wrote)
		if tc.reopen {
			b = newLatestBucket(kv)
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
