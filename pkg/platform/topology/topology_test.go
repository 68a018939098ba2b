package topology_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func timeout(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// jetStream starts a JetStream server and connects to it, for a test
// bounded by timeout.
func jetStream(t *testing.T) (context.Context, jetstream.JetStream) {
	t.Helper()
	ctx := timeout(t)
	_, url := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, url)
	return ctx, js
}

type snapshotState struct {
	streams   map[string]*jetstream.StreamInfo
	consumers map[string]*jetstream.ConsumerInfo
}

func state(ctx context.Context, t *testing.T, js jetstream.JetStream, top topology.Topology) snapshotState {
	t.Helper()
	st := snapshotState{streams: map[string]*jetstream.StreamInfo{}, consumers: map[string]*jetstream.ConsumerInfo{}}
	names := []string{}
	for _, s := range top.Streams {
		names = append(names, s.Name)
	}
	for _, b := range top.Buckets {
		names = append(names, "KV_"+b.Bucket)
	}
	for _, name := range names {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		st.streams[name] = info
	}
	for _, c := range top.Consumers {
		cons, err := js.Consumer(ctx, c.Stream, c.Config.Durable)
		require.NoError(t, err)
		info, err := cons.Info(ctx)
		require.NoError(t, err)
		st.consumers[c.Stream+"/"+c.Config.Durable] = info
	}
	return st
}

// assertUnchanged checks that no stream or consumer of first was
// recreated or changed in second.
func assertUnchanged(t *testing.T, first, second snapshotState) {
	t.Helper()
	for name, info := range first.streams {
		assert.Equal(t, info.Created, second.streams[name].Created, "stream %s was recreated", name)
		assert.Equal(t, info.Config, second.streams[name].Config, "stream %s changed", name)
	}
	for name, info := range first.consumers {
		assert.Equal(t, info.Created, second.consumers[name].Created, "consumer %s was recreated", name)
		assert.Equal(t, info.Config, second.consumers[name].Config, "consumer %s changed", name)
	}
}

func TestEnsureCreatesEverything(t *testing.T) {
	ctx, js := jetStream(t)
	top := topology.New(1)
	require.NoError(t, top.Ensure(ctx, js))
	st := state(ctx, t, js, top)

	ev := st.streams[topology.StreamEvidence].Config
	assert.Equal(t, []string{events.FilterEvidence, events.FilterIntegrity, events.FilterCollect}, ev.Subjects)
	assert.Equal(t, jetstream.InterestPolicy, ev.Retention)
	assert.Equal(t, jetstream.DiscardNew, ev.Discard)
	assert.Equal(t, topology.DuplicateWindow, ev.Duplicates)
	assert.Equal(t, int32(events.MaxEventSize), ev.MaxMsgSize)
	assert.Equal(t, jetstream.FileStorage, ev.Storage)
	assert.Equal(t, jetstream.LimitsPolicy, st.streams[topology.StreamDLQ].Config.Retention)
	// Transient (interest) streams are not compressed, the retained ones are.
	assert.Equal(t, jetstream.NoCompression, ev.Compression)
	assert.Equal(t, jetstream.NoCompression, st.streams[topology.StreamVerdicts].Config.Compression)
	assert.Equal(t, jetstream.S2Compression, st.streams[topology.StreamBaselines].Config.Compression)
	assert.Equal(t, jetstream.S2Compression, st.streams[topology.StreamDLQ].Config.Compression)

	v := st.consumers[topology.StreamEvidence+"/"+topology.ConsumerVerifier].Config
	assert.Equal(t, jetstream.AckExplicitPolicy, v.AckPolicy)
	assert.Equal(t, topology.VerifierMaxDeliver, v.MaxDeliver)
	assert.Equal(t, topology.AckWait, v.AckWait)
	assert.Empty(t, v.BackOff, "a BackOff would stretch every NakWithDelay")
	assert.Equal(t, []string{events.FilterEvidence}, v.FilterSubjects)
	assert.Equal(t, topology.MaxAckPending, v.MaxAckPending)
	a := st.consumers[topology.StreamDLQ+"/"+topology.ConsumerAuditor].Config
	assert.Equal(t, -1, a.MaxDeliver)
	for _, s := range []string{topology.StreamEvidence, topology.StreamVerdicts, topology.StreamBaselines, topology.StreamDLQ} {
		a := st.consumers[s+"/"+topology.ConsumerAuditor].Config
		assert.Equal(t, topology.AuditorMaxAckPending, a.MaxAckPending, "the auditor appends in large batches on %s", s)
	}

	kv, err := js.KeyValue(ctx, topology.BucketBaselines)
	require.NoError(t, err)
	status, err := kv.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(topology.BaselineHistory), status.History())
	target := events.Target{Kind: "systemd.unit", Identifier: "agent worker.service"}
	_, err = kv.Put(ctx, topology.BaselineKey(target), []byte(`{}`))
	require.NoError(t, err, "a target key is a valid key-value key")
	vk, err := js.KeyValue(ctx, topology.BucketVerdicts)
	require.NoError(t, err)
	_, err = vk.Put(ctx, topology.VerdictKey("web-01.example.com", target), []byte(`{}`))
	require.NoError(t, err)
}

