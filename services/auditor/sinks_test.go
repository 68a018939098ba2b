package auditor_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/syslog"
)

const hmacKey = "an audit key of at least 16 bytes"

// keys writes an HMAC key and an Ed25519 checkpoint key.
func keys(t *testing.T, dir string) (hmacFile, cpFile string, pub ed25519.PublicKey) {
	t.Helper()
	hmacFile = filepath.Join(dir, "hmac.key")
	require.NoError(t, os.WriteFile(hmacFile, []byte(hmacKey+"\n"), 0o600))
	_, k, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	cpFile = filepath.Join(dir, "checkpoint.pem")
	require.NoError(t, os.WriteFile(cpFile, chain.MarshalPrivateKey(k), 0o600))
	return hmacFile, cpFile, k.Public().(ed25519.PublicKey)
}

type linkKey struct {
	chain string
	seq   uint64
}

func verifyStore(t *testing.T, dsn string, h chain.Hasher, cps []chain.Checkpoint) (chain.Report, map[linkKey]string) {
	t.Helper()
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Options{DSN: dsn})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	rep, err := chain.Run(ctx, h, cps, s.Source(ctx))
	require.NoError(t, err)
	rows := map[linkKey]string{}
	r, err := s.Conn().Query(ctx, "SELECT chain, seq, hash FROM "+s.Table())
	require.NoError(t, err)
	defer func() { _ = r.Close() }()
	n := 0
	for r.Next() {
		var k linkKey
		var hash string
		require.NoError(t, r.Scan(&k.chain, &k.seq, &hash))
		rows[k] = hash
		n++
	}
	require.Equal(t, n, len(rows), "no row twice")
	return rep, rows
}

