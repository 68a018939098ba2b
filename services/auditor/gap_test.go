package auditor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// waitApplied waits until, for every stream, the last stream sequence
// the auditor's chains recorded is the stream's last one.
func waitApplied(t *testing.T, e *env, a *auditor.Auditor) {
	t.Helper()
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		want := e.stored(t)
		got := map[string]uint64{}
		for _, h := range a.Heads() {
			got[h.Stream] = max(got[h.Stream], h.StreamSeq)
		}
		for s, n := range want {
			if got[s] != n {
				return fmt.Errorf("stream %s recorded up to %d, want %d", s, got[s], n)
			}
		}
		return nil
	})
}

// recreate deletes a stream and creates it again, with its consumers.
func (e *env) recreate(t *testing.T, stream string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, e.js.DeleteStream(ctx, stream))
	require.NoError(t, topology.Ensure(ctx, e.js, 1))
	_, err := e.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
		Durable: testConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second,
		DeliverPolicy: jetstream.DeliverAllPolicy, MaxAckPending: topology.AuditorMaxAckPending, MaxDeliver: -1,
	})
	require.NoError(t, err)
}

// notices returns the auditor's notices of a reason about stream, and
// the stream's other records by stream sequence (counted).
func notices(recs []link.Record, stream string, reason link.Notice) ([]link.Record, map[uint64]int) {
	var out []link.Record
	seen := map[uint64]int{}
	for _, r := range recs {
		if r.Meta.Stream != stream {
			continue
		}
		if r.Meta.Rejected && r.Meta.Reason == string(reason.Reason) {
			out = append(out, r)
			continue
		}
		seen[r.Meta.StreamSeq]++
	}
	return out, seen
}

func chainsOf(recs []link.Record, stream string) map[string]bool {
	out := map[string]bool{}
	for _, r := range recs {
		if r.Meta.Stream == stream {
			out[r.Chain] = true
		}
	}
	return out
}

