package auditor_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// partitionConfigs returns the configurations of n partitions over e's
// streams, each with its own JSONL log (sink "jsonl") or all writing one
// ClickHouse table (sink "clickhouse").
func partitionConfigs(t *testing.T, e *env, n int, sink string) []auditor.Config {
	t.Helper()
	dsn := ""
	if sink == "clickhouse" {
		dsn = auditortest.ClickHouseDSN(t)
	}
	var out []auditor.Config
	for i := range n {
		cfg := e.config()
		cfg.Instance = fmt.Sprintf("p%d", i)
		cfg.Partitions, cfg.Partition = n, i
		cfg.Batch = 40
		cfg.JSONL.Path = filepath.Join(e.dir, fmt.Sprintf("p%d", i), "audit.jsonl")
		if dsn != "" {
			cfg.JSONL.Path = ""
			cfg.ClickHouse.DSN = dsn
		}
		out = append(out, cfg)
	}
	return out
}

// waitAllLinks waits until the auditors' chains hold want links in all.
func waitAllLinks(t *testing.T, as []*auditor.Auditor, want int) {
	t.Helper()
	natstest.CheckFor(t, 90*time.Second, 20*time.Millisecond, func() error {
		n := 0
		for _, a := range as {
			for _, h := range a.Heads() {
				n += int(h.Seq)
			}
		}
		if n != want {
			return fmt.Errorf("%d links, want %d", n, want)
		}
		return nil
	})
}

// waitSettled waits until the partitions' consumers have nothing pending
// or unacknowledged: redeliveries were acknowledged.
func waitSettled(t *testing.T, e *env, cfgs []auditor.Config) {
	t.Helper()
	var consumers []string
	for _, cfg := range cfgs {
		consumers = append(consumers, cfg.PartitionConsumer())
	}
	e.waitConsumed(t, 30*time.Second, consumers...)
}

// checkPartitions checks the partitions' records: every stream message
// exactly once across them, each chain in stream order and held by the
// one partition the hash names; each JSONL log verifies on its own.
func checkPartitions(t *testing.T, e *env, cfgs []auditor.Config, sink string) {
	t.Helper()
	stored := e.stored(t)
	if sink == "clickhouse" {
		exactlyOnceRows(t, cfgs[0].ClickHouse.DSN, stored)
		// One table: a chain written by two partitions would fork.
		rep, _ := verifyStore(t, cfgs[0].ClickHouse.DSN, chain.NewHasher(nil), nil)
		require.Nil(t, rep.Broken)
		return
	}
	var all []link.Record
	owner := map[string]int{}
	for i, cfg := range cfgs {
		recs := readLog(t, cfg.JSONL.Path) // verifies the log
		require.NotEmpty(t, recs, "partition %d has chains", i)
		for _, r := range recs {
			assert.Equal(t, i, link.Partition(r.Chain, len(cfgs)), "chain %s in partition %d's log", r.Chain, i)
			if j, ok := owner[r.Chain]; ok && j != i {
				t.Errorf("chain %s in the logs of partitions %d and %d", r.Chain, j, i)
			}
			owner[r.Chain] = i
		}
		all = append(all, recs...)
	}
	exactlyOnce(t, all, stored)
}

// TestPartitionsSplitTheChains runs two partitions at once over the same
// streams: every message is recorded exactly once across them, each chain
// by the partition its hash names, and each partition's log verifies.
func TestPartitionsSplitTheChains(t *testing.T) {
	for _, sink := range []string{"jsonl", "clickhouse"} {
		t.Run(sink, func(t *testing.T) {
			e := newEnv(t, 30*time.Second)
			cfgs := partitionConfigs(t, e, 2, sink)
			var as []*auditor.Auditor
			for _, cfg := range cfgs {
				as = append(as, start(t, cfg))
			}
			n := e.publish(t, 0, 300)
			waitAllLinks(t, as, n)
			waitSettled(t, e, cfgs)
			// Nobody reads the unpartitioned consumer: partition 0
			// acknowledges its messages, so that it holds nothing on the
			// interest-retention streams.
			e.waitConsumed(t, 30*time.Second, testConsumer)
			assert.Positive(t, counted(t, as[0], auditor.MetricUnlinked, auditor.AttrReason.String(auditor.ReasonDrained)))
			assert.Zero(t, counted(t, as[1], auditor.MetricUnlinked, auditor.AttrReason.String(auditor.ReasonDrained)))
			// The drain is the shared consume loop: its messages show in
			// natsbus's consume counters, by stream and the unpartitioned
			// consumer.
			byDrain := natsbus.AttrConsumer.String(testConsumer)
			for s, seq := range e.stored(t) {
				waitCounted(t, as[0], 30*time.Second, 20*time.Millisecond, int64(seq), natsbus.MetricAcked, natsbus.AttrStream.String(s), byDrain)
			}
			assert.Equal(t, counted(t, as[0], auditor.MetricUnlinked, auditor.AttrReason.String(auditor.ReasonDrained)),
				counted(t, as[0], natsbus.MetricConsumed, byDrain))
			assert.Zero(t, counted(t, as[1], natsbus.MetricConsumed, byDrain))
			for i, a := range as {
				for c := range a.Heads() {
					assert.Equal(t, i, link.Partition(c, 2), "partition %d reports chain %s", i, c)
				}
				stop(t, a)
				assert.Positive(t, counted(t, a, auditor.MetricUnlinked, auditor.AttrReason.String(auditor.ReasonOtherPartition)), "partition %d skipped the other's messages", i)
			}
			checkPartitions(t, e, cfgs, sink)
		})
	}
}

// TestPartitionCrashThenRestart kills one of two partitions mid-stream,
// with a batch written but not acknowledged and messages taken but not
// recorded, and starts it again: every message is still recorded exactly
// once across the partitions.
func TestPartitionCrashThenRestart(t *testing.T) {
	for _, sink := range []string{"jsonl", "clickhouse"} {
		t.Run(sink, func(t *testing.T) {
			e := newEnv(t, time.Second)
			cfgs := partitionConfigs(t, e, 2, sink)
			p0 := start(t, cfgs[0])
			p1, slow := startFaulty(t, cfgs[1], "")
			n := e.publish(t, 0, 200)
			waitAllLinks(t, []*auditor.Auditor{p0, p1}, n)
			base := slow.hangAfterStoring()
			m := e.publish(t, 200, 300)
			slow.waitWrites(t, 20*time.Second, base+2) // a hung write in two streams at least
			p1.Abort()

			p1 = start(t, cfgs[1])
			k := e.publish(t, 500, 100)
			waitAllLinks(t, []*auditor.Auditor{p0, p1}, n+m+k)
			waitSettled(t, e, cfgs)
			stop(t, p0)
			stop(t, p1)
			t.Logf("restarted partition: recovered %d from the stream, %d duplicates, %d of the other partition",
				counted(t, p1, auditor.MetricRecovered), counted(t, p1, auditor.MetricUnlinked, auditor.AttrReason.String(auditor.ReasonDuplicate)), counted(t, p1, auditor.MetricUnlinked, auditor.AttrReason.String(auditor.ReasonOtherPartition)))
			checkPartitions(t, e, cfgs, sink)
		})
	}
}