// TestPipelineToEverySink audits the pipeline into JSONL, ClickHouse and
// rsyslog at once, keyed, with signed checkpoints: the three hold equal
// chains, and the checkpoints found in rsyslog's output make a truncation
// of the table detectable.
func TestPipelineToEverySink(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	rs := auditortest.RsyslogEnv(t)
	hmacFile, cpFile, pub := keys(t, e.dir)
	host := auditortest.UniqueHost("auditor")
	cfg := e.config()
	cfg.HMAC.KeyFile = hmacFile
	cfg.ClickHouse.DSN = auditortest.ClickHouseDSN(t)
	cfg.Syslog.Address, cfg.Syslog.Hostname = rs.TCP, host
	cfg.Syslog.CursorFile = filepath.Join(e.dir, "syslog.cursor")
	cfg.Checkpoint = auditor.CheckpointConfig{Interval: 100 * time.Millisecond, KeyFile: cpFile, File: filepath.Join(e.dir, "checkpoints.jsonl")}
	cfg.Batch = 64
	a := start(t, cfg)
	n := e.publish(t, 0, 300)
	_, err := e.js.PublishMsg(context.Background(), auditortest.Malformed("db 03", 7))
	require.NoError(t, err)
	n++
	waitLinks(t, a, n)
	stop(t, a)

	h := chain.NewHasher([]byte(hmacKey))
	files, err := jsonl.Files(cfg.JSONL.Path)
	require.NoError(t, err)
	jrep, err := chain.Run(context.Background(), h, nil, jsonl.Source(files))
	require.NoError(t, err)
	require.Nil(t, jrep.Broken)
	crep, rows := verifyStore(t, cfg.ClickHouse.DSN, h, nil)
	require.Nil(t, crep.Broken)
	assert.Equal(t, jrep.Chains, crep.Chains, "JSONL and ClickHouse hold the same chains")
	assert.Equal(t, n, crep.Links)

	var cps []chain.Checkpoint
	fromSyslog := map[linkKey]string{}
	severity := map[linkKey]int{}
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		cps = cps[:0]
		for _, ln := range auditortest.SyslogLines(t, rs.File, host) {
			m, err := auditortest.ParseSyslog(ln)
			if err != nil {
				return err
			}
			if m.MsgID == "checkpoint" {
				c, _, err := chain.ParseCheckpoint([]byte(ln))
				if err != nil {
					return err
				}
				if err := c.Verify(pub); err != nil {
					return err
				}
				cps = append(cps, []chain.Checkpoint{c}...)
				continue
			}
			sd := m.SD["rtlink@32473"]
			seq, _ := strconv.ParseUint(sd["seq"], 10, 64)
			fromSyslog[linkKey{sd["chain"], seq}] = sd["hash"]
			severity[linkKey{sd["chain"], seq}] = m.Severity
		}
		if len(fromSyslog) < n {
			return fmt.Errorf("%d of %d links in rsyslog", len(fromSyslog), n)
		}
		return nil
	})
	assert.Equal(t, rows, fromSyslog, "rsyslog holds the same links as ClickHouse")
	// runnable.modified, drift verdicts and rejected events (the auditor's
	// and the dead-letter records) reach the SIEM
	// at warning severity, the rest below it.
	recs := readRecords(t, cfg.JSONL.Path) // verified above
	warnings := 0
	for _, r := range recs {
		sev := severity[linkKey{r.Chain, r.Seq}]
		switch {
		case r.Meta.Rejected, r.Meta.Type == events.TypeEventRejected, r.Meta.Type == events.TypeRunnableModified,
			r.Meta.Type == events.TypeVerdictDrift:
			assert.Equal(t, syslog.SevWarning, sev, "%s %s seq %d", r.Meta.Type, r.Chain, r.Seq)
			warnings++
		default:
			assert.Greater(t, sev, syslog.SevWarning, "%s %s seq %d", r.Meta.Type, r.Chain, r.Seq)
		}
	}
	assert.Positive(t, warnings)
	dashboards(t, cfg.ClickHouse.DSN, recs)
	require.NotEmpty(t, cps, "checkpoints reached rsyslog")
	fileCps, skipped, err := auditor.ReadCheckpoints(cfg.Checkpoint.File, pub)
	require.NoError(t, err)
	assert.NotEmpty(t, fileCps)
	assert.Zero(t, skipped, "the checkpoint file holds checkpoints only")

	// Against the checkpoints, the intact table verifies; cut its last
	// links and it is reported truncated.
	rep, _ := verifyStore(t, cfg.ClickHouse.DSN, h, cps)
	require.Nil(t, rep.Broken)
	last := cps[len(cps)-1]
	auditortest.Exec(t, cfg.ClickHouse.DSN, fmt.Sprintf("ALTER TABLE audit_links DELETE WHERE chain = %s AND seq >= %d",
		chstore.Quote(last.Chain), last.Seq))
	rep, _ = verifyStore(t, cfg.ClickHouse.DSN, h, cps)
	require.NotNil(t, rep.Broken)
	assert.Equal(t, chain.Truncated, rep.Broken.Reason, rep.Broken.Error())
}

// dashboards checks the views over what the auditor wrote against the
// records: events per type, verdicts by status, drifts by host and
// target, modified runnables and rejected events.
func dashboards(t *testing.T, dsn string, recs []link.Record) {
	t.Helper()
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Options{DSN: dsn})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	types, verdicts, drifts := map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
	var modified, rejected uint64
	for _, r := range recs {
		m := r.Meta
		types[m.Type]++
		switch m.Type {
		case events.TypeVerdictPass, events.TypeVerdictDrift, events.TypeVerdictError:
			verdicts[m.Status]++
		}
		if m.Type == events.TypeVerdictDrift {
			drifts[m.Host+" "+m.Target]++
		}
		if m.Type == events.TypeRunnableModified {
			modified++
		}
		if m.Rejected {
			rejected++
		}
	}
	sum := func(q string) map[string]uint64 {
		out := map[string]uint64{}
		rows, err := s.Conn().Query(ctx, q)
		require.NoError(t, err, q)
		defer func() { _ = rows.Close() }()
		for rows.Next() {
			var k string
			var n uint64
			require.NoError(t, rows.Scan(&k, &n))
			out[k] = n
		}
		require.NoError(t, rows.Err())
		return out
	}
	v := s.Table() + "_"
	assert.Equal(t, types, sum("SELECT event_type, sum(events) FROM "+v+"events_per_type GROUP BY event_type"))
	assert.Equal(t, verdicts, sum("SELECT status, sum(verdicts) FROM "+v+"verdicts_over_time GROUP BY status"))
	assert.Equal(t, drifts, sum("SELECT concat(host, ' ', target), drifts FROM "+v+"drift_by_target"))
	assert.Equal(t, map[string]uint64{"": modified}, sum("SELECT '', count() FROM "+v+"modified_runnables"))
	assert.Equal(t, map[string]uint64{"": rejected}, sum("SELECT '', count() FROM "+v+"rejected"))
	assert.Positive(t, rejected)
}

