package auditor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// again is m once more, as a new stream message: without its Nats-Msg-Id
// (so JetStream cannot tell it is m), or byte for byte once the stream's
// duplicate window (shortened to 100 ms) has passed.
func again(t *testing.T, js jetstream.JetStream, m *nats.Msg, sameMsgID bool) {
	t.Helper()
	ctx := context.Background()
	if !sameMsgID {
		c := nats.NewMsg(m.Subject)
		for k, v := range m.Header {
			if k != jetstream.MsgIDHeader {
				c.Header[k] = v
			}
		}
		c.Data = m.Data
		ack, err := js.PublishMsg(ctx, c)
		require.NoError(t, err)
		require.False(t, ack.Duplicate)
		return
	}
	st, err := js.Stream(ctx, auditortest.StreamOf(m.Subject))
	require.NoError(t, err)
	cfg := st.CachedInfo().Config
	cfg.Duplicates = 100 * time.Millisecond
	_, err = js.UpdateStream(ctx, cfg)
	require.NoError(t, err)
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		ack, err := js.PublishMsg(ctx, m)
		if err != nil {
			return err
		}
		if ack.Duplicate {
			return fmt.Errorf("still within the duplicate window")
		}
		return nil
	})
}

// TestEventIDLinkedOnce publishes the same events again as new stream
// messages (without their Nats-Msg-Id, and byte for byte after the
// duplicate window), before and after an auditor restart, into each sink
// the auditor reads ids back from: every event id is linked once in its
// chain, the copies are acknowledged and counted, and the chains verify.
func TestEventIDLinkedOnce(t *testing.T) {
	for _, sink := range []string{"jsonl", "clickhouse"} {
		t.Run(sink, func(t *testing.T) {
			e := newEnv(t, 2*time.Second)
			cfg := e.config()
			if sink == "clickhouse" {
				cfg.JSONL.Path = ""
				cfg.ClickHouse.DSN = auditortest.ClickHouseDSN(t)
			}
			run := func(publish func()) int64 {
				a, err := newAuditor(t, cfg, auditor.Settings{})
				require.NoError(t, err)
				require.NoError(t, a.Start(context.Background()))
				publish()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				require.NoError(t, a.Sync(ctx))
				n := counted(t, a, auditor.MetricDuplicateIDs)
				stop(t, a)
				return n
			}
			evidence := auditortest.Msg(t, auditortest.Payload(t, hosts, 5), 5)
			verdict := auditortest.Msg(t, auditortest.Payload(t, hosts, 0), 0)
			other := auditortest.Msg(t, auditortest.Payload(t, hosts, 8), 8)
			first := run(func() {
				for _, m := range []*nats.Msg{evidence, verdict} {
					_, err := e.js.PublishMsg(context.Background(), m)
					require.NoError(t, err)
				}
				again(t, e.js, evidence, false)
			})
			assert.Equal(t, int64(1), first, "the copy published at once")
			second := run(func() {
				again(t, e.js, evidence, true)
				again(t, e.js, verdict, false)
				_, err := e.js.PublishMsg(context.Background(), other)
				require.NoError(t, err)
				again(t, e.js, other, false)
			})
			// After the restart: the copies of events linked before it and
			// of one linked in it, and the first run's copy once more: the
			// chain's last link is before it, so the auditor reads it back
			// from the stream at start (a message taken, for all it knows,
			// and not recorded) and finds it a duplicate again.
			assert.Equal(t, int64(4), second)

			recs := linksOf(t, cfg)
			count := map[[2]string]int{}
			for _, r := range recs {
				require.False(t, r.Meta.Rejected, "no copy is refused as malformed: %s", r.Meta.Reason)
				count[[2]string{r.Chain, r.Meta.ID}]++
			}
			assert.Equal(t, 3, len(recs), "three events")
			for k, n := range count {
				assert.Equal(t, 1, n, "chain %s event %s linked once", k[0], k[1])
			}
		})
	}
}

// linksOf reads and verifies the links of cfg's sink (JSONL, else
// ClickHouse).
func linksOf(t *testing.T, cfg auditor.Config) []link.Record {
	t.Helper()
	if cfg.JSONL.Path != "" {
		return readLog(t, cfg.JSONL.Path)
	}
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Options{DSN: cfg.ClickHouse.DSN})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	rep, err := chain.Run(ctx, chain.NewHasher(nil), nil, s.Source(ctx))
	require.NoError(t, err)
	require.Nil(t, rep.Broken)
	var out []link.Record
	heads, err := s.Heads(ctx)
	require.NoError(t, err)
	for c := range heads {
		require.NoError(t, s.Links(ctx, c, 0, func(r link.Record) error { out = append(out, r); return nil }))
	}
	return out
}
