package events_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata with the current output")

// Fixed attributes of the fixture events.
const (
	fixtureID          = "01920000-0000-7000-8000-000000000001"
	fixtureSource      = "/collector/web-01.example.com"
	fixtureTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	fixtureHost        = "web-01.example.com"
	digestA            = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	digestB            = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

var fixtureTime = time.Date(2026, 10, 6, 3, 9, 41, 123456000, time.UTC)

func fixtureSnapshot(tb testing.TB) *snapshot.Snapshot {
	tb.Helper()
	s := &snapshot.Snapshot{
		SchemaVersion: snapshot.SchemaVersion,
		CapturedAt:    "2026-10-06T03:09:40Z",
		Target:        snapshot.Target{Kind: "systemd.unit", Identifier: "agent worker.service"},
		Evidence: []snapshot.Record{
			{
				Plane:  snapshot.Live,
				Kind:   "systemd.unit",
				Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
				Data: snapshot.Data{
					"active_state":  snapshot.String("active"),
					"main_pid":      snapshot.Int(3036),
					"dynamic_user":  snapshot.Bool(false),
					"drop_in_paths": snapshot.Null(),
					"description":   snapshot.String("Agent <worker> & café ☕"),
				},
			},
			{
				Plane:  snapshot.Resolved,
				Kind:   "git.repository",
				Source: snapshot.Source{Collector: "git", Method: "git rev-parse"},
				Data: snapshot.Data{
					"head_commit": snapshot.String("1111111111111111111111111111111111111111"),
					"dirty":       snapshot.Bool(false),
				},
			},
		},
	}
	require.NoError(tb, s.Validate())
	return s
}

func fixtureTarget() events.Target {
	return events.Target{Kind: "systemd.unit", Identifier: "agent worker.service"}
}

func driftReport() *report.Report {
	return &report.Report{
		Changes: []report.Change{{
			Status: diff.Changed,
			Kind:   "systemd.unit",
			Fields: []report.Field{
				{After: report.Present(snapshot.Int(4190)), Before: report.Present(snapshot.Int(3036)), Field: "main_pid"},
				{After: report.Missing, Before: report.Present(snapshot.String("agent")), Field: "user"},
			},
		}},
		Protected:           []string{},
		ReportSchemaVersion: report.SchemaVersion,
		Status:              report.Drift,
		Target:              report.Target{Kind: "systemd.unit", Identifier: "agent worker.service"},
	}
}

func bundle() json.RawMessage {
	return json.RawMessage(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"attestor"}},"dsseEnvelope":{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"MEUCIQ=="}]}}`)
}

// fixtures returns one payload per golden example, by golden name.
func fixtures(tb testing.TB) map[string]events.Payload {
	tb.Helper()
	ev, err := events.NewEvidenceCollected(fixtureHost, fixtureSnapshot(tb), time.Minute)
	require.NoError(tb, err)
	snapDigest := ev.Digest
	ev.Baseline = &events.Target{Kind: "systemd.unit", Identifier: "agent.service"}
	bundleDigest, err := events.BundleDigest(bundle())
	require.NoError(tb, err)
	pass := driftReport()
	pass.Status, pass.Changes = report.Pass, []report.Change{}
	pass.Protected = []string{"systemd.unit.main_pid"}
	return map[string]events.Payload{
		"evidence.collected.v1.golden.json": ev,
		"runnable.modified.v1.golden.json": events.RunnableModified{
			Host:        fixtureHost,
			Ecosystem:   events.Python,
			Environment: "/srv/agent/.venv",
			Runnable:    "which",
			Package:     "runspec_linux",
			Version:     "0.20.0",
			Source:      "index",
			Baseline:    "RECORD",
			ChangedFiles: []events.FileChange{
				{Path: "runspec_linux/files.py", Change: events.FileModified, Observed: "sha256:3333333333333333333333333333333333333333333333333333333333333333"},
				{Path: "runspec_linux/gone.py", Change: events.FileMissing},
			},
			ChangeDigest: "4444444444444444444444444444444444444444444444444444444444444444",
		},
		"verdict.pass.v2.golden.json": events.Verdict{
			Status: events.StatusPass, Host: fixtureHost, Target: fixtureTarget(), EvidenceID: fixtureID,
			SnapshotDigest: snapDigest, BaselineDigest: snapDigest, Report: pass,
		},
		"verdict.drift.v2.golden.json": events.Verdict{
			Status: events.StatusDrift, Host: fixtureHost, Target: fixtureTarget(), EvidenceID: fixtureID,
			SnapshotDigest: snapDigest, BaselineDigest: digestA, Report: driftReport(),
		},
		"verdict.error.v2.golden.json": events.Verdict{
			Status: events.StatusError, Host: fixtureHost, Target: fixtureTarget(), EvidenceID: fixtureID,
			SnapshotDigest: snapDigest, Error: "no baseline for systemd.unit:'agent worker.service'",
		},
		"verdict.stale.v2.golden.json": events.Verdict{
			Status: events.StatusStale, Host: fixtureHost, Target: fixtureTarget(), EvidenceID: fixtureID,
			SnapshotDigest: snapDigest, BaselineDigest: snapDigest, LastSeen: "2026-10-06T03:09:41Z",
			Error: "no authentic evidence since 2026-10-06T03:09:41Z (stale after 3m0s)",
		},
		"baseline.changed.v1.golden.json": events.BaselineChanged{
			Target: fixtureTarget(), Change: events.BaselineUpdated, Digest: digestB, PreviousDigest: digestA,
			Actor: "alice@example.com",
		},
		"attestation.created.v1.golden.json": events.AttestationCreated{
			Target: fixtureTarget(), BaselineDigest: digestB,
			PredicateType:   "https://sidelobe.dev/runtimetruth/attestation/v1",
			StatementDigest: digestA, BundleDigest: bundleDigest, Bundle: bundle(),
			CertificateIdentity: "attestor@example.com", OIDCIssuer: "https://issuer.example.com",
		},
		"collection.failed.v1.golden.json": events.CollectionFailed{
			Host: fixtureHost, Collector: "codex", Target: &events.Target{Kind: "codex.agent", Identifier: "/home/agent/proj"},
			Reason: "timeout", Message: "codex app-server did not answer initialize within 10s", Retryable: true,
		},
		"event.rejected.v1.golden.json": events.EventRejected{
			Stream: "EVIDENCE", Consumer: "verifier", OriginalSubject: "rt.evidence.web-01=2Eexample=2Ecom.systemd=2Eunit",
			StreamSequence: 42, Deliveries: 1, Reason: events.ReasonUnknownType,
			Error:    `invalid event: type: "dev.runtimetruth.evidence.collected.v9" is not in the catalog (unknown_type)`,
			Envelope: events.Envelope{ID: fixtureID, Type: "dev.runtimetruth.evidence.collected.v9", Source: fixtureSource, SpecVersion: "1.0", MsgID: fixtureID},
			DataSize: 2, DataDigest: "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
		},
	}
}

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