func TestEnsureIsIdempotent(t *testing.T) {
	ctx, js := jetStream(t)
	top := topology.New(1)
	require.NoError(t, top.Ensure(ctx, js))
	first := state(ctx, t, js, top)
	require.NoError(t, top.Ensure(ctx, js))
	require.NoError(t, topology.Ensure(ctx, js, 1))
	assertUnchanged(t, first, state(ctx, t, js, top))
}

func TestEnsureConcurrently(t *testing.T) {
	ctx := timeout(t)
	_, url := natstest.RunJetStream(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		_, js := natstest.Connect(t, url)
		wg.Go(func() { errs[i] = topology.Ensure(ctx, js, 1) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func TestEnsureUpdatesAndReportsConflicts(t *testing.T) {
	ctx, js := jetStream(t)
	top := topology.New(1)
	require.NoError(t, top.Ensure(ctx, js))

	changed := topology.New(1)
	changed.Streams[0].MaxAge = 48 * time.Hour
	require.NoError(t, changed.Ensure(ctx, js))
	s, err := js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, 48*time.Hour, info.Config.MaxAge)
	require.NoError(t, top.Ensure(ctx, js), "and back")

	conflict := topology.New(1)
	conflict.Streams[0].Storage = jetstream.MemoryStorage
	err = conflict.Ensure(ctx, js)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ensure stream EVIDENCE")
}

func TestRetryDelayAndLast(t *testing.T) {
	assert.Equal(t, time.Second, topology.RetryDelay(0))
	assert.Equal(t, time.Second, topology.RetryDelay(1))
	assert.Equal(t, 5*time.Second, topology.RetryDelay(2))
	assert.Equal(t, time.Minute, topology.RetryDelay(99))
	top := topology.New(1)
	verifier := top.Consumers[0].Config
	require.Equal(t, topology.ConsumerVerifier, verifier.Durable)
	assert.False(t, topology.Last(verifier, 9))
	assert.True(t, topology.Last(verifier, 10))
	assert.False(t, topology.Last(top.Consumers[1].Config, 1000), "the auditor never gives up")
}

// TestClusterR3 creates the topology with three replicas on a three-server
// cluster and moves one event through it.
func TestClusterR3(t *testing.T) {
	ctx := timeout(t)
	_, urls := natstest.RunCluster(t, 3)
	_, js := natstest.Connect(t, urls)
	require.NoError(t, topology.Ensure(ctx, js, 3))
	require.NoError(t, topology.Ensure(ctx, js, 3))
	s, err := js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			return assert.AnError
		}
		return nil
	})

	p := events.CollectionFailed{Host: "web-01", Collector: "git", Reason: "timeout", Message: "git status timed out", Retryable: true}
	m, e, err := binding.NewMsg(events.Source("collector", "web-01"), p)
	require.NoError(t, err)
	_, err = js.PublishMsg(ctx, m)
	require.NoError(t, err)
	c, err := js.Consumer(ctx, topology.StreamEvidence, topology.ConsumerAuditor)
	require.NoError(t, err)
	// A replicated consumer answers pulls once its group has a leader
	// (before, a pull finds no responders).
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return errors.New("consumer has no leader yet")
		}
		return nil
	})
	msg, err := c.Next(jetstream.FetchMaxWait(10 * time.Second))
	require.NoError(t, err)
	got, _, err := binding.Read[events.CollectionFailed](msg)
	require.NoError(t, err)
	assert.Equal(t, e.ID(), got.ID())
	require.NoError(t, msg.DoubleAck(ctx))
}

