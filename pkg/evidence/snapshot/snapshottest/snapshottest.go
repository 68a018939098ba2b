// Package snapshottest writes snapshot documents for tests the way
// RuntimeTruth's Python tests build them with Snapshot.capture(target=...,
// evidence=...).
package snapshottest

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Record is one EvidenceRecord of a Python test; a nil Data value is None.
type Record struct {
	Plane, Kind, Collector, Method string
	Data                           map[string]any
}

// CaptureJSON is the JSON text of Snapshot.capture(target=...,
// evidence=...) at capturedAt (which differs between two captures).
func CaptureJSON(tb testing.TB, targetKind, targetID, capturedAt string, records ...Record) []byte {
	tb.Helper()
	evidence := make([]map[string]any, len(records))
	for i, r := range records {
		evidence[i] = map[string]any{
			"plane":  r.Plane,
			"kind":   r.Kind,
			"source": map[string]any{"collector": r.Collector, "method": r.Method},
			"data":   r.Data,
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]any{
		"schema_version": 1,
		"captured_at":    capturedAt,
		"target":         map[string]any{"kind": targetKind, "identifier": targetID},
		"evidence":       evidence,
	}); err != nil {
		tb.Fatalf("snapshottest: encode: %v", err)
	}
	return buf.Bytes()
}
