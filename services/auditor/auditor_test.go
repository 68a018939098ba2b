package auditor_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
)

func TestShutdownWithoutStart(t *testing.T) {
	a, err := auditor.New(auditor.NewDefaultConfig(), auditor.Settings{})
	require.NoError(t, err)
	require.NoError(t, a.Shutdown(context.Background()))
	require.NoError(t, a.Shutdown(context.Background()))
	require.ErrorIs(t, a.Start(context.Background()), auditor.ErrShutdown)
}

func TestLifecycleOneMessage(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	a, _ := e.startAndPublish(t, e.config(), 0, 0, 1)
	stop(t, a)
	require.NoError(t, a.Shutdown(context.Background()), "twice")
	recs := readLog(t, e.config().JSONL.Path)
	require.Len(t, recs, 2)
	chains := []string{recs[0].Chain, recs[1].Chain}
	assert.ElementsMatch(t, []string{"VERDICTS/web-01.example.com", "DLQ"}, chains)
}

// TestEveryEventOnceInStreamOrder audits every stream of a busy pipeline,
// a malformed event included, then restarts: every message is in the
// chain once, each chain in stream order, and the log verifies.
func TestEveryEventOnceInStreamOrder(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	cfg.Batch = 50
	a := start(t, cfg)
	n := e.publish(t, 0, 400)
	_, err := e.js.PublishMsg(context.Background(), auditortest.Malformed("web-01.example.com", 1))
	require.NoError(t, err)
	n++
	waitLinks(t, a, n)
	stop(t, a)

	recs := readLog(t, cfg.JSONL.Path)
	exactlyOnce(t, recs, e.stored(t))
	rejected := 0
	for _, r := range recs {
		if r.Meta.Rejected {
			rejected++
			assert.Equal(t, "EVIDENCE/web-01.example.com", r.Chain)
			assert.Equal(t, events.TypeEventRejected, r.Meta.Type)
			assert.Equal(t, "/auditor/test", r.Meta.Source)
			assert.NotEmpty(t, r.Meta.Reason)
		}
	}
	assert.Equal(t, 1, rejected, "the malformed event is recorded as rejected")
	chains := map[string]bool{}
	for _, r := range recs {
		chains[r.Chain] = true
	}
	for _, want := range []string{"EVIDENCE/web-01.example.com", "EVIDENCE/db 03", "VERDICTS/web-02.example.com", "BASELINES", "DLQ"} {
		assert.True(t, chains[want], "chain %s", want)
	}

	// A restart resumes from the log's heads.
	e.runOver(t, cfg, n, 400, 100)
	exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))
}

// TestCrashMidBatchThenRestart kills the auditor while a batch is half
// written (in the sink, not acknowledged) and while messages are taken but
// not recorded; the restarted auditor resumes from the sink's heads and
// records every message exactly once. It runs with the JSONL log and with
// ClickHouse as the only sink.
func TestCrashMidBatchThenRestart(t *testing.T) {
	for _, sink := range []string{"jsonl", "clickhouse"} {
		t.Run(sink, func(t *testing.T) {
			e := newEnv(t, time.Second)
			cfg := e.config()
			cfg.Batch = 40
			if sink == "clickhouse" {
				cfg.JSONL.Path = ""
				cfg.ClickHouse.DSN = auditortest.ClickHouseDSN(t)
			}
			a, slow := startFaulty(t, cfg, "")
			n := e.publish(t, 0, 200)
			waitLinks(t, a, n)
			// From now on the sink stores a batch but the auditor never
			// returns from the write: killed after the write, before the
			// acknowledgement.
			base := slow.hangAfterStoring()
			m := e.publish(t, 200, 300)
			slow.waitWrites(t, 10*time.Second, base+3) // a hung write in three streams at least
			a.Abort()

			b, k := e.startAndPublish(t, cfg, n+m, 500, 100)
			// Redeliveries of what the first run had stored arrive after
			// the ack wait and are acknowledged as duplicates.
			e.waitConsumed(t, 20*time.Second, testConsumer)
			stop(t, b)
			assert.Positive(t, counted(t, b, auditor.MetricUnlinked, auditor.AttrReason.String(auditor.ReasonDuplicate)), "redeliveries of stored links are duplicates")
			t.Logf("restart: recovered %d from the stream, %d duplicates", counted(t, b, auditor.MetricRecovered), counted(t, b, auditor.MetricUnlinked, auditor.AttrReason.String(auditor.ReasonDuplicate)))
			if sink == "jsonl" {
				exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))
				return
			}
			exactlyOnceRows(t, cfg.ClickHouse.DSN, e.stored(t))
			rep, _ := verifyStore(t, cfg.ClickHouse.DSN, chain.NewHasher(nil), nil)
			require.Nil(t, rep.Broken)
			assert.Equal(t, n+m+k, rep.Links)
		})
	}
}

