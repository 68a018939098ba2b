package auditor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// TestOneHostKeepsToItsAllowance: one host floods EVIDENCE with 1,000
// distinct 16 KiB events (16 MiB) while another sends its few. The
// flooding host's chain takes its burst whole, then a digest-and-size
// record per message while the bucket lends a quarter more, then one
// notice, and its other messages are acknowledged without a link
// (counted). The other host's events are all linked whole. Without the
// allowance the log grows by the 16 MiB sent.
func TestOneHostKeepsToItsAllowance(t *testing.T) {
	e := newEnv(t, 30*time.Second)
	cfg := e.config()
	// The least burst, just over 1 MiB, refilled at 256 KiB a minute in
	// the stream's time: slower than the flood is read, however busy the
	// machine.
	cfg.Allowance = auditor.AllowanceConfig{BytesPerMinute: 256 << 10, Burst: auditor.MinAllowanceBurst}
	a := start(t, cfg)
	const flooder, honest, flood = "flood-01.example.com", "web-01.example.com", 1000
	var acks []jetstream.PubAckFuture
	publish := func(host string, i, size int) {
		t.Helper()
		m := auditortest.LargeMsg(t, host, i, size)
		// Spread over subjects: EVIDENCE keeps at most 128 waiting per
		// subject.
		m.Subject = events.EvidenceSubject(host, fmt.Sprintf("kind%d", i%20))
		f, err := e.js.PublishMsgAsync(m)
		require.NoError(t, err)
		acks = append(acks, f)
	}
	settled := func() {
		t.Helper()
		for _, f := range acks {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				t.Fatalf("publish: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("a publish was not acknowledged within a minute")
			}
		}
		acks = acks[:0]
	}
	// Sent at once (asynchronously), so that the stream stores the flood
	// within a second or two of its time.
	for i := range flood {
		publish(flooder, i, 16<<10)
		if i%100 == 0 {
			publish(honest, flood+i, 2<<10) // ids of its own
		}
	}
	settled()
	e.waitConsumed(t, 2*time.Minute, testConsumer)
	left := counted(t, a, auditor.MetricUnlinked)
	require.Positive(t, left, "the flooding host's messages past its allowance are left out")

	stop(t, a)

	recs := readLog(t, cfg.JSONL.Path)
	var whole, compact, started, honestLinks int
	var flooderBytes int
	for _, r := range recs {
		switch r.Chain {
		case "EVIDENCE/" + honest:
			honestLinks++
			assert.False(t, r.Meta.Rejected, "the honest host's events are linked whole")
			continue
		case "EVIDENCE/" + flooder:
		default:
			t.Fatalf("a link of chain %q", r.Chain)
		}
		flooderBytes += len(r.Line)
		switch {
		case !r.Meta.Rejected:
			whole++
		case r.Meta.Reason == string(link.ReasonOverAllowance) && strings.Contains(string(r.Event), `"data_size":`) &&
			!strings.Contains(string(r.Event), "not recorded from stream sequence"):
			compact++
			assert.Less(t, len(r.Line), 1536, "a record by digest and size")
			assert.Contains(t, string(r.Event), `"id":"`, "the message's id, in the record's envelope")
			assert.NotContains(t, string(r.Event), `"type":"`+events.TypeEvidenceCollected, "no header but the id")
		case r.Meta.Reason == string(link.ReasonOverAllowance):
			started++
		default:
			t.Errorf("an unexpected record: %s", r.Event)
		}
	}
	assert.Equal(t, flood/100, honestLinks)
	assert.Equal(t, 1, started, "one notice where the run starts")
	assert.Positive(t, whole)
	assert.Positive(t, compact)
	assert.Equal(t, flood, whole+compact+int(left), "every message linked whole, by digest, or counted")
	// The burst, a quarter more, and what the bucket earned while the
	// flood was read: well under the 16 MiB sent.
	assert.Less(t, flooderBytes, 2<<20, "the flooding host's links")
	t.Logf("flooding host: %d whole, %d by digest, %d left out; %d bytes of links for %d sent",
		whole, compact, left, flooderBytes, flood*(16<<10))
}

