package collector_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/gittest"
)

// assertDeliveredOnceInOrder checks that the stream holds exactly the
// spooled ids, each once, in the order they were spooled.
func assertDeliveredOnceInOrder(t *testing.T, spooled, stored []string) {
	t.Helper()
	seen := map[string]int{}
	for _, id := range stored {
		seen[id]++
	}
	for id, n := range seen {
		assert.Equal(t, 1, n, "id %s stored %d times", id, n)
	}
	assert.Equal(t, spooled, stored)
}

// spoolOffline starts a collector of cfg, whose NATS is unreachable,
// collects its target "repo" n times on top of the first collection,
// stops it and returns the ids it spooled.
func spoolOffline(t *testing.T, cfg collector.Config, set collector.Settings, n int) []string {
	t.Helper()
	c, rec := newCollector(t, cfg, set)
	require.NoError(t, c.Start(t.Context()))
	for range n {
		require.NoError(t, c.CollectNow(t.Context(), "repo"))
	}
	shutdown(t, c, 200*time.Millisecond)
	return rec.all()
}

// deliverSpool starts a collector on cfg's state against a new bus, waits
// until the bus stores want events and stops it. It returns the bus and
// the ids that collector spooled itself.
func deliverSpool(t *testing.T, cfg collector.Config, set collector.Settings, want int) (*bus, []string) {
	t.Helper()
	b := runBus(t, t.TempDir(), 0)
	cfg.NATS.URL = b.url
	c, rec := newCollector(t, cfg, set)
	require.NoError(t, c.Start(t.Context()))
	b.waitStored(t, want)
	shutdown(t, c, 10*time.Second)
	return b, rec.all()
}

// TestNATSOutage stops the server while the collector collects every
// second, collects more on demand, then starts a server again on the same
// port and store: every event arrives once, in order.
func TestNATSOutage(t *testing.T) {
	store := t.TempDir()
	port := freePort(t)
	b := runBus(t, store, port)
	repo := gittest.New(t)
	cfg := testConfig(t, b.url, gitTarget("repo", repo, time.Second))
	tel := telemetrytest.New(t)
	c, rec := newCollector(t, cfg, collector.Settings{Telemetry: tel.Providers})
	require.NoError(t, c.Start(t.Context()))
	b.waitStored(t, 1)

	b.srv.Shutdown()
	b.srv.WaitForShutdown()
	before := len(rec.all())
	for i := range 3 {
		gittest.WriteFile(t, repo, fmt.Sprintf("f%d.txt", i), "x\n")
		gittest.Commit(t, repo, fmt.Sprintf("commit %d", i))
		require.NoError(t, c.CollectNow(t.Context(), "repo"))
	}
	// The schedule keeps collecting too.
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		if n := len(rec.all()); n < before+5 {
			return fmt.Errorf("%d events spooled during the outage, want %d", n-before, 5)
		}
		return nil
	})
	assert.Positive(t, spoolDepth(t, tel), "events wait in the spool")

	b2 := runBus(t, store, port)
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if n := spoolDepth(t, tel); n > 0 {
			return fmt.Errorf("%d events still pending", n)
		}
		return nil
	})
	shutdown(t, c, 30*time.Second)

	spooled := rec.all()
	assert.GreaterOrEqual(t, len(spooled), before+5)
	assertDeliveredOnceInOrder(t, spooled, b2.storedIDs(t))
	assert.Equal(t, int64(len(spooled)), tel.Sum(t, natsbus.MetricPublished), "events delivered")
	assert.Zero(t, spoolLeft(t, cfg))
}

// TestDeliveryRetriesUntilTheStreamExists publishes to a server without
// the streams: publishing fails (no responders) and is retried until the
// topology appears.
func TestDeliveryRetriesUntilTheStreamExists(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	repo := gittest.New(t)
	tel := telemetrytest.New(t)
	c, rec := newCollector(t, testConfig(t, url, gitTarget("repo", repo, time.Hour)), collector.Settings{Telemetry: tel.Providers})
	require.NoError(t, c.Start(t.Context()))
	require.NoError(t, c.CollectNow(t.Context(), "repo"))
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if n := tel.Sum(t, natsbus.MetricPublishErrors); n < 2 {
			return fmt.Errorf("%d publish errors", n)
		}
		return nil
	})
	assert.Zero(t, tel.Sum(t, natsbus.MetricPublished), "events delivered")

	require.NoError(t, topology.Ensure(t.Context(), js, 1))
	b := &bus{url: url, nc: nc, js: js}
	b.waitStored(t, 2)
	shutdown(t, c, 10*time.Second)
	assertDeliveredOnceInOrder(t, rec.all(), b.storedIDs(t))
}

