package verifier_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// TestLastingFailureIsTerminated: a write the server refuses every time
// (here the latest snapshot, over its bucket's value limit) fails the
// evidence for good: it is dead-lettered with the server's reason and
// terminated at once, never retried into the consumer's window that every
// host shares (before, it was nak'ed and held a slot of the 256 for each
// of its ten deliveries, the retry delays between them).
func TestLastingFailureIsTerminated(t *testing.T) {
	ctx, url, js := server(t)
	v := start(ctx, t, url, nil)
	var cfg = verifier.Topology(1, "").Buckets
	for _, b := range cfg {
		if b.Bucket == verifier.BucketEvidence {
			b.MaxValueSize = 64
			_, err := js.UpdateKeyValue(ctx, b)
			require.NoError(t, err)
		}
	}
	publishSnapshot(ctx, t, js, "web-01", snap(unit(1)))
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := counted(t, v, natsbus.MetricDeadLettered, natsbus.AttrReason.String(natsbus.ReasonPermanent)); n != 1 {
			return fmt.Errorf("%d dead-lettered", n)
		}
		return nil
	})
	assert.Zero(t, counted(t, v, natsbus.MetricNacked, natsbus.AttrReason.String(natsbus.ReasonRetry)), "never retried")
	recs := streamEvents(ctx, t, js, topology.StreamDLQ)
	require.Len(t, recs, 1)
	assert.Contains(t, fmt.Sprint(recs[0].Payload), "message size exceeds maximum")
}

// junk is an evidence message of host that no decoder accepts.
func junk(host string, i int) *nats.Msg {
	m := nats.NewMsg(events.EvidenceSubject(host, "systemd.unit"))
	m.Data = []byte(fmt.Sprintf(`{"junk":%d}`, i))
	return m
}

// TestDeadLettersKeptPerHost: one host's junk keeps its newest dead
// letters under its own subject (rt.dlq.EVIDENCE.<host>, at most
// topology.DeadLettersPerHost of them) and never crowds out another
// host's, whose evidence is verified meanwhile.
func TestDeadLettersKeptPerHost(t *testing.T) {
	ctx, url, js := server(t)
	v := start(ctx, t, url, nil)
	other := junk("other", 0)
	_, err := js.PublishMsg(ctx, other)
	require.NoError(t, err)
	const flood = topology.DeadLettersPerHost + 200
	for i := range flood {
		// Spread over kinds: EVIDENCE holds EvidencePerSubject of a
		// subject unconsumed (no auditor consumes here).
		m := junk("bad", i)
		m.Subject = events.EvidenceSubject("bad", "kind-"+strconv.Itoa(i%16))
		require.NoError(t, js.Conn().PublishMsg(m))
	}
	good := publishSnapshot(ctx, t, js, "good", snap(unit(1)))
	verdictOf(ctx, t, js, good)
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		if n := counted(t, v, natsbus.MetricDeadLettered); n < flood+1 {
			return fmt.Errorf("%d dead-lettered", n)
		}
		return nil
	})
	s, err := js.Stream(ctx, topology.StreamDLQ)
	require.NoError(t, err)
	info, err := s.Info(ctx, jetstream.WithSubjectFilter("rt.dlq.>"))
	require.NoError(t, err)
	assert.Equal(t, uint64(topology.DeadLettersPerHost), info.State.Subjects[events.DeadLetterSubject(topology.StreamEvidence, events.EvidenceSubject("bad", "x"))])
	assert.Equal(t, uint64(1), info.State.Subjects[events.DeadLetterSubject(topology.StreamEvidence, other.Subject)], "the other host's dead letter stays")
	require.NoError(t, v.Ready(ctx))
}

// TestFullDeadLetterStream: when the DLQ stream cannot take a record,
// the rejected message is terminated with its reason all the same and the
// loss counted, never redelivered into a full stream for ever (before,
// each was nak'ed, held a worker for the handler's time and came back,
// and verification stalled for every host); the verifier is not ready
// while it lasts, naming the dead letters, and another host's evidence is
// verified.
func TestFullDeadLetterStream(t *testing.T) {
	ctx, url, js := server(t)
	v := start(ctx, t, url, nil)
	s, err := js.Stream(ctx, topology.StreamDLQ)
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	cfg.MaxBytes = 4 << 10
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	const n = 40
	for i := range n {
		require.NoError(t, js.Conn().PublishMsg(junk("bad", i)))
	}
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if got := counted(t, v, natsbus.MetricConsumeErrors, natsbus.AttrReason.String(natsbus.ReasonDeadLetterFull)); got == 0 {
			return fmt.Errorf("no record refused by the full stream yet")
		}
		return nil
	})
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		// The count comes a moment before the report.
		if err := v.Ready(ctx); err == nil || !strings.Contains(err.Error(), natsbus.DutyDeadLetters+" failing: the dead-letter stream is full") {
			return fmt.Errorf("ready: %w", err)
		}
		return nil
	})
	good := publishSnapshot(ctx, t, js, "good", snap(unit(1)))
	verdictOf(ctx, t, js, good)
	cons, err := js.Consumer(ctx, topology.StreamEvidence, topology.ConsumerVerifier)
	require.NoError(t, err)
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumAckPending != 0 || info.NumPending != 0 {
			return fmt.Errorf("%d waiting for an ack, %d pending", info.NumAckPending, info.NumPending)
		}
		return nil
	})
	assert.Zero(t, counted(t, v, natsbus.MetricNacked, natsbus.AttrReason.String(natsbus.ReasonRetry)), "nothing retried")
}

