package chstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

var (
	hosts = []string{"web-01.example.com", "db 02", "it's \"quoted\""}
	key   = []byte("0123456789abcdef0123456789abcdef")
)

func open(t *testing.T) (*chstore.Store, string) {
	t.Helper()
	dsn := auditortest.ClickHouseDSN(t)
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Options{DSN: dsn})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Migrate(ctx)
	require.NoError(t, err)
	return s, dsn
}

func TestMigrateIsIdempotent(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	done, err := s.Migrate(ctx)
	require.NoError(t, err)
	assert.Empty(t, done, "nothing left to apply")
	v, err := s.Versions(ctx)
	require.NoError(t, err)
	assert.Len(t, v, len(chstore.Migrations))
	for _, view := range chstore.Views {
		rows, err := s.Conn().Query(ctx, "SELECT * FROM "+s.Table()+"_"+view+" LIMIT 1")
		require.NoError(t, err, view)
		require.NoError(t, rows.Close())
	}
}

func write(t *testing.T, s *chstore.Store, recs []link.Record, batch int) {
	t.Helper()
	for i := 0; i < len(recs); i += batch {
		require.NoError(t, s.Write(context.Background(), recs[i:min(i+batch, len(recs))]))
	}
}

func run(t *testing.T, s *chstore.Store, h chain.Hasher, cps []chain.Checkpoint) chain.Report {
	t.Helper()
	ctx := context.Background()
	rep, err := chain.Run(ctx, h, cps, s.Source(ctx))
	require.NoError(t, err)
	return rep
}

func TestWriteReadVerify(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	h := chain.NewHasher(key)
	recs := auditortest.Records(t, h, 300, hosts)
	write(t, s, recs, 64)

	want := map[string]link.Head{}
	for _, r := range recs {
		want[r.Chain] = r.Head()
	}
	heads, err := s.Heads(ctx)
	require.NoError(t, err)
	assert.Equal(t, want, heads)
	some, err := s.HeadsOf(ctx, []string{"BASELINES", "VERDICTS/it's \"quoted\"", "nope"})
	require.NoError(t, err)
	assert.Equal(t, map[string]link.Head{"BASELINES": want["BASELINES"], "VERDICTS/it's \"quoted\"": want["VERDICTS/it's \"quoted\""]}, some)

	var got []link.Record
	require.NoError(t, s.Links(ctx, "VERDICTS/db 02", 3, func(r link.Record) error { got = append(got, r); return nil }))
	var wantLinks []link.Record
	for _, r := range recs {
		if r.Chain == "VERDICTS/db 02" && r.Seq > 3 {
			wantLinks = append(wantLinks, r)
		}
	}
	require.Len(t, got, len(wantLinks))
	for i := range got {
		assert.Equal(t, string(wantLinks[i].Line), string(got[i].Line))
		assert.Equal(t, wantLinks[i].Meta, got[i].Meta)
	}

	rep := run(t, s, h, nil)
	require.Nil(t, rep.Broken)
	assert.Equal(t, 300, rep.Links)
	var parts uint64
	require.NoError(t, s.Conn().QueryRow(ctx, "SELECT uniqExact(_part) FROM "+s.Table()).Scan(&parts))
	t.Logf("read %d data parts side by side", parts)
	// One chain, and a table read with ORDER BY, verify the same.
	ordered, err := chstore.Open(ctx, chstore.Options{DSN: s.DSN(), PartStreams: -1})
	require.NoError(t, err)
	defer func() { _ = ordered.Close() }()
	orep := run(t, ordered, h, nil)
	assert.Equal(t, rep, orep)
	// Link by link, the merged read hands out what ORDER BY does.
	order := func(st *chstore.Store) []string {
		var out []string
		_, err := chain.RunVisit(ctx, h, nil, st.Source(ctx), func(c *chain.Candidate) {
			out = append(out, fmt.Sprintf("%d %s %d %s", c.Pos.Row, c.Chain, c.Seq, c.Hash))
		})
		require.NoError(t, err)
		return out
	}
	assert.Equal(t, order(ordered), order(s))
	crep, err := chain.Run(ctx, h, nil, s.Source(ctx, "VERDICTS/db 02", "BASELINES"))
	require.NoError(t, err)
	require.Nil(t, crep.Broken)
	assert.Equal(t, map[string]chain.Head{"VERDICTS/db 02": rep.Chains["VERDICTS/db 02"], "BASELINES": rep.Chains["BASELINES"]}, crep.Chains)

	// The dashboard views.
	var drifts, modified, rejected, types uint64
	require.NoError(t, s.Conn().QueryRow(ctx, "SELECT sum(drifts) FROM "+s.Table()+"_drift_by_target").Scan(&drifts))
	require.NoError(t, s.Conn().QueryRow(ctx, "SELECT count() FROM "+s.Table()+"_modified_runnables WHERE environment = '/srv/agent/.venv'").Scan(&modified))
	require.NoError(t, s.Conn().QueryRow(ctx, "SELECT count() FROM "+s.Table()+"_rejected").Scan(&rejected))
	require.NoError(t, s.Conn().QueryRow(ctx, "SELECT count() FROM "+s.Table()+"_events_per_type").Scan(&types))
	var wantDrift, wantMod, wantRej uint64
	for _, r := range recs {
		switch {
		case r.Meta.Rejected:
			wantRej++
		case r.Meta.Type == events.TypeVerdictDrift:
			wantDrift++
		case r.Meta.Type == "dev.runtimetruth.runnable.modified.v1":
			wantMod++
		}
	}
	assert.Equal(t, wantDrift, drifts)
	assert.Equal(t, wantMod, modified)
	assert.Equal(t, wantRej, rejected)
	assert.Positive(t, types)
	var verdicts uint64
	require.NoError(t, s.Conn().QueryRow(ctx, "SELECT sum(verdicts) FROM "+s.Table()+"_verdicts_over_time").Scan(&verdicts))
	assert.Positive(t, verdicts)
}

