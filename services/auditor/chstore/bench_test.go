package chstore_test

import (
	"context"
	"net"
	"os/exec"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// BenchmarkVerifyClickHouse reports the rows/s `audit verify --clickhouse`
// checks (the data parts read side by side and merged, hashing on every
// core; and the table read with ORDER BY), against a bare ordered scan of
// the same columns through clickhouse-go (the reference), a bare unordered
// scan, and clickhouse-client reading them (the server's ceiling).
func BenchmarkVerifyClickHouse(b *testing.B) {
	const n = 50000
	dsn := auditortest.ClickHouseDSN(b)
	ctx := context.Background()
	s, err := openStore(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	h := chain.NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	recs := auditortest.Records(b, h, 2000, []string{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"})
	// 25 rounds of the same 2000 events, re-sealed so the chains continue.
	heads := map[string]link.Head{}
	for round := 0; round < n/len(recs); round++ {
		batch := make([]link.Record, 0, len(recs))
		for _, r := range recs {
			nr, err := link.Seal(h, r.Chain, heads[r.Chain], auditortest.Tree(b, r))
			if err != nil {
				b.Fatal(err)
			}
			heads[r.Chain] = nr.Head()
			batch = append(batch, nr)
		}
		if err := s.Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("reference-scan", func(b *testing.B) {
		for b.Loop() {
			rows, err := s.Conn().Query(ctx, "SELECT chain, seq, prev, hash, event FROM "+s.Table()+" ORDER BY chain, seq")
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for rows.Next() {
				var c, p, hh, e string
				var seq uint64
				if err := rows.Scan(&c, &seq, &p, &hh, &e); err != nil {
					b.Fatal(err)
				}
				got++
			}
			_ = rows.Close()
			if got != n {
				b.Fatalf("%d rows", got)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("scan-unordered", func(b *testing.B) {
		for b.Loop() {
			rows, err := s.Conn().Query(ctx, "SELECT chain, seq, prev, hash, event FROM "+s.Table())
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
				var c, p, hh, e string
				var seq uint64
				if err := rows.Scan(&c, &seq, &p, &hh, &e); err != nil {
					b.Fatal(err)
				}
			}
			_ = rows.Close()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("scan-no-event", func(b *testing.B) {
		for b.Loop() {
			rows, err := s.Conn().Query(ctx, "SELECT chain, seq, prev, hash, length(event) FROM "+s.Table()+" ORDER BY chain, seq")
			if err != nil {
				b.Fatal(err)
			}
			for rows.Next() {
				var c, p, hh string
				var seq, l uint64
				if err := rows.Scan(&c, &seq, &p, &hh, &l); err != nil {
					b.Fatal(err)
				}
			}
			_ = rows.Close()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	// The ceiling: ClickHouse's own native client reading the same
	// columns, unordered, and discarding them (includes starting the
	// process, a few ms).
	if bin, err := exec.LookPath("clickhouse-client"); err == nil {
		o, err := clickhouse.ParseDSN(s.DSN())
		if err != nil {
			b.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(o.Addr[0])
		b.Run("clickhouse-client-unordered", func(b *testing.B) {
			for b.Loop() {
				out, err := exec.Command(bin, "--host", host, "--port", port, "--query",
					"SELECT chain, seq, prev, hash, event FROM "+s.Table()+" FORMAT Null").CombinedOutput()
				if err != nil {
					b.Fatalf("%v: %s", err, out)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	ordered, err := chstore.Open(ctx, chstore.Options{DSN: s.DSN(), PartStreams: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = ordered.Close() }()
	for _, v := range []struct {
		name  string
		store *chstore.Store
	}{{"verify-order-by", ordered}, {"verify", s}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				rep, err := chain.Run(ctx, h, nil, v.store.Source(ctx))
				if err != nil || rep.Broken != nil || rep.Links != n {
					b.Fatal(err, rep.Broken)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