// TestAllowanceOverStreamTime runs the writer over one host's flood, in
// the stream's time: 1,000 events of 16 KiB stored 10 ms apart, another
// host's event among every 40, then the flooding host's next event two
// minutes later. Its links: the burst whole, then records by digest and
// size for a quarter of the burst more, one notice, nothing; two minutes
// on (256 KiB a minute repays the debt) a notice naming the messages and
// bytes left out, then its event whole. The other host's are all whole.
func TestAllowanceOverStreamTime(t *testing.T) {
	w := auditor.NewWriter(chain.NewHasher(nil), nil, nil, telemetry.Providers{})
	w.Allow(auditor.AllowanceConfig{BytesPerMinute: 256 << 10, Burst: auditor.MinAllowanceBurst})
	const flooder, honest, flood = "flood-01.example.com", "web-01.example.com", 1000
	at := auditortest.Time
	var msgs []*link.Message
	add := func(host string, i, size int) {
		m := auditortest.LargeMsg(t, host, i, size)
		msgs = append(msgs, &link.Message{Stream: "EVIDENCE", Seq: uint64(len(msgs) + 1), Subject: m.Subject,
			Header: m.Header, Data: m.Data, Stored: at, Deliveries: 1, Consumer: "auditor"})
	}
	sent := 0
	for i := range flood {
		add(flooder, i, 16<<10)
		sent += len(msgs[len(msgs)-1].Data)
		if i%40 == 0 {
			add(honest, flood+i, 2<<10)
		}
		at = at.Add(10 * time.Millisecond)
	}
	at = at.Add(2 * time.Minute)
	add(flooder, flood, 2<<10)
	var b auditor.Batch
	require.NoError(t, w.SealAll(context.Background(), &b, msgs, "/auditor/test"))

	var kinds []string // the flooding host's links, in order: whole, digest, start, end
	leftOut := ""
	for _, r := range b.Recs {
		if r.Chain == "EVIDENCE/"+honest {
			assert.False(t, r.Meta.Rejected, "the other host's events, whole")
			continue
		}
		ev := string(r.Event)
		switch {
		case !r.Meta.Rejected:
			kinds = append(kinds, "whole")
		case r.Meta.Reason == string(link.ReasonOverAllowance) && strings.Contains(ev, "not recorded from stream sequence"):
			kinds = append(kinds, "start")
		case r.Meta.Reason == string(link.ReasonOverAllowance):
			kinds = append(kinds, "digest")
		case r.Meta.Reason == string(link.ReasonUnrecorded):
			kinds = append(kinds, "end")
			leftOut = ev
		default:
			t.Fatalf("an unexpected record: %s", ev)
		}
	}
	runs := compress(kinds)
	require.Len(t, runs, 5, "whole, digest, start, end, whole: %v", runs)
	assert.Equal(t, []string{"whole", "digest", "start", "end", "whole"}, []string{runs[0].kind, runs[1].kind, runs[2].kind, runs[3].kind, runs[4].kind})
	whole, digest := runs[0].n, runs[1].n
	assert.Equal(t, 1, runs[2].n)
	assert.Equal(t, 1, runs[3].n)
	assert.Equal(t, 1, runs[4].n, "its event after the debt is repaid, whole")
	left := flood - whole - digest
	assert.Contains(t, leftOut, fmt.Sprintf(`%d messages of this host`, left))
	// Just over 1 MiB of burst is 64 links of 16.4 KiB, give or take the
	// refill over 0.6 s; a quarter of it more, and the refill over the
	// 3 s that takes, in records of a kilobyte.
	assert.InDelta(t, 64, whole, 2)
	assert.InDelta(t, 275, digest, 10)
	t.Logf("%d whole, %d by digest, %d left out of %d bytes sent", whole, digest, left, sent)
}

type run struct {
	kind string
	n    int
}

// compress is kinds as runs of one kind.
func compress(kinds []string) []run {
	var out []run
	for _, k := range kinds {
		if len(out) > 0 && out[len(out)-1].kind == k {
			out[len(out)-1].n++
			continue
		}
		out = append(out, run{k, 1})
	}
	return out
}
