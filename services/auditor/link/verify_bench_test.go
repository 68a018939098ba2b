package link_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"testing"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
)

// mixed seals n events of the fixture mix (verdicts with reports,
// evidence snapshots, runnable.modified, ...) over 16 hosts.
func mixed(b *testing.B, h chain.Hasher, n int) []byte {
	b.Helper()
	hosts := []string{"h00", "h01", "h02", "h03", "h04", "h05", "h06", "h07", "h08", "h09", "h10", "h11", "h12", "h13", "h14", "h15"}
	var buf bytes.Buffer
	chains := auditortest.NewChains(h, events.Source("auditor", "b"))
	for i := range n {
		m := auditortest.Msg(b, auditortest.Payload(b, hosts, i), i)
		r := chains.Seal(b, auditortest.Message(b, auditortest.StreamOf(m.Subject), uint64(i+1), m))
		buf.Write(r.Line)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// BenchmarkVerifyJSONL reports links/s verified from a JSONL file in
// memory by pkg/evidence/chain's verifier, against bare SHA-256 over the
// same bytes (the reference).
func BenchmarkVerifyJSONL(b *testing.B) {
	h := chain.NewHasher([]byte("0123456789abcdef0123456789abcdef"))
	const n = 50000
	data := mixed(b, h, n)
	b.Run("reference-sha256", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			for line := range bytes.SplitSeq(data, []byte{'\n'}) {
				sha256.Sum256(line)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "links/s")
	})
	b.Run("verify", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			rep, err := chain.Run(context.Background(), h, nil, chain.Lines(bytes.NewReader(data), "bench"))
			if err != nil || rep.Broken != nil || rep.Links != n {
				b.Fatal(err, rep.Broken)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "links/s")
	})
	b.Run("audit-verify", func(b *testing.B) {
		// What `runtimetruth audit verify --jsonl` runs: the chains and
		// every event id checked once per chain.
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			rep, err := chain.RunWith(context.Background(), h, chain.Lines(bytes.NewReader(data), "bench"), chain.Options{EventIDs: true})
			if err != nil || rep.Broken != nil || rep.Links != n || rep.Duplicate != nil {
				b.Fatal(err, rep.Broken, rep.Duplicate)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "links/s")
	})
}
