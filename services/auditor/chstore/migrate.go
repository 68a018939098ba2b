package chstore

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Migration is one versioned schema change; every statement is
// idempotent. {T} is the qualified links table, {t} its name, {db} the
// database.
type Migration struct {
	Version int
	Name    string
	Stmts   []string
}

// The event types the views select, as SQL literals. Migration 2's are
// the types of its day; migration 3's add verdict.*.v2, whose report
// changed shape (the views read no report: only the type and the columns
// every link has).
const (
	typeDrift    = "'dev.runtimetruth.verdict.drift.v1'"
	typeVerdicts = "('dev.runtimetruth.verdict.pass.v1', 'dev.runtimetruth.verdict.drift.v1', 'dev.runtimetruth.verdict.error.v1')"
	typeModified = "'dev.runtimetruth.runnable.modified.v1'"

	// TypeDrifts and TypeVerdicts are the SQL lists of every drift and every
	// verdict type, of any version, as the views and dashboards select them.
	TypeDrifts   = "('dev.runtimetruth.verdict.drift.v1', 'dev.runtimetruth.verdict.drift.v2')"
	TypeVerdicts = "('dev.runtimetruth.verdict.pass.v1', 'dev.runtimetruth.verdict.drift.v1', 'dev.runtimetruth.verdict.error.v1', " +
		"'dev.runtimetruth.verdict.pass.v2', 'dev.runtimetruth.verdict.drift.v2', 'dev.runtimetruth.verdict.error.v2')"
)

// Migrations are the schema, in order. Never edit one that shipped: add
// the next.
var Migrations = []Migration{
	{1, "links table", []string{`CREATE TABLE IF NOT EXISTS {T} (
		chain String,
		seq UInt64,
		prev String,
		hash String,
		stream String,
		stream_seq UInt64,
		nats_subject String,
		stored DateTime('UTC'),
		stored_ms UInt64,
		event_id String,
		event_type String,
		event_source String,
		event_subject String,
		event_time DateTime('UTC'),
		event_time_ms UInt64,
		host String,
		target String,
		status String,
		rejected UInt8,
		reason String,
		event String
	) ENGINE = MergeTree ORDER BY (chain, seq)`}},
	{2, "dashboard views", []string{
		`CREATE VIEW IF NOT EXISTS {db}.{t}_events_per_type AS
		SELECT toStartOfHour(stored) AS hour, event_type, count() AS events
		FROM {T} GROUP BY hour, event_type`,
		`CREATE VIEW IF NOT EXISTS {db}.{t}_verdicts_over_time AS
		SELECT toStartOfHour(event_time) AS hour, status, count() AS verdicts
		FROM {T} WHERE event_type IN ` + typeVerdicts + ` GROUP BY hour, status`,
		`CREATE VIEW IF NOT EXISTS {db}.{t}_drift_by_target AS
		SELECT host, target, count() AS drifts, min(event_time) AS first_drift, max(event_time) AS last_drift
		FROM {T} WHERE event_type = ` + typeDrift + ` GROUP BY host, target`,
		`CREATE VIEW IF NOT EXISTS {db}.{t}_modified_runnables AS
		SELECT event_time, host, event_subject AS package,
			visitParamExtractString(event, 'environment') AS environment,
			visitParamExtractString(event, 'change_digest') AS change_digest, chain, seq
		FROM {T} WHERE event_type = ` + typeModified,
		`CREATE VIEW IF NOT EXISTS {db}.{t}_rejected AS
		SELECT stored, stream, stream_seq, nats_subject, host, reason, chain, seq
		FROM {T} WHERE rejected = 1`,
	}},
	{3, "verdict views read verdict.*.v2 too", []string{
		`DROP TABLE IF EXISTS {db}.{t}_verdicts_over_time`,
		`CREATE VIEW IF NOT EXISTS {db}.{t}_verdicts_over_time AS
		SELECT toStartOfHour(event_time) AS hour, status, count() AS verdicts
		FROM {T} WHERE event_type IN ` + TypeVerdicts + ` GROUP BY hour, status`,
		`DROP TABLE IF EXISTS {db}.{t}_drift_by_target`,
		`CREATE VIEW IF NOT EXISTS {db}.{t}_drift_by_target AS
		SELECT host, target, count() AS drifts, min(event_time) AS first_drift, max(event_time) AS last_drift
		FROM {T} WHERE event_type IN ` + TypeDrifts + ` GROUP BY host, target`,
	}},
}

// Views are the dashboard views' names (without the table prefix).
var Views = []string{"events_per_type", "verdicts_over_time", "drift_by_target", "modified_runnables", "rejected"}

func (s *Store) expand(stmt string) string {
	return strings.NewReplacer("{T}", s.table, "{t}", s.name, "{db}", s.db).Replace(stmt)
}

// Migrate applies the migrations the database lacks and records them in
// <table>_migrations. It returns the versions it applied.
func (s *Store) Migrate(ctx context.Context) ([]int, error) {
	mt := s.db + "." + s.name + "_migrations"
	if err := s.exec(ctx, "CREATE TABLE IF NOT EXISTS "+mt+
		" (version UInt32, name String, applied DateTime('UTC')) ENGINE = MergeTree ORDER BY version"); err != nil {
		return nil, err
	}
	have, err := s.applied(ctx, mt)
	if err != nil {
		return nil, err
	}
	var done []int
	for _, m := range Migrations {
		if have[m.Version] {
			continue
		}
		for _, stmt := range m.Stmts {
			if err := s.exec(ctx, s.expand(stmt)); err != nil {
				return done, fmt.Errorf("migration %d (%s): %w", m.Version, m.Name, err)
			}
		}
		if err := s.record(ctx, mt, m); err != nil {
			return done, err
		}
		done = append(done, m.Version)
	}
	return done, nil
}

// Versions returns the applied migration versions.
func (s *Store) Versions(ctx context.Context) (map[int]bool, error) {
	return s.applied(ctx, s.db+"."+s.name+"_migrations")
}

func (s *Store) applied(ctx context.Context, mt string) (map[int]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT version FROM "+mt)
	if err != nil {
		return nil, fmt.Errorf("clickhouse migrations: %w", err)
	}
	defer func() { _ = rows.Close() }()
	out := map[int]bool{}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("clickhouse migrations: %w", err)
		}
		out[int(v)] = true
	}
	return out, rows.Err()
}

func (s *Store) record(ctx context.Context, mt string, m Migration) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+mt+" (version, name, applied)")
	if err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	if err := b.Append(uint32(m.Version), m.Name, time.Now().UTC()); err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	return nil
}

func (s *Store) exec(ctx context.Context, stmt string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.conn.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	return nil
}
