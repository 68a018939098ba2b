package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/collector/inspect"
	"github.com/runtimetruth/runtimetruth/services/collector/spool"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// storedEvent is one event read back from a stream.
type storedEvent struct {
	ID      string
	Type    string
	Payload events.Payload
}

// storedEvents reads every message of a stream and decodes it strictly.
func storedEvents(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string) []storedEvent {
	t.Helper()
	var out []storedEvent
	for _, raw := range natstest.Stored(ctx, t, js, stream) {
		e, err := binding.FromNATS(raw.Header, raw.Data)
		require.NoError(t, err)
		p, err := binding.Decode[events.Payload](e)
		require.NoError(t, err)
		out = append(out, storedEvent{ID: e.ID(), Type: e.Type(), Payload: p})
	}
	return out
}

// TestClusterNodeOutageWithCollector runs a real collector (three git
// targets collected every second) and verifier against a three-node
// JetStream cluster with every stream and bucket replicated three times,
// the baselines put in the replicated bucket. The EVIDENCE stream's leader
// is stopped mid-stream and brought back: pass verdicts keep coming, no
// snapshot is lost, each gets exactly one verdict, and the cluster
// converges (every replica current, every node holding the same messages).
func TestClusterNodeOutageWithCollector(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	begun := time.Now()
	// Every server runs the configuration buspolicy renders; each part
	// connects as its rendered user, the test as the operator.
	servers, urls := natstest.RunClusterWith(t, 3, policyCluster(t))
	members := natstest.Members(servers)
	_, js := connectAs(t, urls, "operator")

	type component interface {
		Start(context.Context) error
		Shutdown(context.Context) error
	}
	stop := func(c component) {
		sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		assert.NoError(t, c.Shutdown(sctx))
	}
	vcfg := verifier.NewDefaultConfig()
	vcfg.Instance = host
	vcfg.NATS.URL, vcfg.NATS.User, vcfg.NATS.Password = urls, buspolicy.Verifier, buspolicy.Verifier+"-pw"
	vcfg.Replicas = 3
	tel := newRecorder(t)
	ver, err := verifier.New(vcfg, verifier.Settings{Telemetry: tel.Providers})
	require.NoError(t, err)
	require.NoError(t, ver.Start(ctx))
	t.Cleanup(func() { stop(ver) })

	names := topology.Verifier(3, topology.ConsumerVerifier).StreamNames()
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err, name)
		assert.Equal(t, 3, s.CachedInfo().Config.Replicas, "replicas of %s", name)
	}
	cons, err := js.Consumer(ctx, topology.StreamEvidence, topology.ConsumerVerifier)
	require.NoError(t, err)
	assert.Equal(t, 3, cons.CachedInfo().Config.Replicas, "replicas of the verifier's consumer")

	// The baselines, put in the replicated bucket before collecting.
	baselines := verifier.NewBaselines(js, events.Source("e2e", host))
	var targets []collector.TargetConfig
	for i := range 3 {
		repo := gitRepo(t)
		snap, err := inspect.Git(ctx, repo, inspect.Options{})
		require.NoError(t, err)
		raw, err := snap.Marshal(false)
		require.NoError(t, err)
		_, err = baselines.Put(ctx, events.Baseline{Snapshot: raw, ApprovedBy: "e2e"})
		require.NoError(t, err)
		targets = append(targets, collector.TargetConfig{Name: "repo-" + strconv.Itoa(i), Kind: collector.KindGit, Path: repo, Interval: time.Second})
	}

	ccfg := collector.NewDefaultConfig()
	ccfg.Host = host
	ccfg.NATS.URL, ccfg.NATS.User, ccfg.NATS.Password = urls, buspolicy.Collector, buspolicy.Collector+"-pw"
	ccfg.StateDir = filepath.Join(t.TempDir(), "collector")
	ccfg.Targets = targets
	colTel := telemetrytest.New(t)
	col, err := collector.New(ccfg, collector.Settings{Telemetry: colTel.Providers})
	require.NoError(t, err)
	enroll(ctx, t, js, ccfg)
	require.NoError(t, col.Start(ctx))
	collecting := true
	t.Cleanup(func() {
		if collecting {
			stop(col)
		}
	})

	passes := func(what string, k int64) {
		t.Helper()
		natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
			drift, fail := tel.verdicts(t, events.StatusDrift), tel.verdicts(t, events.StatusError)
			if drift+fail > 0 {
				t.Fatalf("%s: %d drift and %d error verdicts, want passes only", what, drift, fail)
			}
			if pass := tel.verdicts(t, events.StatusPass); pass < k {
				return fmt.Errorf("%s: %d pass verdicts, want %d", what, pass, k)
			}
			return nil
		})
	}
	const phase = 6
	passes("before the outage", phase)

	// Stop the EVIDENCE stream's leader mid-stream.
	info, err := js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	leader := info.CachedInfo().Cluster.Leader
	down := -1
	for i, s := range servers {
		if s.Name() == leader {
			down = i
		}
	}
	require.GreaterOrEqual(t, down, 0, "leader %s among the servers", leader)
	servers[down].Shutdown()
	servers[down].WaitForShutdown()
	outage := tel.verdicts(t, events.StatusPass)
	passes("with a node down", outage+phase) // verdicts continue on two nodes

	servers[down] = members[down].RestartWith(t, members, func(o *server.Options) { policyCluster(t)(down, o) })
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if !servers[down].JetStreamIsCurrent() || natstest.Peers(servers[down]) != 2 {
			return fmt.Errorf("%s not back in the cluster", members[down].Name())
		}
		return nil
	})
	passes("after the node is back", tel.verdicts(t, events.StatusPass)+phase)

	// Stop collecting: the collector delivers its spool before it stops.
	collecting = false
	stop(col)
	rm := colTel.Collect(t)
	spooled, delivered := telemetrytest.Sum(rm, collector.MetricEventsSpooled), telemetrytest.Sum(rm, natsbus.MetricPublished)
	duplicates := telemetrytest.Sum(rm, collector.MetricEventsDuplicates)
	t.Logf("collector: %d collections, %d events spooled, %d delivered (%d duplicates), %d publish errors",
		telemetrytest.Count(rm, collector.MetricCollectionDuration), spooled, delivered, duplicates,
		telemetrytest.Sum(rm, natsbus.MetricPublishErrors))
	sp, err := spool.Open(ccfg.SpoolDir(), spool.Options{})
	require.NoError(t, err)
	left, _ := sp.Pending()
	require.NoError(t, sp.Close())
	assert.Zero(t, left, "the spool is delivered")
	assert.Zero(t, telemetrytest.Count(rm, collector.MetricCollectionDuration, collector.AttrStatus.String(collector.StatusFailed)))
	assert.Zero(t, telemetrytest.Sum(rm, collector.MetricEventsRefused)+telemetrytest.Sum(rm, collector.MetricEventsRejected)+
		telemetrytest.Sum(rm, collector.MetricEventsInvalid))
	assert.Equal(t, spooled, delivered-duplicates, "every event stored once")

	// Every snapshot is stored and gets exactly one verdict, a pass.
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		c, err := js.Consumer(ctx, topology.StreamEvidence, topology.ConsumerVerifier)
		if err != nil {
			return err
		}
		ci, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if ci.NumPending != 0 || ci.NumAckPending != 0 {
			return fmt.Errorf("verifier: %d pending, %d unacknowledged", ci.NumPending, ci.NumAckPending)
		}
		return nil
	})
	evidence := map[string]bool{}
	for _, e := range storedEvents(ctx, t, js, topology.StreamEvidence) {
		require.Equal(t, events.TypeEvidenceCollected, e.Type)
		require.False(t, evidence[e.ID], "evidence %s stored twice", e.ID)
		evidence[e.ID] = true
	}
	assert.Len(t, evidence, int(spooled), "no snapshot lost")
	verdictsOf := map[string]int{}
	stored := storedEvents(ctx, t, js, topology.StreamVerdicts)
	for _, e := range stored {
		v := e.Payload.(events.Verdict)
		assert.Equal(t, events.StatusPass, v.Status, "verdict of %s", v.EvidenceID)
		assert.True(t, evidence[v.EvidenceID], "verdict of a stored snapshot")
		verdictsOf[v.EvidenceID]++
	}
	for id := range evidence {
		assert.Equal(t, 1, verdictsOf[id], "verdicts of %s", id)
	}
	assert.Len(t, stored, len(evidence), "one verdict message per snapshot")
	assert.Zero(t, tel.Sum(t, natsbus.MetricDeadLettered))
	t.Logf("%d snapshots; verifier: retried %d, ack errors %d, fetch errors %d, duplicates %d", len(evidence),
		tel.Sum(t, natsbus.MetricNacked, natsbus.AttrReason.String(natsbus.ReasonRetry)),
		tel.Sum(t, natsbus.MetricConsumeErrors, natsbus.AttrReason.String(natsbus.ReasonAck)),
		tel.Sum(t, natsbus.MetricConsumeErrors, natsbus.AttrReason.String(natsbus.ReasonFetch)),
		tel.Sum(t, verifier.MetricDuplicates))

	// The cluster converges: every stream and bucket is replicated three
	// times, current everywhere, the same on every node.
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		assert.Equal(t, 3, s.CachedInfo().Config.Replicas, "replicas of %s", name)
	}
	natstest.WaitConverged(ctx, t, js, servers, names)
	t.Logf("done in %s", time.Since(begun).Round(time.Millisecond))
}
