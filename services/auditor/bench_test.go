package auditor_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/syslog"
)

var benchHosts = []string{"h00", "h01", "h02", "h03", "h04", "h05", "h06", "h07"}

// benchMessages are n fixture messages of one stream (the verdict and
// evidence mix), as the auditor reads them.
func benchMessages(b *testing.B, n int) []*link.Message {
	b.Helper()
	out := make([]*link.Message, n)
	for i := range n {
		m := auditortest.Msg(b, auditortest.Payload(b, benchHosts, i), i)
		out[i] = auditortest.Message(b, "VERDICTS", uint64(i+1), m)
	}
	return out
}

// benchStore opens a migrated store on a fresh database and returns it
// with the function that drops the database. Each iteration drops its own
// at once (timer stopped): ClickHouse would otherwise go on merging its
// parts in the background while the next iteration is measured.
func benchStore(b *testing.B) (*chstore.Store, func()) {
	b.Helper()
	ctx := context.Background()
	dsn, drop := auditortest.ClickHouseDatabase(b)
	s, err := chstore.Open(ctx, chstore.Options{DSN: dsn, Timeout: time.Minute})
	if err != nil {
		drop()
		b.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		_ = s.Close()
		drop()
		b.Fatal(err)
	}
	return s, func() { _ = s.Close(); drop() }
}

// measured runs fn on a fresh store with the benchmark timer running only
// around fn, and returns fn's wall time.
func measured(b *testing.B, fn func(*chstore.Store)) time.Duration {
	b.StopTimer()
	s, drop := benchStore(b)
	runtime.GC() // the last run's garbage is not this one's
	b.StartTimer()
	t := time.Now()
	fn(s)
	d := time.Since(t)
	b.StopTimer()
	drop()
	b.StartTimer()
	return d
}

