package chstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// spread seals n fixture events (the catalog mix, a malformed message
// every 50) whose event and store times are ten minutes apart, so the
// dashboards see several hours.
func spread(t *testing.T, h chain.Hasher, n int) []link.Record {
	t.Helper()
	chains := auditortest.NewChains(h, events.Source("auditor", "fixture"))
	seqs := map[string]uint64{}
	var out []link.Record
	for i := range n {
		at := auditortest.Time.Add(time.Duration(i) * 10 * time.Minute)
		m, _, err := binding.NewMsg(events.Source("test", "fixture"), auditortest.Payload(t, hosts, i),
			binding.WithID(fmt.Sprintf("01940000-0000-7000-8000-%012d", i)), binding.WithTime(at))
		require.NoError(t, err)
		if i%50 == 49 {
			m = auditortest.Malformed(hosts[i%len(hosts)], i)
		}
		if i%16 < 4 {
			m = auditortest.V1(t, m) // as a verifier wrote verdicts before verdict.*.v2
		}
		stream := auditortest.StreamOf(m.Subject)
		seqs[stream]++
		msg := &link.Message{Stream: stream, Seq: seqs[stream], Subject: m.Subject, Header: m.Header, Data: m.Data,
			Stored: at.Add(time.Second), Deliveries: 1, Consumer: "auditor"}
		out = append(out, chains.Seal(t, msg))
	}
	return out
}

func query(t *testing.T, s *chstore.Store, q string, row func(scan func(...any))) {
	t.Helper()
	rows, err := s.Conn().Query(context.Background(), q)
	require.NoError(t, err, q)
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		row(func(dest ...any) { require.NoError(t, rows.Scan(dest...), q) })
	}
	require.NoError(t, rows.Err(), q)
}

func hour(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }

// hourKey keys an hourly view's counts: the hour and the name counted in
// it (an event type, a verdict status).
type hourKey struct {
	hour time.Time
	name string
}

// hourly runs q, whose rows are an hour, a name and a count, and returns
// the counts by hour (in UTC) and name.
func hourly(t *testing.T, s *chstore.Store, q string) map[hourKey]uint64 {
	t.Helper()
	out := map[hourKey]uint64{}
	query(t, s, q, func(scan func(...any)) {
		var k hourKey
		var n uint64
		scan(&k.hour, &k.name, &n)
		k.hour = k.hour.UTC()
		out[k] = n
	})
	return out
}

