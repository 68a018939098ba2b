package verifier_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

	names := replicated()
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

	// The cluster converges: every replica current, every node holding
	// the same messages of every stream and bucket.
	start := time.Now()
	converged(ctx, t, js, servers, names)
	t.Logf("converged in %s", time.Since(start).Round(time.Millisecond))
}

// replicated names the streams of the verifier's topology and the streams
// behind its key-value buckets.
func replicated() []string {
	top := verifier.Topology(3, topology.ConsumerVerifier)
	var names []string
	for _, s := range top.Streams {
		names = append(names, s.Name)
	}
	for _, b := range top.Buckets {
		names = append(names, "KV_"+b.Bucket)
	}
	return names
}

// converged waits until every named stream has a leader and two current
// replicas without lag, and every server holds the same messages of it.
func converged(ctx context.Context, t *testing.T, js jetstream.JetStream, servers []*natsserver.Server, names []string) {
	t.Helper()
	natstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		for _, name := range names {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			ci := info.Cluster
			if info.Config.Replicas != 3 || ci == nil || ci.Leader == "" || len(ci.Replicas) != 2 {
				return fmt.Errorf("%s: %d replicas, cluster %+v", name, info.Config.Replicas, ci)
			}
			for _, r := range ci.Replicas {
				if !r.Current || r.Offline || r.Lag != 0 {
					return fmt.Errorf("%s: replica %s current %t, offline %t, lag %d", name, r.Name, r.Current, r.Offline, r.Lag)
				}
			}
			for _, srv := range servers {
				acc, err := srv.JszAccount(&natsserver.JSzOptions{Account: srv.GlobalAccount().Name, Streams: true})
				if err != nil {
					return fmt.Errorf("%s: %w", srv.Name(), err)
				}
				i := slices.IndexFunc(acc.Streams, func(d natsserver.StreamDetail) bool { return d.Name == name })
				if i < 0 {
					return fmt.Errorf("%s: no replica on %s", name, srv.Name())
				}
				if st := acc.Streams[i].State; st.Msgs != info.State.Msgs || st.LastSeq != info.State.LastSeq {
					return fmt.Errorf("%s on %s: %d messages to %d, the leader %s has %d to %d",
						name, srv.Name(), st.Msgs, st.LastSeq, ci.Leader, info.State.Msgs, info.State.LastSeq)
				}
			}
		}
		return nil
	})
}
