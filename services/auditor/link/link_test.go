package link_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

var hosts = []string{"web-01.example.com", "db 02"}

// seal builds a chain of n fixture links per hasher.
func seal(t *testing.T, h chain.Hasher, n int) []link.Record {
	t.Helper()
	chains := auditortest.NewChains(h, events.Source("auditor", "test"))
	var out []link.Record
	for i := range n {
		m := auditortest.Msg(t, auditortest.Payload(t, hosts, i), i)
		if i == 5 {
			m = auditortest.Malformed(hosts[0], i)
		}
		out = append(out, chains.Seal(t, auditortest.Message(t, auditortest.StreamOf(m.Subject), uint64(i+1), m)))
	}
	return out
}

func TestSealMatchesTheChainPackage(t *testing.T) {
	for _, key := range [][]byte{nil, []byte("0123456789abcdef0123456789abcdef")} {
		h := chain.NewHasher(key)
		var file bytes.Buffer
		for _, r := range seal(t, h, 40) {
			// The hash and line of the event's canonical form, made
			// from its tree by canonjson.
			canon, err := canonjson.Marshal(auditortest.Tree(t, r))
			require.NoError(t, err)
			assert.Equal(t, string(canon), string(r.Event))
			assert.Equal(t, h.Sum(r.Chain, r.Seq, r.Prev, canon), r.Hash)
			l, err := chain.NewLink(r.Chain, r.Seq, r.Prev, r.Hash, auditortest.Tree(t, r))
			require.NoError(t, err)
			assert.Equal(t, string(l.Line), string(r.Line))
			back, err := link.Parse(r.Line)
			require.NoError(t, err)
			assert.Equal(t, r.Meta, back.Meta)
			assert.Equal(t, string(r.Event), string(back.Event))
			file.Write(append(r.Line, '\n'))
		}
		rep, err := chain.Run(context.Background(), h, nil, chain.Lines(&file, ""))
		require.NoError(t, err)
		assert.Nil(t, rep.Broken)
		assert.Equal(t, 40, rep.Links)
	}
}

func TestMeta(t *testing.T) {
	recs := seal(t, chain.NewHasher(nil), 8)
	drift := recs[0].Meta
	assert.Equal(t, "VERDICTS", drift.Stream)
	assert.Equal(t, events.TypeVerdictDrift, drift.Type)
	assert.Equal(t, "web-01.example.com", drift.Host)
	assert.Equal(t, "systemd.unit:agent-0.service", drift.Target)
	assert.Equal(t, "drift", drift.Status)
	assert.Equal(t, "VERDICTS/web-01.example.com", recs[0].Chain)
	assert.Equal(t, "EVIDENCE/db 02", recs[3].Chain, "runnable.modified of host db 02")

	bad := recs[5].Meta
	assert.True(t, bad.Rejected)
	assert.Equal(t, events.TypeEventRejected, bad.Type)
	assert.Equal(t, "missing_attribute", bad.Reason)
	assert.Equal(t, "web-01.example.com", bad.Host)
	assert.Equal(t, "EVIDENCE/web-01.example.com", recs[5].Chain)
	assert.Equal(t, "BASELINES", recs[7].Chain)
}

func TestChainName(t *testing.T) {
	for _, tc := range []struct{ stream, subject, want string }{
		{"EVIDENCE", events.EvidenceSubject("web-01.example.com", "git.repository"), "EVIDENCE/web-01.example.com"},
		{"EVIDENCE", events.IntegritySubject("a b"), "EVIDENCE/a b"},
		{"EVIDENCE", events.CollectFailedSubject("h"), "EVIDENCE/h"},
		{"EVIDENCE", "rt.collect", "EVIDENCE/="},
		{"EVIDENCE", "rt.evidence.bad=ZZ.x", "EVIDENCE/bad=ZZ"},
		{"VERDICTS", events.VerdictSubject("h.example", events.StatusDrift), "VERDICTS/h.example"},
		{"BASELINES", "rt.baseline.a.b", "BASELINES"},
		{"DLQ", "rt.dlq.EVIDENCE", "DLQ"},
	} {
		assert.Equal(t, tc.want, link.ChainName(tc.stream, tc.subject), tc.subject)
	}
}

// BenchmarkSeal measures sealing one message as the auditor's writer does
// (Prepare, then Prepared.Seal), keyed.
func BenchmarkSeal(b *testing.B) {
	hosts := []string{"h1", "h2", "h3"}
	var msgs []*link.Message
	for i := range 64 {
		m := auditortest.Msg(b, auditortest.Payload(b, hosts, i), i)
		msgs = append(msgs, auditortest.Message(b, auditortest.StreamOf(m.Subject), uint64(i+1), m))
	}
	h := chain.NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := msgs[i%len(msgs)]
		i++
		link.Prepare(m, "/auditor/b", false).Seal(h, link.Head{})
	}
}

// TestPartition pins the scheme: FNV-1a 32 of the chain name modulo n
// ("a" hashes to 0xe40c292c, the algorithm's published test vector). A
// change would move chains between partitions.
func TestPartition(t *testing.T) {
	for _, tc := range []struct {
		chain string
		n     int
		want  int
	}{
		{"a", 1 << 30, 0xe40c292c % (1 << 30)},
		{"DLQ", 1, 0}, {"DLQ", 0, 0}, {"DLQ", 2, 0}, {"DLQ", 7, 6},
		{"BASELINES", 2, 1}, {"BASELINES", 3, 2},
		{"EVIDENCE/web-01.example.com", 2, 0}, {"EVIDENCE/web-01.example.com", 3, 2},
		{"VERDICTS/db 03", 2, 1}, {"VERDICTS/db 03", 7, 3},
	} {
		if got := link.Partition(tc.chain, tc.n); got != tc.want {
			t.Errorf("Partition(%q, %d) = %d, want %d", tc.chain, tc.n, got, tc.want)
		}
	}
}