// TestTamper changes the table as someone with write access could, and
// checks that verification names the link and why.
func TestTamper(t *testing.T) {
	h := chain.NewHasher(key)
	const c = "VERDICTS/web-01.example.com"
	for _, tc := range []struct {
		name   string
		stmts  func(table string, byseq map[uint64]link.Record) []string
		cps    func(byseq map[uint64]link.Record) []chain.Checkpoint
		reason chain.Reason
		seq    uint64
	}{
		{name: "ALTER UPDATE", reason: chain.Changed, seq: 5, stmts: func(table string, _ map[uint64]link.Record) []string {
			return []string{fmt.Sprintf(`ALTER TABLE %s UPDATE event = replaceOne(event, '"main_pid"', '"main_PID"') WHERE chain = '%s' AND seq = 5`, table, c)}
		}},
		{name: "DELETE", reason: chain.Missing, seq: 8, stmts: func(table string, _ map[uint64]link.Record) []string {
			return []string{fmt.Sprintf(`ALTER TABLE %s DELETE WHERE chain = '%s' AND seq = 7`, table, c)}
		}},
		{name: "a row inserted twice", reason: chain.Duplicated, seq: 3, stmts: func(table string, _ map[uint64]link.Record) []string {
			return []string{fmt.Sprintf(`INSERT INTO %s SELECT * FROM %s WHERE chain = '%s' AND seq = 3`, table, table, c)}
		}},
		{name: "a forged row inserted", reason: chain.Changed, seq: 4, stmts: func(table string, _ map[uint64]link.Record) []string {
			return []string{fmt.Sprintf(`INSERT INTO %s SELECT chain, seq, prev, hash, stream, stream_seq, nats_subject, stored, stored_ms,
				event_id, event_type, event_source, event_subject, event_time, event_time_ms, host, target, status, rejected, reason,
				replaceOne(event, '"nats"', '"NATS"') FROM %s WHERE chain = '%s' AND seq = 4`, table, table, c)}
		}},
		{name: "a reordered sequence", reason: chain.Reordered, seq: 5, stmts: func(table string, byseq map[uint64]link.Record) []string {
			return []string{
				fmt.Sprintf(`INSERT INTO %s SELECT chain, if(seq = 5, 6, 5), prev, hash, stream, stream_seq, nats_subject, stored, stored_ms,
				event_id, event_type, event_source, event_subject, event_time, event_time_ms, host, target, status, rejected, reason,
				event FROM %s WHERE chain = '%s' AND seq IN (5, 6)`, table, table, c),
				fmt.Sprintf(`ALTER TABLE %s DELETE WHERE chain = '%s' AND ((seq = 5 AND hash = '%s') OR (seq = 6 AND hash = '%s'))`,
					table, c, byseq[5].Hash, byseq[6].Hash),
			}
		}},
		{name: "truncated after a checkpoint", reason: chain.Truncated, seq: 12,
			cps: func(byseq map[uint64]link.Record) []chain.Checkpoint {
				return []chain.Checkpoint{{Chain: c, Seq: 12, Head: byseq[12].Hash}}
			},
			stmts: func(table string, _ map[uint64]link.Record) []string {
				return []string{fmt.Sprintf(`ALTER TABLE %s DELETE WHERE chain = '%s' AND seq > 10`, table, c)}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := open(t)
			recs := auditortest.Records(t, h, 200, hosts)
			write(t, s, recs, 1000)
			byseq := map[uint64]link.Record{}
			for _, r := range recs {
				if r.Chain == c {
					byseq[r.Seq] = r
				}
			}
			require.Greater(t, len(byseq), 12)
			var cps []chain.Checkpoint
			if tc.cps != nil {
				cps = tc.cps(byseq)
			}
			require.Nil(t, run(t, s, h, cps).Broken)
			auditortest.Exec(t, dsnOf(t, s), tc.stmts(s.Table(), byseq)...)
			// The parts merged as read (the default) and the table read
			// with ORDER BY (PartStreams < 0) find the same break.
			ordered, err := chstore.Open(context.Background(), chstore.Options{DSN: s.DSN(), PartStreams: -1})
			require.NoError(t, err)
			defer func() { _ = ordered.Close() }()
			for _, store := range []*chstore.Store{s, ordered} {
				rep := run(t, store, h, cps)
				require.NotNil(t, rep.Broken)
				assert.Equal(t, tc.reason, rep.Broken.Reason, rep.Broken.Error())
				assert.Equal(t, c, rep.Broken.Chain, rep.Broken.Error())
				assert.Equal(t, tc.seq, rep.Broken.Seq, rep.Broken.Error())
			}
		})
	}
}

func dsnOf(t *testing.T, s *chstore.Store) string {
	t.Helper()
	return s.DSN()
}

func TestOpenFailsFast(t *testing.T) {
	start := time.Now()
	_, err := chstore.Open(context.Background(), chstore.Options{DSN: "clickhouse://127.0.0.1:1/default", Timeout: 2 * time.Second})
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func openStore(ctx context.Context, dsn string) (*chstore.Store, error) {
	s, err := chstore.Open(ctx, chstore.Options{DSN: dsn})
	if err != nil {
		return nil, err
	}
	if _, err := s.Migrate(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}