// TestViewsFromRealData fills the table with catalog events over several
// hours and checks every dashboard view row by row against what the
// records say.
func TestViewsFromRealData(t *testing.T) {
	s, _ := open(t)
	recs := spread(t, chain.NewHasher(key), 400)
	write(t, s, recs, 64)

	type target struct{ host, target string }
	type drift struct {
		drifts      uint64
		first, last time.Time
	}
	type modified struct {
		at                            time.Time
		host, pkg, env, digest, chain string
		seq                           uint64
	}
	type rejected struct {
		stored                       time.Time
		stream                       string
		streamSeq                    uint64
		subject, host, reason, chain string
		seq                          uint64
	}
	wantTypes := map[hourKey]uint64{}
	wantVerdicts := map[hourKey]uint64{}
	wantDrift := map[target]drift{}
	var wantMod []modified
	var wantRej []rejected
	for _, r := range recs {
		m := r.Meta
		wantTypes[hourKey{hour(m.Stored), m.Type}]++
		typ := m.Type
		if s, ok := events.Lookup(typ); ok {
			typ = s.Current()
			if s.SupersededBy != "" {
				require.False(t, m.Rejected, "a %s link is read, not rejected: %s", m.Type, m.Reason)
				require.NotEmpty(t, m.Status, "a %s link has its status", m.Type)
			}
		}
		switch typ {
		case events.TypeVerdictPass, events.TypeVerdictDrift, events.TypeVerdictError:
			wantVerdicts[hourKey{hour(m.Time), m.Status}]++
		}
		if typ == events.TypeVerdictDrift {
			k := target{m.Host, m.Target}
			d := wantDrift[k]
			at := m.Time.UTC().Truncate(time.Second)
			if d.drifts == 0 || at.Before(d.first) {
				d.first = at
			}
			if d.drifts == 0 || at.After(d.last) {
				d.last = at
			}
			d.drifts++
			wantDrift[k] = d
		}
		if m.Type == events.TypeRunnableModified && !m.Rejected {
			var ev struct {
				Data events.RunnableModified `json:"data"`
			}
			require.NoError(t, json.Unmarshal(r.Event, &ev))
			wantMod = append(wantMod, modified{m.Time.UTC().Truncate(time.Second), m.Host, m.Subject,
				ev.Data.Environment, ev.Data.ChangeDigest, r.Chain, r.Seq})
		}
		if m.Rejected {
			wantRej = append(wantRej, rejected{m.Stored.UTC().Truncate(time.Second), m.Stream, m.StreamSeq, m.NATSSubject,
				m.Host, m.Reason, r.Chain, r.Seq})
		}
	}
	require.Greater(t, len(wantVerdicts), 10, "verdicts over several hours")
	for _, typ := range []string{events.TypeVerdictDriftV1, events.TypeVerdictPassV1, events.TypeVerdictDrift, events.TypeVerdictPass} {
		n := 0
		for k, c := range wantTypes {
			if k.name == typ {
				n += int(c)
			}
		}
		require.Positive(t, n, "the mix has %s links", typ)
	}
	require.NotEmpty(t, wantDrift)
	require.NotEmpty(t, wantMod)
	require.Len(t, wantRej, 8)

	assert.Equal(t, wantTypes, hourly(t, s, "SELECT hour, event_type, events FROM "+s.Table()+"_events_per_type"), "events per type")
	assert.Equal(t, wantVerdicts, hourly(t, s, "SELECT hour, status, verdicts FROM "+s.Table()+"_verdicts_over_time"), "verdicts over time")

	gotDrift := map[target]drift{}
	query(t, s, "SELECT host, target, drifts, first_drift, last_drift FROM "+s.Table()+"_drift_by_target", func(scan func(...any)) {
		var k target
		var d drift
		scan(&k.host, &k.target, &d.drifts, &d.first, &d.last)
		d.first, d.last = d.first.UTC(), d.last.UTC()
		gotDrift[k] = d
	})
	assert.Equal(t, wantDrift, gotDrift, "drift by target and host")

	var gotMod []modified
	query(t, s, "SELECT event_time, host, package, environment, change_digest, chain, seq FROM "+s.Table()+
		"_modified_runnables ORDER BY chain, seq", func(scan func(...any)) {
		var m modified
		scan(&m.at, &m.host, &m.pkg, &m.env, &m.digest, &m.chain, &m.seq)
		m.at = m.at.UTC()
		gotMod = append(gotMod, m)
	})
	assert.ElementsMatch(t, wantMod, gotMod, "modified runnables")

	var gotRej []rejected
	query(t, s, "SELECT stored, stream, stream_seq, nats_subject, host, reason, chain, seq FROM "+s.Table()+"_rejected",
		func(scan func(...any)) {
			var r rejected
			scan(&r.stored, &r.stream, &r.streamSeq, &r.subject, &r.host, &r.reason, &r.chain, &r.seq)
			r.stored = r.stored.UTC()
			gotRej = append(gotRej, r)
		})
	assert.ElementsMatch(t, wantRej, gotRej, "rejected events")
}

// TestMigrateConcurrentlyAndAfterAPartialRun: migrations run at once from
// several auditors, or again after a run that died before recording a
// version, end in the same schema without an error.
func TestMigrateConcurrentlyAndAfterAPartialRun(t *testing.T) {
	dsn := auditortest.ClickHouseDSN(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := chstore.Open(ctx, chstore.Options{DSN: dsn})
			if err != nil {
				errs[i] = err
				return
			}
			defer func() { _ = s.Close() }()
			_, errs[i] = s.Migrate(ctx)
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	s, err := chstore.Open(ctx, chstore.Options{DSN: dsn})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	v, err := s.Versions(ctx)
	require.NoError(t, err)
	assert.Len(t, v, len(chstore.Migrations))

	// A run that applied version 2's statements but died before recording
	// it: the next run applies it again, harmlessly.
	last := chstore.Migrations[len(chstore.Migrations)-1].Version
	auditortest.Exec(t, dsn, fmt.Sprintf("ALTER TABLE %s_migrations DELETE WHERE version = %d", s.Table(), last))
	done, err := s.Migrate(ctx)
	require.NoError(t, err)
	assert.Equal(t, []int{last}, done)
	done, err = s.Migrate(ctx)
	require.NoError(t, err)
	assert.Empty(t, done)
	for _, view := range chstore.Views {
		var n uint64
		require.NoError(t, s.Conn().QueryRow(ctx, "SELECT count() FROM "+s.Table()+"_"+view).Scan(&n), view)
	}
}
