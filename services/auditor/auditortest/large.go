package auditortest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// LargeMsg is the i-th evidence.collected event of host whose message
// (headers and data, as NATS counts it) is within a few hundred bytes of
// size, at most events.MaxEventSize: the largest events a collector can
// send. Its snapshot carries one record with a string field of filler.
func LargeMsg(tb testing.TB, host string, i, size int) *nats.Msg {
	tb.Helper()
	if size > events.MaxEventSize {
		tb.Fatalf("large fixture: %d bytes is over events.MaxEventSize", size)
	}
	build := func(filler int) *nats.Msg {
		s := &snapshot.Snapshot{
			SchemaVersion: snapshot.SchemaVersion,
			CapturedAt:    snapshot.FormatTime(Time.Add(time.Duration(i) * time.Second)),
			Target:        snapshot.Target{Kind: "systemd.unit", Identifier: "big.service"},
			Evidence: []snapshot.Record{{
				Plane: snapshot.Live, Kind: "systemd.unit",
				Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
				Data: snapshot.Data{"environment": snapshot.String(fmt.Sprintf("%08d", i) + strings.Repeat("x", filler)),
					"main_pid": snapshot.Int(int64(3000 + i))},
			}},
		}
		p, err := events.NewEvidenceCollected(host, s, time.Minute)
		if err != nil {
			tb.Fatalf("large fixture: %v", err)
		}
		m, _, err := binding.NewMsg(events.Source("collector", host), p,
			binding.WithID(fmt.Sprintf("01940000-0000-7000-8000-%012d", i)), binding.WithTime(Time.Add(time.Duration(i)*time.Millisecond)))
		if err != nil {
			tb.Fatalf("large fixture %d: %v", i, err)
		}
		return m
	}
	want := min(size, events.MaxDataSize) - 512
	m := build(want)
	m = build(max(want-(len(m.Data)-want), 0))
	if msgSize(m) > size {
		tb.Fatalf("large fixture: %d bytes, want at most %d", msgSize(m), size)
	}
	return m
}

// msgSize is the size of m as NATS counts it against max_payload: the
// header block and the data.
func msgSize(m *nats.Msg) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range m.Header {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n + len(m.Data)
}

// HeadersOn is a message on m's subject with a copy of m's headers (its
// signature included) and data: a real event's headers on other data, as
// anyone who may publish evidence can send.
func HeadersOn(m *nats.Msg, data []byte) *nats.Msg {
	out := nats.NewMsg(m.Subject)
	for k, vs := range m.Header {
		out.Header[k] = append([]string(nil), vs...)
	}
	out.Data = data
	return out
}
