// Package chstore is the audit chain's ClickHouse sink: one row per link
// in a MergeTree table ordered by (chain, seq), written in batches over
// the native protocol (clickhouse-go/v2, PrepareBatch with an explicit
// column list), plus views for dashboards.
//
// The schema is kept to what Debian's ClickHouse 18.16 and current
// releases both run: String, UInt*, DateTime('UTC') (milliseconds in a
// UInt64 beside it), MergeTree without a partition key (an insert of one
// batch is then one part, all or nothing), plain views, no JSON, Map,
// Bool, DateTime64 or LowCardinality. Migrate applies the versioned
// migrations that are missing; each statement is idempotent (IF NOT
// EXISTS), so concurrent or repeated runs are harmless.
//
// ClickHouse gives no immutability of its own (ALTER … UPDATE/DELETE
// exist): the chain, its key and the external checkpoints make a change
// detectable, and a writer role with INSERT and SELECT only keeps
// accidents out.
package chstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// DefaultTable is the default links table.
const DefaultTable = "audit_links"

// Options configure a Store.
type Options struct {
	// DSN is clickhouse://user:password@host:9000/database?dial_timeout=5s.
	DSN string
	// Table is the links table (DefaultTable if empty); the views and the
	// migrations table are named after it.
	Table string
	// Timeout bounds one query or insert (default 10s); scans for
	// verification are bounded by their context only.
	Timeout time.Duration
	// Logger receives the driver's log lines (nil discards).
	Logger *slog.Logger
	// PartStreams is the most data parts Source reads side by side
	// (default MaxPartStreams); a table with more parts, or any table when
	// it is negative, is read with ORDER BY.
	PartStreams int
}

// Store reads and writes links in ClickHouse.
type Store struct {
	dsn     string
	conn    driver.Conn
	db      string
	table   string // qualified
	name    string // unqualified
	timeout time.Duration
	streams int
	qid     string // prefix of the query ids of the inserts
}

// CheckDSN reports whether Open can use dsn: it parses and names a plain
// database identifier (or none: default). It connects nowhere, and its
// error does not repeat the DSN (which may hold a password).
func CheckDSN(dsn string) error {
	o, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return errors.New("clickhouse dsn does not parse (want clickhouse://user:password@host:9000/database)")
	}
	if db := o.Auth.Database; db != "" && !Identifier(db) {
		return fmt.Errorf("clickhouse database %q is not a plain identifier", db)
	}
	return nil
}

// Open connects and checks the server answers. It does not migrate.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if err := CheckDSN(opts.DSN); err != nil {
		return nil, err
	}
	o, err := clickhouse.ParseDSN(opts.DSN)
	if err != nil {
		return nil, fmt.Errorf("clickhouse dsn: %w", err)
	}
	if opts.Table == "" {
		opts.Table = DefaultTable
	}
	if !Identifier(opts.Table) {
		return nil, fmt.Errorf("clickhouse table %q is not a plain identifier", opts.Table)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	db := o.Auth.Database
	if db == "" {
		db = "default"
	}
	if !Identifier(db) {
		return nil, fmt.Errorf("clickhouse database %q is not a plain identifier", db)
	}
	if o.DialTimeout == 0 || o.DialTimeout > opts.Timeout {
		o.DialTimeout = min(5*time.Second, opts.Timeout)
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = 5 * time.Minute
	}
	// Source reads up to MaxPartStreams data parts at once, a connection
	// each.
	if opts.PartStreams == 0 {
		opts.PartStreams = MaxPartStreams
	}
	o.MaxOpenConns = max(o.MaxOpenConns, opts.PartStreams+2)
	// A connection keeps the buffer of its largest block otherwise: an
	// insert of a batch of large events would stay resident in every idle
	// connection.
	o.FreeBufOnConnRelease = true
	o.Logger = opts.Logger
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	conn, err := clickhouse.Open(o)
	if err != nil {
		return nil, fmt.Errorf("clickhouse: %w", err)
	}
	s := &Store{dsn: opts.DSN, conn: conn, db: db, name: opts.Table, table: db + "." + opts.Table, timeout: opts.Timeout,
		streams: opts.PartStreams, qid: "rtaudit:" + db + "." + opts.Table + ":"}
	pctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("clickhouse %s: %w", o.Addr, err)
	}
	return s, nil
}

