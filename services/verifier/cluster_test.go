package verifier_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/events/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// member remembers how to start a cluster server again on its ports and
// data.
type member struct {
	name        string
	storeDir    string
	port, route int
}

func remember(s *natsserver.Server) member {
	return member{
		name:     s.Name(),
		storeDir: filepath.Dir(s.StoreDir()), // StoreDir ends in "jetstream"
		port:     s.Addr().(*net.TCPAddr).Port,
		route:    s.ClusterAddr().Port,
	}
}

func (m member) start(t *testing.T, routes []*url.URL) *natsserver.Server {
	t.Helper()
	opts := natstest.Options(m.storeDir)
	opts.ServerName = m.name
	opts.Port = m.port
	opts.Cluster = natsserver.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: m.route}
	opts.Routes = routes
	s, _ := natstest.Run(t, opts)
	return s
}

// In a three-node cluster with R3 streams and buckets, a node stopped
// mid-stream and brought back loses no snapshot: every one gets exactly one
// verdict, and verdicts continue while the node is down.
func TestClusterNodeOutage(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	servers, urls := natstest.RunCluster(t, 3)
	members := make([]member, len(servers))
	routes := make([]*url.URL, len(servers))
	for i, s := range servers {
		members[i] = remember(s)
		routes[i] = &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(members[i].route))}
	}
	_, js := natstest.Connect(t, urls)
	vf := start(ctx, t, urls, func(c *verifier.Config) { c.Replicas = 3 })

	info, err := js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	require.Equal(t, 3, info.CachedInfo().Config.Replicas)
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
			m := vf.Metrics()
			if got := m.VerdictsError + m.Duplicates; got < k {
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

	servers[down] = members[down].start(t, routes)
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if !servers[down].JetStreamIsCurrent() || natstest.Peers(servers[down]) != 2 {
			return fmt.Errorf("%s not back in the cluster", members[down].name)
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
	m := vf.Metrics()
	t.Logf("retried %d, ack errors %d, fetch errors %d, duplicates %d", m.Retried, m.AckErrors, m.FetchErrors, m.Duplicates)
	assert.Zero(t, m.DeadLettered)
}
