package diff_test

import (
	"testing"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/internal/evidencetest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// BenchmarkVerify10k measures `runtimetruth verify --json` of two
// 10,000-field snapshots that differ in a quarter of their fields (parse
// both, compare, build and encode the report) against plain encoding/json
// round trips of the same two files in the same run.
func BenchmarkVerify10k(b *testing.B) {
	base := evidencetest.LargeSnapshot(10000, "")
	cur := evidencetest.LargeSnapshot(10000, "x")
	b.Run("runtimetruth", func(b *testing.B) {
		b.SetBytes(int64(len(base) + len(cur)))
		for b.Loop() {
			s1, err := snapshot.Parse(base)
			if err != nil {
				b.Fatal(err)
			}
			s2, err := snapshot.Parse(cur)
			if err != nil {
				b.Fatal(err)
			}
			res, err := diff.Compare(s1, s2)
			if err != nil || res.Empty() {
				b.Fatal(err)
			}
			if _, err := report.New(res, nil).Marshal(); err != nil {
				b.Fatal(err)
			}
		}
	})
	evidencetest.BenchJSONRoundTrip(b, base, cur)
}

// BenchmarkVerifyFixture measures the verifier's comparison of a snapshot
// with its baseline (the before.json fixture, three records): unchanged,
// and against after.json.
func BenchmarkVerifyFixture(b *testing.B) {
	before, after := evidencetest.Snapshot(b, "before.json"), evidencetest.Snapshot(b, "after.json")
	for _, bc := range []struct {
		name    string
		current *snapshot.Snapshot
	}{{"unchanged", before}, {"changed", after}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := diff.Verify(before, bc.current, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
