package topology_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// interestWatch is a JetStream that, before any stream call that gives a
// stream interest retention, records which of the stream's consumers
// (per top) the server does not have yet.
type interestWatch struct {
	jetstream.JetStream
	top topology.Topology

	mu      sync.Mutex
	missing []string // "<stream>/<consumer>" missing when interest was set
}

func (w *interestWatch) check(ctx context.Context, cfg jetstream.StreamConfig) {
	if cfg.Retention != jetstream.InterestPolicy {
		return
	}
	for _, c := range w.top.Consumers {
		if c.Stream != cfg.Name {
			continue
		}
		if _, err := w.Consumer(ctx, c.Stream, c.Config.Durable); err != nil {
			w.mu.Lock()
			w.missing = append(w.missing, fmt.Sprintf("%s/%s (%v)", c.Stream, c.Config.Durable, err))
			w.mu.Unlock()
		}
	}
}

func (w *interestWatch) CreateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	w.check(ctx, cfg)
	return w.JetStream.CreateStream(ctx, cfg)
}

func (w *interestWatch) UpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	w.check(ctx, cfg)
	return w.JetStream.UpdateStream(ctx, cfg)
}

func (w *interestWatch) CreateOrUpdateStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	w.check(ctx, cfg)
	return w.JetStream.CreateOrUpdateStream(ctx, cfg)
}

// TestEnsureGivesInterestOnlyWithTheConsumers: Ensure never makes a
// stream an interest stream before the consumers it defines on it exist
// (an interest stream without them acknowledges and drops what it takes),
// on a new server and on one that has the topology.
func TestEnsureGivesInterestOnlyWithTheConsumers(t *testing.T) {
	ctx, js := jetStream(t)
	for _, top := range []topology.Topology{topology.New(1), topology.Verifier(1, "verifier-b")} {
		w := &interestWatch{JetStream: js, top: top}
		require.NoError(t, top.Ensure(ctx, w))
		assert.Empty(t, w.missing)
		info, err := js.Stream(ctx, topology.StreamEvidence)
		require.NoError(t, err)
		assert.Equal(t, jetstream.InterestPolicy, info.CachedInfo().Config.Retention)
	}
}

// TestEnsureLosesNothingPublishedMeanwhile: a publisher retrying while the
// topology is first made (as a collector does) has every event the server
// acknowledged stored, for its consumers; none is acknowledged and
// dropped in between.
func TestEnsureLosesNothingPublishedMeanwhile(t *testing.T) {
	ctx := timeout(t)
	_, url := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, url)
	_, pub := natstest.Connect(t, url)

	var stop atomic.Bool // between publishes, so that every publish made has its answer
	acked := make(chan int, 1)
	go func() {
		n := 0
		defer func() { acked <- n }()
		for i := 0; !stop.Load(); i++ {
			m := nats.NewMsg(fmt.Sprintf("rt.collect.host-%d.git", i))
			_, err := pub.PublishMsg(ctx, m, jetstream.WithMsgID(fmt.Sprint(i)), jetstream.WithRetryAttempts(0))
			switch {
			case err == nil:
				n++
			case !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoStreamResponse):
				t.Errorf("publish %d: %v", i, err)
				return
			}
		}
	}()
	require.NoError(t, topology.Ensure(ctx, js, 1))
	// Some acknowledged after Ensure, so the publisher ran across it.
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		s, err := js.Stream(ctx, topology.StreamEvidence)
		if err != nil {
			return err
		}
		if s.CachedInfo().State.Msgs < 100 {
			return fmt.Errorf("%d stored", s.CachedInfo().State.Msgs)
		}
		return nil
	})
	stop.Store(true)
	n := <-acked
	s, err := js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	assert.Equal(t, uint64(n), s.CachedInfo().State.Msgs, "acknowledged and stored")
}
