package auditor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/events/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
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

func benchStore(b *testing.B) *chstore.Store {
	b.Helper()
	ctx := context.Background()
	s, err := chstore.Open(ctx, chstore.Options{DSN: auditortest.ClickHouseDSN(b), Timeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	return s
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
func BenchmarkClickHouseAppend(b *testing.B) {
	const n = 16384
	msgs := benchMessages(b, n)
	h := link.NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	seal := auditor.NewWriter(h, nil, nil, nil)
	var pre auditor.Batch
	for _, m := range msgs {
		seal.Seal(&pre, m, "/auditor/bench")
	}
	for _, batch := range []int{topology.MaxAckPending, auditor.NewDefaultConfig().Batch, 4096} {
		b.Run(fmt.Sprintf("reference-raw-insert/batch=%d", batch), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s := benchStore(b) // a fresh table: no parts left to merge from before
				b.StartTimer()
				rawInsert(b, s, pre.Recs, batch)
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
		b.Run(fmt.Sprintf("auditor/batch=%d", batch), func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s := benchStore(b)
				b.StartTimer()
				// As a stream loop does: the next batch is sealed while
				// the previous one is written.
				w := auditor.NewWriter(h, []auditor.SinkSpec{{Sink: s, Required: true}}, nil, nil)
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
				for i := 0; i < n; i += batch {
					bt := &auditor.Batch{Base: tips}
					w.SealAll(bt, msgs[i:min(i+batch, n)], "/auditor/bench")
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
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
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
	h := link.NewHasher(nil)
	seal := auditor.NewWriter(h, nil, nil, nil)
	var pre auditor.Batch
	for _, m := range msgs {
		seal.Seal(&pre, m, "/auditor/bench")
	}
	b.Run("reference-raw-insert", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			s := benchStore(b)
			b.StartTimer()
			rawInsert(b, s, pre.Recs, auditor.NewDefaultConfig().Batch)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	round := 0
	b.Run("auditor", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			round++
			dsn := auditortest.ClickHouseDSN(b)
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
			for a.Stats().Appended.Load() < n {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			if err := a.Shutdown(ctx); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
	})
}