// TestLostAcksAreDuplicates drops the acknowledgements of committed
// batches: the redeliveries are recognized and not appended again.
func TestLostAcksAreDuplicates(t *testing.T) {
	e := newEnv(t, 500*time.Millisecond)
	cfg := e.config()
	cfg.Batch = 20
	var dropped atomic.Int32
	a, _ := e.startAndPublish(t, cfg, 0, 0, 150, func(a *auditor.Auditor) {
		a.DropAcks(func() bool { return dropped.Add(1) <= 5 })
	})
	waitCounted(t, a, 20*time.Second, 50*time.Millisecond, 1, auditor.MetricUnlinked, auditor.AttrReason.String(auditor.ReasonDuplicate))
	stop(t, a)
	exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))
}

// TestSinkOutageKeepsTheBacklog fails the log's writes for a while: the
// messages wait unacknowledged, then are all recorded once.
func TestSinkOutageKeepsTheBacklog(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	a, s := startFaulty(t, cfg, "")
	s.fail.Store(true)
	n := e.publish(t, 0, 300)
	waitCounted(t, a, 10*time.Second, 10*time.Millisecond, 2, auditor.MetricCommitRetries)
	assert.Empty(t, a.Heads())
	s.fail.Store(false)
	waitLinks(t, a, n)
	stop(t, a)
	exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))
}

// TestRotationKeepsTheChain rotates the log many times, across a restart.
func TestRotationKeepsTheChain(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	cfg.Batch = 10
	cfg.JSONL.MaxBytes = 16 << 10
	n := e.runOver(t, cfg, 0, 0, 150)
	e.runOver(t, cfg, n, 150, 50)
	files, err := jsonl.Files(cfg.JSONL.Path)
	require.NoError(t, err)
	assert.Greater(t, len(files), 5)
	assert.Equal(t, cfg.JSONL.Path, files[len(files)-1])
	assert.Equal(t, jsonl.RotatedName(cfg.JSONL.Path, 1), files[0])
	exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))
	// The directory and a glob list the same files.
	dir, err := jsonl.Files(filepath.Dir(cfg.JSONL.Path))
	require.NoError(t, err)
	assert.Equal(t, files, dir)
	glob, err := jsonl.Files(filepath.Join(filepath.Dir(cfg.JSONL.Path), "audit.jsonl*"))
	require.NoError(t, err)
	assert.Equal(t, files, glob)
}

// TestTornLineAndTamperedLog: a torn last line (a crash mid-write) is
// dropped at start; a tampered log is refused.
func TestTornLineAndTamperedLog(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	n := e.runOver(t, cfg, 0, 0, 20)

	f, err := os.OpenFile(cfg.JSONL.Path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"chain":"VERDICTS/web-01.example.com","event":{"attri`)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	e.runOver(t, cfg, n, 20, 10)
	exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))

	data, err := os.ReadFile(cfg.JSONL.Path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfg.JSONL.Path, []byte(string(data[:100])+"X"+string(data[101:])), 0o600))
	b, err := newAuditor(t, cfg, auditor.Settings{})
	require.NoError(t, err)
	err = b.Start(context.Background())
	require.ErrorIs(t, err, jsonl.ErrBroken)
	assert.Contains(t, err.Error(), "audit.jsonl:1")
	require.NoError(t, b.Shutdown(context.Background()))
}