// TestEnsureRaisesTheAuditorWindow: an auditor consumer made with the old
// window (256) gets the auditor's larger one at the next Ensure.
func TestEnsureRaisesTheAuditorWindow(t *testing.T) {
	ctx, js := jetStream(t)
	old := topology.New(1)
	for i := range old.Consumers {
		old.Consumers[i].Config.MaxAckPending = topology.MaxAckPending
	}
	require.NoError(t, old.Ensure(ctx, js))
	require.NoError(t, topology.Ensure(ctx, js, 1))
	c, err := js.Consumer(ctx, topology.StreamVerdicts, topology.ConsumerAuditor)
	require.NoError(t, err)
	assert.Equal(t, topology.AuditorMaxAckPending, c.CachedInfo().Config.MaxAckPending)
}

// TestVerifierTopology: the verifier's definitions are New's, its
// consumer under the configured name, and the evidence-latest bucket,
// which New leaves out; ensuring them again, or New's after them, changes
// nothing.
func TestVerifierTopology(t *testing.T) {
	ctx, js := jetStream(t)

	assert.Equal(t, topology.Verifier(1, topology.ConsumerVerifier), topology.Verifier(1, ""), "the default consumer name")
	for _, b := range topology.New(3).Buckets {
		assert.NotEqual(t, topology.BucketEvidence, b.Bucket, "New leaves the verifier's bucket out")
	}
	renamed := topology.Verifier(1, "verifier-b")
	require.Len(t, renamed.Consumers, len(topology.New(1).Consumers))
	assert.Equal(t, "verifier-b", renamed.Consumers[0].Config.Durable)
	assert.Equal(t, topology.New(1).Streams, renamed.Streams)
	r3 := topology.Verifier(3, "")
	for _, b := range r3.Buckets {
		assert.Equal(t, 3, b.Replicas, "bucket %s", b.Bucket)
	}

	require.NoError(t, topology.EnsureVerifier(ctx, js, 1))
	top := topology.Verifier(1, "")
	first := state(ctx, t, js, top)
	ev := first.streams["KV_"+topology.BucketEvidence].Config
	assert.Equal(t, int64(1), ev.MaxMsgsPerSubject, "one snapshot per host and target")
	assert.Equal(t, int32(events.MaxEventSize), ev.MaxMsgSize)
	kv, err := js.KeyValue(ctx, topology.BucketEvidence)
	require.NoError(t, err)
	target := events.Target{Kind: "git.repository", Identifier: "/srv/app"}
	_, err = kv.Put(ctx, topology.VerdictKey("web-01", target), []byte(`{}`))
	require.NoError(t, err, "a host's target key is a valid key-value key")

	require.NoError(t, top.Ensure(ctx, js))
	require.NoError(t, topology.Ensure(ctx, js, 1))
	assertUnchanged(t, first, state(ctx, t, js, top))
}

// TestEnsureUncompressesInterestStreams: a deployment whose EVIDENCE
// stream was made compressed (as before) gets it uncompressed at the next
// Ensure, keeping its messages.
func TestEnsureUncompressesInterestStreams(t *testing.T) {
	ctx, js := jetStream(t)
	top := topology.New(1)
	old := top.Streams[0]
	require.Equal(t, topology.StreamEvidence, old.Name)
	old.Compression = jetstream.S2Compression
	_, err := js.CreateStream(ctx, old)
	require.NoError(t, err)
	_, err = js.CreateOrUpdateConsumer(ctx, old.Name, top.Consumers[1].Config) // the auditor's: interest in every message
	require.NoError(t, err)
	_, err = js.Publish(ctx, "rt.collect.failed.web-01", []byte("{}"))
	require.NoError(t, err)

	require.NoError(t, top.Ensure(ctx, js))
	s, err := js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, jetstream.NoCompression, info.Config.Compression)
	assert.Equal(t, uint64(1), info.State.Msgs)
}

// TestEvidencePerSubject: a host's evidence of one subject waiting for
// its consumers stops at EvidencePerSubject messages (the publish past it
// is refused: the stream is full for that subject, natsbus.StreamFull),
// while another host's subject takes its evidence: a host flooding
// EVIDENCE builds no backlog for every other host's evidence to wait
// behind.
func TestEvidencePerSubject(t *testing.T) {
	ctx, js := jetStream(t)
	require.NoError(t, topology.New(1).Ensure(ctx, js))
	flood := events.EvidenceSubject("flood", "systemd.unit")
	for i := range topology.EvidencePerSubject {
		_, err := js.Publish(ctx, flood, []byte(strconv.Itoa(i)))
		require.NoError(t, err, "message %d", i)
	}
	_, err := js.Publish(ctx, flood, []byte("one more"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "maximum messages per subject exceeded")
	_, err = js.Publish(ctx, events.EvidenceSubject("other", "systemd.unit"), []byte("x"))
	require.NoError(t, err, "another host's subject takes its evidence")
}
