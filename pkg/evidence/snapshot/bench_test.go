package snapshot_test

import (
	"testing"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/internal/evidencetest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// BenchmarkDigest10k measures `runtimetruth digest` (strict parse plus
// RFC 8785 SHA-256) of a 10,000-field snapshot against a plain
// encoding/json round trip of the same bytes in the same run.
func BenchmarkDigest10k(b *testing.B) {
	doc := evidencetest.LargeSnapshot(10000, "")
	b.Run("runtimetruth", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			s, err := snapshot.Parse(doc)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Digest(); err != nil {
				b.Fatal(err)
			}
		}
	})
	evidencetest.BenchJSONRoundTrip(b, doc)
}
