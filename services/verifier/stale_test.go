package verifier_test

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
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// staleVerdicts returns the stale verdicts in the VERDICTS stream.
func staleVerdicts(ctx context.Context, t *testing.T, js jetstream.JetStream) []events.Verdict {
	t.Helper()
	var out []events.Verdict
	for _, p := range streamEvents(ctx, t, js, topology.StreamVerdicts) {
		if v := p.Payload.(events.Verdict); v.Status == events.StatusStale {
			require.Equal(t, verifier.StaleVerdictID(v.EvidenceID), p.ID)
			require.Equal(t, events.TypeVerdictStale, p.Type)
			out = append(out, v)
		}
	}
	return out
}

// waitStale waits for n stale verdicts.
func waitStale(ctx context.Context, t *testing.T, js jetstream.JetStream, n int) []events.Verdict {
	t.Helper()
	var got []events.Verdict
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if got = staleVerdicts(ctx, t, js); len(got) < n {
			return fmt.Errorf("%d stale verdicts, want %d", len(got), n)
		}
		return nil
	})
	return got
}

// A host's target that stops sending authentic evidence gets one stale
// verdict per silence, naming its last evidence and when it was seen:
// with two verifier instances watching, and after they restart. Fresh
// evidence ends the silence; the next silence gets its own.
func TestSilenceIsAVerdict(t *testing.T) {
	ctx, url, js := server(t)
	const after = 1500 * time.Millisecond
	edit := func(c *verifier.Config) { c.StaleAfter = after }
	a := start(ctx, t, url, edit)
	b := start(ctx, t, url, func(c *verifier.Config) { edit(c); c.Instance = "test-b" })

	first := publishSnapshot(ctx, t, js, "web-01", snap(unit(1)))
	v := verdictOf(ctx, t, js, first)
	stale := waitStale(ctx, t, js, 1)
	s := stale[0]
	assert.Equal(t, first, s.EvidenceID, "names the last evidence")
	assert.Equal(t, v.SnapshotDigest, s.SnapshotDigest)
	assert.Equal(t, "web-01", s.Host)
	assert.Contains(t, s.Error, "no authentic evidence since ")
	rec, err := verifier.NewStatus(js).Get(ctx, "web-01", testTarget)
	require.NoError(t, err)
	assert.Equal(t, events.StatusStale, rec.Verdict.Status)
	assert.Equal(t, first, rec.EvidenceID)
	seen, err := time.Parse(time.RFC3339Nano, rec.Verdict.LastSeen)
	require.NoError(t, err)
	assert.False(t, seen.After(rec.Time), "last seen before the stale verdict")

	// Both instances stop and two new ones start, after JetStream forgot
	// the verdict's message id: the silence goes on, and the record says
	// it has its verdict already.
	require.NoError(t, a.Shutdown(ctx))
	require.NoError(t, b.Shutdown(ctx))
	natstest.ForgetMessageIDs(ctx, t, js, topology.StreamVerdicts)
	start(ctx, t, url, edit)
	start(ctx, t, url, func(c *verifier.Config) { edit(c); c.Instance = "test-b" })
	time.Sleep(3 * after) // several sweeps of both
	assert.Len(t, staleVerdicts(ctx, t, js), 1, "one stale verdict per silence")

	// Fresh evidence ends it; the next silence is a new stale verdict.
	second := publishSnapshot(ctx, t, js, "web-01", snap(unit(2)))
	verdictOf(ctx, t, js, second)
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		rec, err := verifier.NewStatus(js).Get(ctx, "web-01", testTarget)
		if err != nil {
			return err
		}
		if rec.EvidenceID != second {
			return fmt.Errorf("record of %s", rec.EvidenceID)
		}
		return nil
	})
	stale = waitStale(ctx, t, js, 2)
	assert.Equal(t, second, stale[1].EvidenceID)
	assert.Len(t, stale, 2)
}

// Evidence that is not authentic does not keep a target fresh: an
// impostor's snapshots are refused, and the silence of the true host is a
// stale verdict all the same.
func TestRefusedEvidenceDoesNotKeepATargetFresh(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, func(c *verifier.Config) { c.StaleAfter = time.Second })
	first := publishSnapshot(ctx, t, js, "web-01", snap(unit(1)))
	verdictOf(ctx, t, js, first)
	impostor, _ := signer(t)
	for i := range 3 {
		m, _ := signedMsg(t, "web-01", snap(unit(int64(10+i))), impostor)
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	stale := waitStale(ctx, t, js, 1)
	assert.Equal(t, first, stale[0].EvidenceID)
	rejected := rejections(ctx, t, js, 3)
	assert.Len(t, rejected, 3)
}

// A silence sweep that cannot run fails the verifier's readiness, naming
// it, and is counted; once it runs again the verifier is ready again.
// (As deployed, a listing the bus refuses: e2e's TestSilenceAsDeployed.)
func TestSilenceSweepThatCannotRunIsNotReady(t *testing.T) {
	ctx, url, js := server(t)
	v := start(ctx, t, url, func(c *verifier.Config) { c.StaleAfter = 100 * time.Millisecond })
	verdictOf(ctx, t, js, publishSnapshot(ctx, t, js, "web-01", snap(unit(1))))
	require.NoError(t, v.Ready(ctx))

	// The bucket's stream gone: every listing fails.
	require.NoError(t, js.DeleteKeyValue(ctx, topology.BucketVerdicts))
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if err := v.Ready(ctx); err == nil || !strings.Contains(err.Error(), verifier.DutySilence+" failing") {
			return fmt.Errorf("ready: %w", err)
		}
		return nil
	})
	assert.Positive(t, counted(t, v, health.MetricDutyFailures, health.AttrDuty.String(verifier.DutySilence)))

	_, err := js.CreateKeyValue(ctx, topology.New(1).Buckets[1])
	require.NoError(t, err)
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error { return v.Ready(ctx) })
}