// TestPurgedRangeIsRecordedAsAGap purges messages the auditor never saw
// while it is down: on restart, every chain of the stream gets a link
// naming the missing range, the rest is recorded once, and the log
// verifies. A stream purged to its end gets its gap at start.
func TestPurgedRangeIsRecordedAsAGap(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	n := e.runOver(t, cfg, 0, 0, 30)
	before := e.stored(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e.publish(t, 100, 30)
	mid := e.stored(t)
	ev, err := e.js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	first, last := before[topology.StreamEvidence]+1, before[topology.StreamEvidence]+5
	require.Less(t, last, mid[topology.StreamEvidence])
	require.NoError(t, ev.Purge(ctx, jetstream.WithPurgeSequence(last+1)))
	vs, err := e.js.Stream(ctx, topology.StreamVerdicts)
	require.NoError(t, err)
	require.Greater(t, mid[topology.StreamVerdicts], before[topology.StreamVerdicts])
	require.NoError(t, vs.Purge(ctx))
	after := e.stored(t)

	a := start(t, cfg)
	waitApplied(t, e, a)
	stop(t, a)
	recs := readLog(t, cfg.JSONL.Path) // verifies

	gaps, seen := notices(recs, topology.StreamEvidence, link.Notice{Reason: link.ReasonGap})
	chains := chainsOf(recs[:n], topology.StreamEvidence)
	require.NotEmpty(t, chains)
	require.Len(t, gaps, len(chains), "one gap link in every chain of the stream")
	for _, g := range gaps {
		assert.True(t, chains[g.Chain], "gap in chain %s", g.Chain)
		assert.Equal(t, last, g.Meta.StreamSeq, "the gap's position is its last sequence")
		assert.Equal(t, events.Source("auditor", "test"), g.Meta.Source)
		assert.Contains(t, string(g.Event), fmt.Sprintf(`"stream_sequence":%d`, first))
		assert.Contains(t, string(g.Event), fmt.Sprintf("stream sequences %d..%d missing: expired or purged", first, last))
	}
	for seq := uint64(1); seq <= after[topology.StreamEvidence]; seq++ {
		want := 1
		if seq >= first && seq <= last {
			want = 0
		}
		assert.Equal(t, want, seen[seq], "EVIDENCE seq %d", seq)
	}

	gaps, seen = notices(recs, topology.StreamVerdicts, link.Notice{Reason: link.ReasonGap})
	require.NotEmpty(t, gaps, "the purged tail of VERDICTS is a gap")
	for _, g := range gaps {
		assert.Equal(t, mid[topology.StreamVerdicts], g.Meta.StreamSeq)
		assert.Contains(t, string(g.Event), fmt.Sprintf("stream sequences %d..%d missing",
			before[topology.StreamVerdicts]+1, mid[topology.StreamVerdicts]))
	}
	for seq := range seen {
		assert.LessOrEqual(t, seq, before[topology.StreamVerdicts], "VERDICTS seq %d was purged", seq)
	}
}

// TestStreamResetWhileDown deletes and re-creates a stream while the
// auditor is down: its new events, numbered from 1 again, are all
// recorded after a reset link in every chain of the stream, not
// acknowledged as duplicates.
func TestStreamResetWhileDown(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	n := e.runOver(t, cfg, 0, 0, 40)
	old := e.stored(t)[topology.StreamEvidence]

	e.recreate(t, topology.StreamEvidence)
	e.publish(t, 500, 10)
	now := e.stored(t)[topology.StreamEvidence]
	require.Less(t, now, old, "the new stream is behind the recorded position")

	a := start(t, cfg)
	waitApplied(t, e, a)
	stop(t, a)
	checkReset(t, readLog(t, cfg.JSONL.Path), n, old, now, now)
}

// TestStreamResetWhileRunning deletes and re-creates a stream under a
// running auditor, and fills it past the recorded position: the new
// stream's creation time tells its messages from redeliveries.
func TestStreamResetWhileRunning(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	a, n := e.startAndPublish(t, cfg, 0, 0, 20)
	old := e.stored(t)[topology.StreamEvidence]

	e.recreate(t, topology.StreamEvidence)
	e.publish(t, 500, 40)
	now := e.stored(t)[topology.StreamEvidence]
	require.Greater(t, now, old, "the new stream is past the recorded position")
	waitApplied(t, e, a)
	stop(t, a)
	checkReset(t, readLog(t, cfg.JSONL.Path), n, old, 0, now)
}

// checkReset checks the reset links of EVIDENCE (the chains' first n
// links recorded the old stream up to old; now, unless 0, is the new
// stream's last sequence when the reset was found) and that every
// message of the new stream (up to total) follows them once, in order.
func checkReset(t *testing.T, recs []link.Record, n int, old, now, total uint64) {
	t.Helper()
	chains := chainsOf(recs[:n], topology.StreamEvidence)
	require.NotEmpty(t, chains)
	resets := map[string]int{} // chain -> index of its reset
	for i, r := range recs {
		if r.Meta.Stream == topology.StreamEvidence && r.Meta.Reason == string(link.ReasonReset) {
			assert.True(t, r.Meta.Rejected)
			assert.Zero(t, r.Meta.StreamSeq, "the reset's position is the start of the new stream")
			want := fmt.Sprintf("stream reset: recorded up to %d, stream now at ", old)
			if now > 0 {
				want += fmt.Sprint(now)
			}
			assert.Contains(t, string(r.Event), want)
			_, dup := resets[r.Chain]
			assert.False(t, dup, "one reset in chain %s", r.Chain)
			resets[r.Chain] = i
		}
	}
	for c := range chains {
		assert.Contains(t, resets, c, "chain %s records the reset", c)
	}
	last := map[string]uint64{}
	seen := map[uint64]int{}
	for i, r := range recs[n:] {
		if r.Meta.Stream != topology.StreamEvidence || r.Meta.Rejected && strings.HasPrefix(r.Meta.Reason, "stream_") {
			continue
		}
		if at, ok := resets[r.Chain]; ok {
			assert.Greater(t, n+i, at, "chain %s: new events after its reset", r.Chain)
		}
		assert.Greater(t, r.Meta.StreamSeq, last[r.Chain], "chain %s in stream order", r.Chain)
		last[r.Chain] = r.Meta.StreamSeq
		seen[r.Meta.StreamSeq]++
	}
	assert.Len(t, seen, int(total))
	for seq := uint64(1); seq <= total; seq++ {
		assert.Equal(t, 1, seen[seq], "new EVIDENCE seq %d recorded once", seq)
	}
}
