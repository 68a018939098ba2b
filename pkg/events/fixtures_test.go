package events_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/eventstest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata with the current output")

// The fixtures of the golden files (package eventstest), by the names
// this package's tests use.
const (
	fixtureID          = eventstest.ID
	fixtureSource      = eventstest.Source
	fixtureTraceparent = eventstest.Traceparent
	fixtureHost        = eventstest.Host
	digestA            = eventstest.DigestA
	digestB            = eventstest.DigestB
)

var fixtureTime = eventstest.Time

func fixtureSnapshot(tb testing.TB) *snapshot.Snapshot { return eventstest.Snapshot(tb) }
func fixtures(tb testing.TB) map[string]events.Payload { return eventstest.Payloads(tb) }

// indent renders a payload as its golden file does: two-space indented
// JSON without HTML escaping, and a final newline.
func indent(tb testing.TB, v any) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(tb, enc.Encode(v))
	return buf.Bytes()
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(tb, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(tb, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(tb, err, "missing golden file; run go test ./... -update")
	require.Equal(tb, string(want), string(got), "%s differs; if the change is intended, run go test ./... -update", path)
}

func compact(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	require.NoError(tb, json.Compact(&buf, b))
	return buf.Bytes()
}
