package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// TestBaselineRecord pins the stored form of a baseline: the verifier
// writes it and the attestor reads it, so its field names are a contract.
func TestBaselineRecord(t *testing.T) {
	b := events.Baseline{
		Target:           events.Target{Kind: "systemd.unit", Identifier: "nginx.service"},
		Snapshot:         json.RawMessage(`{"schema_version":1}`),
		Digest:           "sha256:" + strings.Repeat("ab", 32),
		Protect:          []string{"systemd.unit.exec_start"},
		RequiredIdentity: &events.SignerIdentity{Issuer: "https://accounts.example", Identity: "ci@example.com"},
		ApprovedAt:       time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC),
		ApprovedBy:       "alice",
		Host:             "web-1",
	}
	got := indent(t, b)
	golden(t, "records/baseline.golden.json", got)
	compact, err := json.Marshal(b)
	require.NoError(t, err)
	var back events.Baseline
	require.NoError(t, json.Unmarshal(compact, &back))
	assert.Equal(t, b, back)

	var bare []byte
	bare, err = json.Marshal(events.Baseline{Target: b.Target, Snapshot: b.Snapshot, Digest: b.Digest, ApprovedAt: b.ApprovedAt})
	require.NoError(t, err)
	assert.JSONEq(t, `{"target":{"kind":"systemd.unit","identifier":"nginx.service"},"snapshot":{"schema_version":1},"digest":"`+b.Digest+`","approved_at":"2026-12-02T08:00:00Z"}`,
		string(bare), "the optional fields are left out")
}