// TestHonestResendIsADuplicate: a collector's event sent again byte for
// byte after the stream forgot its id (a NATS restart, or past the
// duplicate window), even after the host's next event, is the event
// already handled: acknowledged as a duplicate, not dead-lettered, not
// counted against the host (before, it was refused as `replayed`). A
// different event claiming an old sequence stays a replay
// (TestAuthenticReplayIsRefused).
func TestHonestResendIsADuplicate(t *testing.T) {
	ctx, url, js := server(t)
	v := start(ctx, t, url, nil)
	first, firstID := evidenceMsg(t, "web-01", snap(unit(1)))
	resend := nats.NewMsg(first.Subject)
	for k, vs := range first.Header {
		resend.Header[k] = append([]string(nil), vs...)
	}
	resend.Data = append([]byte(nil), first.Data...)
	_, err := js.PublishMsg(ctx, first)
	require.NoError(t, err)
	verdictOf(ctx, t, js, firstID)
	second := publishSnapshot(ctx, t, js, "web-01", snap(unit(2)))
	verdictOf(ctx, t, js, second)

	natstest.ForgetMessageIDs(ctx, t, js, topology.StreamEvidence, firstID)
	ack, err := js.PublishMsg(ctx, resend)
	require.NoError(t, err)
	require.False(t, ack.Duplicate, "stored again")
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := counted(t, v, verifier.MetricDuplicates); n != 1 {
			return fmt.Errorf("%d duplicates", n)
		}
		return nil
	})
	assert.Zero(t, counted(t, v, natsbus.MetricDeadLettered), "not dead-lettered")
	assert.Zero(t, counted(t, v, verifier.MetricRejected), "not a rejection")
	rec, err := verifier.NewStatus(js).Get(ctx, "web-01", testTarget)
	require.NoError(t, err)
	assert.Equal(t, second, rec.EvidenceID, "the latest verdict stands")
}

// TestOneVerdictWhateverStops: the verifier stops (as a crash would)
// before each of its writes in turn, then JetStream forgets every message
// id of VERDICTS (a NATS restart that lost them, or the duplicate window
// passed) and another verifier takes the redelivered evidence: VERDICTS
// holds exactly one verdict of it each time. Before, a stop between the
// verdict's publish and the record listing it handled left only the
// duplicate window between the redelivery and a second verdict.
func TestOneVerdictWhateverStops(t *testing.T) {
	for _, point := range []string{verifier.CrashBeforeRecord, verifier.CrashBeforePublish,
		verifier.CrashBeforeConfirm, verifier.CrashBeforeAck} {
		t.Run(point, func(t *testing.T) {
			ctx, url, js := server(t)
			first := start(ctx, t, url, nil)
			stopped := make(chan struct{})
			var once sync.Once
			first.CrashAt(func(p string) bool {
				if p != point {
					return false
				}
				once.Do(func() { close(stopped) })
				return true
			})
			id := publishSnapshot(ctx, t, js, "web-01", snap(unit(1)))
			select {
			case <-stopped:
			case <-ctx.Done():
				t.Fatal("the verifier never reached the point")
			}
			require.NoError(t, first.Shutdown(ctx))
			natstest.ForgetMessageIDs(ctx, t, js, topology.StreamVerdicts)

			second := start(ctx, t, url, nil)
			natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
				if n := counted(t, second, natsbus.MetricAcked); n == 0 {
					return fmt.Errorf("the redelivered evidence is not acknowledged yet")
				}
				return nil
			})
			n := 0
			for _, e := range streamEvents(ctx, t, js, topology.StreamVerdicts) {
				if e.Payload.(events.Verdict).EvidenceID == id {
					n++
				}
			}
			assert.Equal(t, 1, n, "verdicts of the evidence in VERDICTS")
			// Confirmed by the time the verifier stops (with the key's
			// next record, within confirmWithin, or as it stops).
			require.NoError(t, second.Shutdown(ctx))
			rec, err := verifier.NewStatus(js).Get(ctx, "web-01", testTarget)
			require.NoError(t, err)
			assert.Equal(t, id, rec.EvidenceID)
			assert.Empty(t, rec.Unconfirmed, "confirmed")
			assert.Zero(t, counted(t, second, natsbus.MetricDeadLettered))
		})
	}
}
