// Package eventstest holds the fixture payloads of package events' golden
// files, one per event type, for the tests of events and of the packages
// that move its events (topology's tests against a real JetStream).
package eventstest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// Fixed attributes of the fixture events.
const (
	ID          = "01920000-0000-7000-8000-000000000001"
	Source      = "/collector/web-01.example.com"
	Traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	Host        = "web-01.example.com"
	DigestA     = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	DigestB     = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
)

// Time is the fixture events' time.
var Time = time.Date(2026, 10, 6, 3, 9, 41, 123456000, time.UTC)

// Snapshot is the snapshot of the evidence fixture: two records, values
// of every JSON kind, characters that HTML escaping and UTF-8 touch.
func Snapshot(tb testing.TB) *snapshot.Snapshot {
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

// Target is the fixtures' target.
func Target() events.Target {
	return events.Target{Kind: "systemd.unit", Identifier: "agent worker.service"}
}

// DriftReport is the report of the drift verdict fixture.
func DriftReport() *report.Report {
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

// Bundle is the attestation fixture's (not a real) Sigstore bundle.
func Bundle() json.RawMessage {
	return json.RawMessage(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json","verificationMaterial":{"publicKey":{"hint":"attestor"}},"dsseEnvelope":{"payload":"e30=","payloadType":"application/vnd.in-toto+json","signatures":[{"sig":"MEUCIQ=="}]}}`)
}

// Payloads returns one payload per golden example of package events,
// by golden file name (testdata/<name>).
func Payloads(tb testing.TB) map[string]events.Payload {
	tb.Helper()
	ev, err := events.NewEvidenceCollected(Host, Snapshot(tb), time.Minute)
	require.NoError(tb, err)
	snapDigest := ev.Digest
	ev.Baseline = &events.Target{Kind: "systemd.unit", Identifier: "agent.service"}
	bundleDigest, err := events.BundleDigest(Bundle())
	require.NoError(tb, err)
	pass := DriftReport()
	pass.Status, pass.Changes = report.Pass, []report.Change{}
	pass.Protected = []string{"systemd.unit.main_pid"}
	return map[string]events.Payload{
		"evidence.collected.v1.golden.json": ev,
		"runnable.modified.v1.golden.json": events.RunnableModified{
			Host:        Host,
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
			Status: events.StatusPass, Host: Host, Target: Target(), EvidenceID: ID,
			SnapshotDigest: snapDigest, BaselineDigest: snapDigest, Report: pass,
		},
		"verdict.drift.v2.golden.json": events.Verdict{
			Status: events.StatusDrift, Host: Host, Target: Target(), EvidenceID: ID,
			SnapshotDigest: snapDigest, BaselineDigest: DigestA, Report: DriftReport(),
		},
		"verdict.error.v2.golden.json": events.Verdict{
			Status: events.StatusError, Host: Host, Target: Target(), EvidenceID: ID,
			SnapshotDigest: snapDigest, Error: "no baseline for systemd.unit:'agent worker.service'",
		},
		"verdict.stale.v2.golden.json": events.Verdict{
			Status: events.StatusStale, Host: Host, Target: Target(), EvidenceID: ID,
			SnapshotDigest: snapDigest, BaselineDigest: snapDigest, LastSeen: "2026-10-06T03:09:41Z",
			Error: "no authentic evidence since 2026-10-06T03:09:41Z (stale after 3m0s)",
		},
		"baseline.changed.v1.golden.json": events.BaselineChanged{
			Target: Target(), Change: events.BaselineUpdated, Digest: DigestB, PreviousDigest: DigestA,
			Actor: "alice@example.com",
		},
		"attestation.created.v1.golden.json": events.AttestationCreated{
			Target: Target(), BaselineDigest: DigestB,
			PredicateType:   "https://sidelobe.dev/runtimetruth/attestation/v1",
			StatementDigest: DigestA, BundleDigest: bundleDigest, Bundle: Bundle(),
			CertificateIdentity: "attestor@example.com", OIDCIssuer: "https://issuer.example.com",
		},
		"host.key.changed.v1.golden.json": events.HostKeyChanged{
			Host: Host,
			Keys: []events.KeyChange{
				{Key: "ed25519:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32)), State: events.KeyRevoked, Previous: events.KeyEnrolled},
				{Key: "ed25519:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32)), State: events.KeyEnrolled, Previous: events.KeyPending},
			},
			Actor: "alice@example.com",
		},
		"collection.failed.v1.golden.json": events.CollectionFailed{
			Host: Host, Collector: "codex", Target: &events.Target{Kind: "codex.agent", Identifier: "/home/agent/proj"},
			Reason: "timeout", Message: "codex app-server did not answer initialize within 10s", Retryable: true,
		},
		"event.rejected.v1.golden.json": events.EventRejected{
			Stream: "EVIDENCE", Consumer: "verifier", OriginalSubject: "rt.evidence.web-01=2Eexample=2Ecom.systemd=2Eunit",
			StreamSequence: 42, Deliveries: 1, Reason: events.ReasonUnknownType,
			Error:    `invalid event: type: "dev.runtimetruth.evidence.collected.v9" is not in the catalog (unknown_type)`,
			Envelope: events.Envelope{ID: ID, Type: "dev.runtimetruth.evidence.collected.v9", Source: Source, SpecVersion: "1.0", MsgID: ID},
			DataSize: 2, DataDigest: "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a",
		},
	}
}
