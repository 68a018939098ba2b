package verifier_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// In a three-node cluster with R3 streams and buckets, a node stopped
// mid-stream and brought back loses no snapshot: every one gets exactly one
// verdict, and verdicts continue while the node is down.
func TestClusterNodeOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	servers, urls := natstest.RunCluster(t, 3)
	members := natstest.Members(servers)
	_, js := natstest.Connect(t, urls)
	vf := start(ctx, t, urls, func(c *verifier.Config) { c.Replicas = 3 })

	names := verifier.Topology(3, topology.ConsumerVerifier).StreamNames()
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err, name)
		assert.Equal(t, 3, s.CachedInfo().Config.Replicas, "replicas of %s", name)
	}
	info, err := js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	require.NotNil(t, info.CachedInfo().Cluster)
	leader := info.CachedInfo().Cluster.Leader

	const n = 150
	msgs := make([]*nats.Msg, n)
	ids := make([]string, n)
	for i := range n {
		msgs[i], ids[i] = evidenceMsg(t, fmt.Sprintf("host-%d", i%5), snap(unit(int64(i))))
	}
	var sent atomic.Int64
	paused := make(chan struct{})
	resume := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i, m := range msgs {
			if i == n/3 {
				close(paused)
				<-resume
			}
			// A collector retries the same event until it is stored;
			// the stream drops a copy that was stored after all.
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := js.PublishMsg(pctx, m)
				pcancel()
				if err == nil {
					break
				}
			}
			sent.Add(1)
		}
	})
	verdictsAtLeast := func(k uint64) {
		t.Helper()
		natstest.CheckFor(t, 90*time.Second, 10*time.Millisecond, func() error {
			if got := verdictCount(t, vf, events.StatusError) + counted(t, vf, verifier.MetricDuplicates); got < k {
				return fmt.Errorf("%d verdicts, want %d", got, k)
			}
			return nil
		})
	}

	<-paused
	verdictsAtLeast(n / 6)
	// Stop the EVIDENCE stream's leader mid-stream.
	down := -1
	for i, s := range servers {
		if s.Name() == leader {
			down = i
		}
	}
	require.GreaterOrEqual(t, down, 0, "leader %s among the servers", leader)
	servers[down].Shutdown()
	servers[down].WaitForShutdown()
	close(resume)
	verdictsAtLeast(n / 2) // verdicts continue on two nodes

	servers[down] = members[down].Restart(t, members)
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if !servers[down].JetStreamIsCurrent() || natstest.Peers(servers[down]) != 2 {
			return fmt.Errorf("%s not back in the cluster", members[down].Name())
		}
		return nil
	})
	wg.Wait()
	require.Equal(t, int64(n), sent.Load())

	settled(ctx, t, js, topology.ConsumerVerifier)
	all, total := verdicts(ctx, t, js)
	for _, id := range ids {
		assert.Len(t, all[id], 1, "verdicts of %s", id)
	}
	assert.Equal(t, n, total, "verdict messages")
	t.Logf("retried %d, ack errors %d, fetch errors %d, duplicates %d",
		counted(t, vf, natsbus.MetricNacked, natsbus.AttrReason.String(natsbus.ReasonRetry)),
		counted(t, vf, natsbus.MetricConsumeErrors, natsbus.AttrReason.String(natsbus.ReasonAck)),
		counted(t, vf, natsbus.MetricConsumeErrors, natsbus.AttrReason.String(natsbus.ReasonFetch)),
		counted(t, vf, verifier.MetricDuplicates))
	assert.Zero(t, counted(t, vf, natsbus.MetricDeadLettered))

	// The cluster converges: every replica current, every node holding
	// the same messages of every stream and bucket.
	start := time.Now()
	natstest.WaitConverged(ctx, t, js, servers, names)
	t.Logf("converged in %s", time.Since(start).Round(time.Millisecond))
}