func TestSecondWriterIsRefused(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	a, n := e.startAndPublish(t, cfg, 0, 0, 40)

	// Another instance on the same streams waits for the writer lease and
	// gives up at its start timeout, naming the holder; so does a second
	// auditor of the same instance while the first is alive.
	standby := cfg
	standby.Instance = "standby"
	for _, c := range []auditor.Config{standby, cfg} {
		c.StartTimeout = 2 * time.Second
		b, err := newAuditor(t, c, auditor.Settings{})
		require.NoError(t, err)
		err = b.Start(context.Background())
		require.ErrorIs(t, err, auditor.ErrLeaseHeld)
		assert.Contains(t, err.Error(), `held by instance "test"`)
		require.NoError(t, b.Shutdown(context.Background()))
	}

	// Once the writer stops, the standby starts at once, reads the heads
	// and goes on with the same chains.
	stop(t, a)
	e.runOver(t, standby, n, 40, 40)
	exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))
}

// TestLostLeaseStopsWriting takes the writer lease away (as an instance
// would once it lapsed): the auditor notices at its next renewal and
// commits nothing more.
func TestLostLeaseStopsWriting(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	a, _ := e.startAndPublish(t, cfg, 0, 0, 20)
	kv, err := e.js.KeyValue(context.Background(), auditor.BucketLeases)
	require.NoError(t, err)
	for _, s := range cfg.Streams {
		_, err := kv.Put(context.Background(), testConsumer+"."+s, []byte(`{"instance":"thief"}`))
		require.NoError(t, err)
	}
	waitCounted(t, a, 20*time.Second, 20*time.Millisecond, 1, auditor.MetricLeaseLost)
	before := counted(t, a, auditor.MetricAppended)
	e.publish(t, 20, 20)
	time.Sleep(time.Second) // nothing may happen: no assertion on time
	assert.Equal(t, before, counted(t, a, auditor.MetricAppended), "appended after the lease was lost")
	stop(t, a)
	// The thief's lease stands: the auditor did not delete it.
	e1, err := kv.Get(context.Background(), testConsumer+"."+cfg.Streams[0])
	require.NoError(t, err)
	assert.JSONEq(t, `{"instance":"thief"}`, string(e1.Value()))
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*auditor.Config)
		err  string
	}{
		{"default", func(*auditor.Config) {}, ""},
		{"no sink", func(c *auditor.Config) { c.JSONL.Path = "" }, "no sink"},
		{"nothing required", func(c *auditor.Config) { c.JSONL.Required = false }, "must be required"},
		{"bad stream", func(c *auditor.Config) { c.Streams = []string{"A", "A"} }, "streams"},
		{"bad table", func(c *auditor.Config) { c.ClickHouse.DSN = "clickhouse://x"; c.ClickHouse.Table = "a;b" }, "clickhouse.table"},
		{"bad syslog", func(c *auditor.Config) { c.Syslog.Address = "x:1"; c.Syslog.Network = "http" }, "syslog.network"},
		{"batch", func(c *auditor.Config) { c.Batch = 0 }, "batch"},
		{"partitions", func(c *auditor.Config) { c.Partitions = 0 }, "partitions"},
		{"partition", func(c *auditor.Config) { c.Partitions, c.Partition = 2, 2 }, "partition"},
		{"negative partition", func(c *auditor.Config) { c.Partitions, c.Partition = 2, -1 }, "partition"},
		{"partitioned", func(c *auditor.Config) { c.Partitions, c.Partition = 4, 3 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := auditor.NewDefaultConfig()
			tc.edit(&cfg)
			err := cfg.Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, config.ErrInvalid)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestConfigLoadsStrictly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "auditor.yaml")
	require.NoError(t, os.WriteFile(path, []byte("streams: [EVIDENCE]\nclickhouse:\n  dsn: clickhouse://127.0.0.1:9000/default\nsyslog:\n  address: 127.0.0.1:514\n"), 0o600))
	cfg := auditor.NewDefaultConfig()
	require.NoError(t, config.Load(path, "RUNTIMETRUTH_AUDITOR", &cfg, nil))
	assert.Equal(t, []string{"EVIDENCE"}, cfg.Streams)
	assert.Equal(t, "audit_links", cfg.ClickHouse.Table)
	require.NoError(t, os.WriteFile(path, []byte("clickhouse:\n  dns: x\n"), 0o600))
	cfg = auditor.NewDefaultConfig()
	require.Error(t, config.Load(path, "RUNTIMETRUTH_AUDITOR", &cfg, nil))
}
