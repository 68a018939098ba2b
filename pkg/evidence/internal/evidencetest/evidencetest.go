// Package evidencetest holds test helpers shared by the evidence packages:
// fixture loading and golden-file comparison with an -update flag.
package evidencetest

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

var update = flag.Bool("update", false, "rewrite golden files with the current output")

// Dir returns the module's shared testdata directory.
func Dir(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(tb, ok)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// Read returns the contents of a file under the shared testdata directory.
func Read(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(tb), name))
	require.NoError(tb, err)
	return b
}

// Snapshot parses the fixture snapshots/name under the shared testdata
// directory.
func Snapshot(tb testing.TB, name string) *snapshot.Snapshot {
	tb.Helper()
	s, err := snapshot.Parse(Read(tb, filepath.Join("snapshots", name)))
	require.NoError(tb, err)
	return s
}

// Golden compares got with the golden file name (under the shared testdata
// directory), rewriting it when the test runs with -update.
func Golden(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join(Dir(tb), name)
	if *update {
		require.NoError(tb, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(tb, err, "golden file missing; run the test with -update to create it")
	require.Equal(tb, string(want), string(got), "output differs from %s; run with -update if the change is intended", name)
}

// LargeSnapshot returns a snapshot document with fields evidence fields
// spread over records of every supported kind's shape, for benchmarks.
func LargeSnapshot(fields int, variant string) []byte {
	var b []byte
	b = append(b, `{"schema_version":1,"captured_at":"2026-11-30T16:05:27.123456Z","target":{"kind":"codex.workspace","identifier":"/srv/agent"},"evidence":[`...)
	kinds := []string{"codex.runtime", "codex.config", "codex.thread", "codex.instructions", "codex.mcp", "codex.mcp_tools"}
	per := (fields + len(kinds) - 1) / len(kinds)
	n := 0
	for i, k := range kinds {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"plane":"live","kind":"`+k+`","source":{"collector":"codex","method":"bench"},"data":{`...)
		for j := 0; j < per && n < fields; j++ {
			if j > 0 {
				b = append(b, ',')
			}
			key := fmt.Sprintf("tool:server-%d:tool-%05d:sha256", i, j)
			switch j % 4 {
			case 0:
				b = append(b, fmt.Sprintf(`"%s":"sha256:%064x%s"`, key, j, variant)...)
			case 1:
				b = append(b, fmt.Sprintf(`"%s":%d`, key, j*7919)...)
			case 2:
				b = append(b, fmt.Sprintf(`"%s":%t`, key, j%3 == 0)...)
			default:
				b = append(b, fmt.Sprintf(`"%s":null`, key)...)
			}
			n++
		}
		b = append(b, `}}`...)
	}
	return append(b, `]}`...)
}

// BenchJSONRoundTrip runs the sub-benchmark reference-encoding-json: a
// plain encoding/json round trip (Unmarshal into a map, then Marshal) of
// each of docs, the baseline a benchmark of the same bytes is read
// against.
func BenchJSONRoundTrip(b *testing.B, docs ...[]byte) {
	size := 0
	for _, doc := range docs {
		size += len(doc)
	}
	b.Run("reference-encoding-json", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			for _, doc := range docs {
				var v map[string]any
				if err := json.Unmarshal(doc, &v); err != nil {
					b.Fatal(err)
				}
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