// Name names the sink.
func (s *Store) Name() string { return "clickhouse" }

// Table is the qualified links table.
func (s *Store) Table() string { return s.table }

// Database is the database of the links table.
func (s *Store) Database() string { return s.db }

// DSN is the DSN the store was opened with.
func (s *Store) DSN() string { return s.dsn }

// Conn is the connection (for tests and tools).
func (s *Store) Conn() driver.Conn { return s.conn }

// Close closes the connection.
func (s *Store) Close() error { return s.conn.Close() }

// columns are the links table's columns, in insert order.
var columns = []string{
	"chain", "seq", "prev", "hash",
	"stream", "stream_seq", "nats_subject", "stored", "stored_ms",
	"event_id", "event_type", "event_source", "event_subject", "event_time", "event_time_ms",
	"host", "target", "status", "rejected", "reason",
	"event",
}

// Write inserts the records as one batch.
func (s *Store) Write(ctx context.Context, recs []link.Record) error {
	if len(recs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var id [8]byte
	_, _ = rand.Read(id[:])
	ctx = clickhouse.Context(ctx, clickhouse.WithQueryID(s.qid+hex.EncodeToString(id[:])))
	b, err := s.conn.PrepareBatch(ctx, "INSERT INTO "+s.table+" ("+strings.Join(columns, ", ")+")")
	if err != nil {
		return fmt.Errorf("clickhouse insert: %w", err)
	}
	for _, r := range recs {
		m := r.Meta
		rejected := uint8(0)
		if m.Rejected {
			rejected = 1
		}
		if err := b.Append(
			r.Chain, r.Seq, r.Prev, r.Hash,
			m.Stream, m.StreamSeq, m.NATSSubject, dateTime(m.Stored), unixMilli(m.Stored),
			m.ID, m.Type, m.Source, m.Subject, dateTime(m.Time), unixMilli(m.Time),
			m.Host, m.Target, m.Status, rejected, m.Reason,
			string(r.Event),
		); err != nil {
			_ = b.Abort()
			return fmt.Errorf("clickhouse insert: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("clickhouse insert: %w", err)
	}
	return nil
}

// Settle waits until the inserts into the table that were running when it
// was called have ended. An insert the client gave up on (a timeout, a
// crash) may still be committed by the server afterwards; heads read
// before it ends would be behind, and the links written again. The
// auditor settles the sink before it reads heads to resume or to retry.
func (s *Store) Settle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	start := time.Now()
	for {
		// Running at least as long as since the call: started before it.
		elapsed := max(time.Since(start).Seconds()-0.05, 0)
		var n uint64
		err := s.conn.QueryRow(ctx, fmt.Sprintf("SELECT count() FROM system.processes WHERE substring(query_id, 1, %d) = %s AND elapsed >= %f",
			len(s.qid), Quote(s.qid), elapsed)).Scan(&n)
		if err != nil {
			return fmt.Errorf("clickhouse inserts in flight: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("clickhouse inserts in flight: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func dateTime(t time.Time) time.Time {
	if t.Before(time.Unix(0, 0)) {
		return time.Unix(0, 0).UTC()
	}
	return t.UTC()
}

func unixMilli(t time.Time) uint64 {
	if t.Before(time.Unix(0, 0)) {
		return 0
	}
	return uint64(t.UnixMilli())
}

// Heads returns the last link of every chain.
func (s *Store) Heads(ctx context.Context) (map[string]link.Head, error) {
	return s.heads(ctx, "")
}

// HeadsOf returns the last link of the given chains (those with links).
func (s *Store) HeadsOf(ctx context.Context, chains []string) (map[string]link.Head, error) {
	if len(chains) == 0 {
		return map[string]link.Head{}, nil
	}
	q := make([]string, len(chains))
	for i, c := range chains {
		q[i] = Quote(c)
	}
	return s.heads(ctx, " WHERE chain IN ("+strings.Join(q, ", ")+")")
}

func (s *Store) heads(ctx context.Context, where string) (map[string]link.Head, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, "SELECT chain, max(seq), argMax(hash, seq), argMax(stream, seq), argMax(stream_seq, seq) FROM "+
		s.table+where+" GROUP BY chain")
	if err != nil {
		return nil, fmt.Errorf("clickhouse heads: %w", err)
	}
	defer func() { _ = rows.Close() }()
	out := map[string]link.Head{}
	for rows.Next() {
		var c string
		var h link.Head
		if err := rows.Scan(&c, &h.Seq, &h.Hash, &h.Stream, &h.StreamSeq); err != nil {
			return nil, fmt.Errorf("clickhouse heads: %w", err)
		}
		out[c] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse heads: %w", err)
	}
	return out, nil
}

// Links calls fn with every link of a chain after seq after, in order.
func (s *Store) Links(ctx context.Context, chainName string, after uint64, fn func(link.Record) error) error {
	rows, err := s.conn.Query(ctx, "SELECT seq, prev, hash, event FROM "+s.table+" WHERE chain = "+Quote(chainName)+
		" AND seq > ? ORDER BY seq", after)
	if err != nil {
		return fmt.Errorf("clickhouse links: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var seq uint64
		var prev, h, event string
		if err := rows.Scan(&seq, &prev, &h, &event); err != nil {
			return fmt.Errorf("clickhouse links: %w", err)
		}
		r, err := link.FromRow(chainName, seq, prev, h, []byte(event))
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("clickhouse links: %w", err)
	}
	return nil
}

// Quote renders s as a ClickHouse string literal.
func Quote(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	return "'" + r.Replace(s) + "'"
}

// Identifier reports whether s may name a ClickHouse database or table
// here: 1 to 64 ASCII letters, digits and underscores, not starting with a
// digit (so it needs no quoting).
func Identifier(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i, r := range s {
		letter := r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		digit := i > 0 && '0' <= r && r <= '9'
		if !letter && !digit {
			return false
		}
	}
	return true
}

// Latest returns the n links stored last (by the time their stream stored
// the event), oldest first.
func (s *Store) Latest(ctx context.Context, n int) ([]link.Record, error) {
	rows, err := s.conn.Query(ctx, "SELECT chain, seq, prev, hash, event FROM "+s.table+
		" ORDER BY stored_ms DESC, stream DESC, stream_seq DESC LIMIT ?", n)
	if err != nil {
		return nil, fmt.Errorf("clickhouse latest: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []link.Record
	for rows.Next() {
		var c, prev, h, event string
		var seq uint64
		if err := rows.Scan(&c, &seq, &prev, &h, &event); err != nil {
			return nil, fmt.Errorf("clickhouse latest: %w", err)
		}
		r, err := link.FromRow(c, seq, prev, h, []byte(event))
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse latest: %w", err)
	}
	slices.Reverse(out)
	return out, nil
}

// EventIDs calls fn with the chain and event id of every link that
// records a message (rejected = 0), in no order.
func (s *Store) EventIDs(ctx context.Context, fn func(chain, id string) error) error {
	rows, err := s.conn.Query(ctx, "SELECT chain, event_id FROM "+s.table+" WHERE rejected = 0")
	if err != nil {
		return fmt.Errorf("clickhouse event ids: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var c, id string
		if err := rows.Scan(&c, &id); err != nil {
			return fmt.Errorf("clickhouse event ids: %w", err)
		}
		if err := fn(c, id); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("clickhouse event ids: %w", err)
	}
	return nil
}

// Linked returns those of ids that a link of chain recording a message
// carries (the table's key starts with chain: only its rows are read).
func (s *Store) Linked(ctx context.Context, chainName string, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = Quote(id)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, "SELECT DISTINCT event_id FROM "+s.table+" WHERE chain = "+Quote(chainName)+
		" AND rejected = 0 AND event_id IN ("+strings.Join(q, ", ")+")")
	if err != nil {
		return nil, fmt.Errorf("clickhouse linked ids: %w", err)
	}
	defer func() { _ = rows.Close() }()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("clickhouse linked ids: %w", err)
		}
		out[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse linked ids: %w", err)
	}
	return out, nil
}