// rawInsert inserts the records' rows with a plain batch insert, the
// reference: the same rows and columns, nothing computed.
func rawInsert(b *testing.B, s *chstore.Store, recs []link.Record, batch int) {
	b.Helper()
	ctx := context.Background()
	cols := "chain, seq, prev, hash, stream, stream_seq, nats_subject, stored, stored_ms, event_id, event_type, event_source, " +
		"event_subject, event_time, event_time_ms, host, target, status, rejected, reason, event"
	for i := 0; i < len(recs); i += batch {
		bt, err := s.Conn().PrepareBatch(ctx, "INSERT INTO "+s.Table()+" ("+cols+")")
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs[i:min(i+batch, len(recs))] {
			m := r.Meta
			if err := bt.Append(r.Chain, r.Seq, r.Prev, r.Hash, m.Stream, m.StreamSeq, m.NATSSubject, m.Stored, uint64(m.Stored.UnixMilli()),
				m.ID, m.Type, m.Source, m.Subject, m.Time, uint64(m.Time.UnixMilli()), m.Host, m.Target, m.Status, uint8(0), m.Reason,
				string(r.Event)); err != nil {
				b.Fatal(err)
			}
		}
		if err := bt.Send(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkClickHouseAppend compares appending to the chain in ClickHouse
// through the auditor's writer — decode and check each event, canonical
// form, hash, batched insert, heads — with a raw batch insert of the same
// rows, in batches of the old consumer window (256), of the auditor's
// default batch (half the auditor consumers' MaxAckPending) and of 4096.
// "interleaved" alternates the two at the default batch, round by round,
// and reports the medians and their ratio (goal: auditor ≥ 0.6 × raw),
// which holds up better on a busy machine.
func BenchmarkClickHouseAppend(b *testing.B) {
	const n = 16384
	msgs := benchMessages(b, n)
	h := chain.NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	seal := auditor.NewWriter(h, nil, nil, telemetry.Providers{})
	var pre auditor.Batch
	if err := seal.SealAll(context.Background(), &pre, msgs, "/auditor/bench"); err != nil {
		b.Fatal(err)
	}
	raw := func(batch int) func(*chstore.Store) {
		return func(s *chstore.Store) { rawInsert(b, s, pre.Recs, batch) }
	}
	appendAll := func(batch int) func(*chstore.Store) {
		return func(s *chstore.Store) { auditorAppend(b, h, s, msgs, batch) }
	}
	for _, batch := range []int{topology.MaxAckPending, auditor.NewDefaultConfig().Batch, 4096} {
		b.Run(fmt.Sprintf("reference-raw-insert/batch=%d", batch), func(b *testing.B) {
			for b.Loop() {
				measured(b, raw(batch))
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
		b.Run(fmt.Sprintf("auditor/batch=%d", batch), func(b *testing.B) {
			for b.Loop() {
				measured(b, appendAll(batch))
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	batch := auditor.NewDefaultConfig().Batch
	// With the syslog sink sending OCSF records, required as ClickHouse
	// is: what formatting adds to an append. The receiver discards what it
	// reads (a SIEM runs elsewhere; the real rsyslog, which parses every
	// record on these same two cores, is the second variant).
	discard := discardTCP(b)
	rs := auditortest.RsyslogEnv(b)
	for _, r := range []struct{ name, addr string }{{"auditor-syslog-ocsf", discard}, {"auditor-syslog-ocsf-rsyslog", rs.SIEMTCP}} {
		b.Run(fmt.Sprintf("%s/batch=%d", r.name, batch), func(b *testing.B) {
			for b.Loop() {
				measured(b, func(st *chstore.Store) {
					sl, err := syslog.New(syslog.Options{Network: "tcp", Address: r.addr, Format: "ocsf", Hostname: "bench"})
					if err != nil {
						b.Fatal(err)
					}
					defer func() { _ = sl.Close() }()
					auditorAppend(b, h, st, msgs, batch, auditor.SinkSpec{Sink: sl, Required: true})
				})
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
	b.Run(fmt.Sprintf("interleaved/batch=%d", batch), func(b *testing.B) {
		var rawRounds, audRounds []time.Duration
		for b.Loop() {
			rawRounds = append(rawRounds, measured(b, raw(batch)))
			audRounds = append(audRounds, measured(b, appendAll(batch)))
		}
		r, a := median(rawRounds), median(audRounds)
		b.ReportMetric(float64(n)/r.Seconds(), "raw-rows/s")
		b.ReportMetric(float64(n)/a.Seconds(), "auditor-rows/s")
		b.ReportMetric(r.Seconds()/a.Seconds(), "auditor/raw")
		fmt.Fprintf(os.Stderr, "clickhouse append, batch %d, %d rounds (medians): auditor %.0f rows/s = %.2fx raw insert (%.0f rows/s)\n",
			batch, len(rawRounds), float64(n)/a.Seconds(), r.Seconds()/a.Seconds(), float64(n)/r.Seconds())
	})
}

// auditorAppend appends msgs to a chain in s as a stream loop does: the
// next batch is sealed while the previous one is written.
func auditorAppend(b *testing.B, h chain.Hasher, s *chstore.Store, msgs []*link.Message, batch int, more ...auditor.SinkSpec) {
	w := auditor.NewWriter(h, append([]auditor.SinkSpec{{Sink: s, Required: true}}, more...), nil, telemetry.Providers{})
	// As at the auditor's start: the heads and the event ids from the sink.
	if err := w.Recover(context.Background()); err != nil {
		b.Fatal(err)
	}
	work := make(chan *auditor.Batch, 1)
	errc := make(chan error, 1)
	go func() {
		var err error
		for bt := range work {
			if err == nil {
				err = w.Commit(context.Background(), bt)
			}
		}
		errc <- err
	}()
	tips := map[string]link.Head{}
	for i := 0; i < len(msgs); i += batch {
		bt := &auditor.Batch{Base: tips}
		if err := w.SealAll(context.Background(), bt, msgs[i:min(i+batch, len(msgs))], "/auditor/bench"); err != nil {
			b.Fatal(err)
		}
		for c, hd := range bt.Tips() {
			tips[c] = hd
		}
		work <- bt
	}
	close(work)
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkAuditorThroughput runs the whole auditor — JetStream pull,
// append to ClickHouse, acknowledgement — over a backlog of events on one
// stream, and reports events/s against a raw batch insert of the same rows
// in batches of the auditor's default size (half the auditor consumers'
// MaxAckPending).
func BenchmarkAuditorThroughput(b *testing.B) {
	const n = 20000
	_, url := natstest.RunJetStream(b)
	_, js := natstest.Connect(b, url)
	ctx := context.Background()
	if err := topology.Ensure(ctx, js, 1); err != nil {
		b.Fatal(err)
	}
	msgs := benchMessages(b, n)
	h := chain.NewHasher(nil)
	seal := auditor.NewWriter(h, nil, nil, telemetry.Providers{})
	var pre auditor.Batch
	if err := seal.SealAll(context.Background(), &pre, msgs, "/auditor/bench"); err != nil {
		b.Fatal(err)
	}
	b.Run("reference-raw-insert", func(b *testing.B) {
		for b.Loop() {
			measured(b, func(s *chstore.Store) { rawInsert(b, s, pre.Recs, auditor.NewDefaultConfig().Batch) })
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	round := 0
	b.Run("auditor", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			round++
			dsn, drop := auditortest.ClickHouseDatabase(b)
			for i := range n {
				if _, err := js.PublishMsgAsync(auditortest.Msg(b, auditortest.Payload(b, benchHosts, i), round*n+i)); err != nil {
					b.Fatal(err)
				}
			}
			<-js.PublishAsyncComplete()
			cfg := auditor.NewDefaultConfig()
			cfg.NATS.URL = url
			cfg.JSONL.Path = ""
			cfg.ClickHouse.DSN = dsn
			cfg.Checkpoint.Interval = 0
			cfg.IdleWait = 50 * time.Millisecond
			a, err := auditor.New(cfg, auditor.Settings{})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if err := a.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if err := a.Sync(ctx); err != nil { // every message published is in the chains
				b.Fatal(err)
			}
			b.StopTimer()
			if err := a.Shutdown(ctx); err != nil {
				b.Fatal(err)
			}
			drop()
			runtime.GC()
			b.StartTimer()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// discardTCP is a TCP receiver on loopback that reads and drops
// everything; it stops with the benchmark.
func discardTCP(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				_, _ = io.Copy(io.Discard, c)
				_ = c.Close()
			})
		}
	})
	b.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}