// TestClickHouseOutage stops ClickHouse while events arrive: the backlog
// waits in JetStream, unacknowledged, and is written once ClickHouse is
// back; nothing is lost or written twice.
func TestClickHouseOutage(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	srv := auditortest.StartClickHouse(t)
	cfg := e.config()
	cfg.JSONL.Path = ""
	cfg.ClickHouse.DSN = srv.DSN
	cfg.ClickHouse.Timeout = 3 * time.Second
	a, n := e.startAndPublish(t, cfg, 0, 0, 100)

	srv.Stop()
	m := e.publish(t, 100, 200)
	waitCounted(t, a, 30*time.Second, 50*time.Millisecond, 2, auditor.MetricCommitRetries)
	backlog := 0
	for _, s := range auditor.DefaultStreams {
		c, err := e.js.Consumer(context.Background(), s, testConsumer)
		require.NoError(t, err)
		backlog += int(c.CachedInfo().NumPending) + c.CachedInfo().NumAckPending
	}
	assert.GreaterOrEqual(t, backlog, m, "the backlog waits in JetStream")

	srv.Start()
	waitLinks(t, a, n+m)
	stop(t, a)
	rep, rows := verifyStore(t, srv.DSN, chain.NewHasher(nil), nil)
	require.Nil(t, rep.Broken)
	assert.Len(t, rows, n+m)
	exactlyOnceRows(t, srv.DSN, e.stored(t))
}

// exactlyOnceRows checks the table holds every stream message once.
func exactlyOnceRows(t *testing.T, dsn string, stored map[string]uint64) {
	t.Helper()
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Options{DSN: dsn})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	for stream, n := range stored {
		var rows, distinct, top uint64
		require.NoError(t, s.Conn().QueryRow(ctx, "SELECT count(), uniqExact(stream_seq), max(stream_seq) FROM "+s.Table()+
			" WHERE stream = "+chstore.Quote(stream)).Scan(&rows, &distinct, &top))
		assert.Equal(t, n, rows, stream)
		assert.Equal(t, n, distinct, stream)
		assert.Equal(t, n, top, stream)
	}
}

// TestCrashBetweenSinks kills the auditor after a batch reached the JSONL
// log but not ClickHouse: at restart ClickHouse is brought level from the
// log, and every event is in both exactly once.
func TestCrashBetweenSinks(t *testing.T) {
	e := newEnv(t, time.Second)
	cfg := e.config()
	cfg.ClickHouse.DSN = auditortest.ClickHouseDSN(t)
	cfg.Batch = 30
	a, ch := startFaulty(t, cfg, "clickhouse")
	n := e.publish(t, 0, 100)
	waitLinks(t, a, n)
	ch.hang.Store(true)
	m := e.publish(t, 100, 100)
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		heads, err := jsonlHeads(cfg.JSONL.Path)
		if err != nil {
			return err
		}
		if heads <= n {
			return fmt.Errorf("log not ahead yet")
		}
		return nil
	})
	a.Abort()

	b, _ := e.startAndPublish(t, cfg, n+m, 200, 50)
	stop(t, b)
	assert.Positive(t, counted(t, b, auditor.MetricSinkCaughtUp), "ClickHouse was brought level from the log")
	exactlyOnce(t, readLog(t, cfg.JSONL.Path), e.stored(t))
	exactlyOnceRows(t, cfg.ClickHouse.DSN, e.stored(t))
	rep, _ := verifyStore(t, cfg.ClickHouse.DSN, chain.NewHasher(nil), nil)
	require.Nil(t, rep.Broken)
}

func jsonlHeads(path string) (int, error) {
	files, err := jsonl.Files(path)
	if err != nil {
		return 0, err
	}
	rep, err := chain.Run(context.Background(), chain.NewHasher(nil), nil, jsonl.Source(files))
	return rep.Links, err
}