// TestSpoolSurvivesRestart spools events while NATS is unreachable, stops
// the collector, and starts another on the same state: it delivers them
// first, in order.
func TestSpoolSurvivesRestart(t *testing.T) {
	repo := gittest.New(t)
	state := t.TempDir()
	cfg := testConfig(t, deadURL(t), gitTarget("repo", repo, time.Hour))
	cfg.StateDir = state
	tel1 := telemetrytest.New(t)
	first := spoolOffline(t, cfg, collector.Settings{Telemetry: tel1.Providers}, 3)
	require.Len(t, first, 4)
	assert.Zero(t, tel1.Sum(t, natsbus.MetricPublished), "events delivered")

	b, second := deliverSpool(t, cfg, collector.Settings{}, 5)
	assertDeliveredOnceInOrder(t, append(first, second...), b.storedIDs(t))
}

// TestCrashRedeliveryIsDeduplicated replays a spool whose cursor was lost
// after delivery (a crash between the acknowledgement and the commit):
// JetStream's de-duplication keeps one copy of each event.
func TestCrashRedeliveryIsDeduplicated(t *testing.T) {
	b := runBus(t, t.TempDir(), 0)
	repo := gittest.New(t)
	cfg := testConfig(t, b.url, gitTarget("repo", repo, time.Hour))
	c1, rec1 := newCollector(t, cfg, collector.Settings{})
	require.NoError(t, c1.Start(t.Context()))
	require.NoError(t, c1.CollectNow(t.Context(), "repo"))
	b.waitStored(t, 2)
	shutdown(t, c1, 10*time.Second)

	// Re-spool what was delivered: put the delivered segment back.
	segs, err := filepath.Glob(filepath.Join(cfg.SpoolDir(), "*.seg"))
	require.NoError(t, err)
	require.Len(t, segs, 1)
	require.NoError(t, os.Remove(filepath.Join(cfg.SpoolDir(), "cursor")))

	tel2 := telemetrytest.New(t)
	c2, rec2 := newCollector(t, cfg, collector.Settings{Telemetry: tel2.Providers})
	require.NoError(t, c2.Start(t.Context()))
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if n := tel2.Sum(t, collector.MetricEventsDuplicates); n < 2 {
			return fmt.Errorf("%d duplicates acknowledged", n)
		}
		return nil
	})
	b.waitStored(t, 3)
	shutdown(t, c2, 10*time.Second)
	assertDeliveredOnceInOrder(t, append(rec1.all(), rec2.all()...), b.storedIDs(t))
}

func TestSpoolFullRefusesNewEvents(t *testing.T) {
	repo := gittest.New(t)
	cfg := testConfig(t, deadURL(t), gitTarget("repo", repo, time.Hour))
	cfg.Spool.MaxEvents = 2
	tel := telemetrytest.New(t)
	c, rec := newCollector(t, cfg, collector.Settings{Telemetry: tel.Providers})
	require.NoError(t, c.Start(t.Context()))
	require.NoError(t, c.CollectNow(t.Context(), "repo")) // with the first collection: 2
	// The first collection runs on its own schedule: wait until it is in
	// the spool too, so that the spool is full.
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if n := spoolDepth(t, tel); n != 2 {
			return fmt.Errorf("%d events in the spool", n)
		}
		return nil
	})
	err := c.CollectNow(t.Context(), "repo")
	require.ErrorIs(t, err, collector.ErrSpoolFull)
	require.ErrorIs(t, c.CollectNow(t.Context(), "repo"), collector.ErrSpoolFull)
	assert.Equal(t, int64(2), tel.Sum(t, collector.MetricEventsRefused))
	assert.Equal(t, int64(2), spoolDepth(t, tel))
	kept := rec.all()
	require.Len(t, kept, 2)
	shutdown(t, c, 200*time.Millisecond)

	// The kept (oldest) events are delivered once NATS is back.
	cfg.Spool.MaxEvents = 100 // room for the next collector's own first collection
	b, second := deliverSpool(t, cfg, collector.Settings{}, 3)
	assertDeliveredOnceInOrder(t, append(kept, second...), b.storedIDs(t))
}

func TestCorruptSpoolTailDeliversTheIntactPrefix(t *testing.T) {
	repo := gittest.New(t)
	cfg := testConfig(t, deadURL(t), gitTarget("repo", repo, time.Hour))
	spooled := spoolOffline(t, cfg, collector.Settings{}, 2)
	require.Len(t, spooled, 3)

	// A crash in the middle of the last append.
	segs, err := filepath.Glob(filepath.Join(cfg.SpoolDir(), "*.seg"))
	require.NoError(t, err)
	sort.Strings(segs)
	last := segs[len(segs)-1]
	st, err := os.Stat(last)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(last, st.Size()-100))

	tel2 := telemetrytest.New(t)
	// Two intact events and the next collector's first collection.
	b, second := deliverSpool(t, cfg, collector.Settings{Telemetry: tel2.Providers}, 3)
	assert.Positive(t, tel2.Sum(t, collector.MetricSpoolRecovered))
	stored := b.storedIDs(t)
	assertDeliveredOnceInOrder(t, append(spooled[:2:2], second...), stored)
	assert.NotContains(t, stored, spooled[2])
}
