package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// Text limits of payload fields (also in the JSON Schemas).
const (
	// MaxNameLength bounds names: hosts, target kinds and identifiers,
	// package names and versions, collectors, streams, consumers.
	MaxNameLength = 1024
	// MaxMessageLength bounds human-readable error text in a payload.
	MaxMessageLength = 2048
	// MaxEnvelopeValue bounds each raw header value a dead-letter record
	// keeps (EventRejected.Envelope).
	MaxEnvelopeValue = 256
)

// Target names what a snapshot describes (snapshot.Target, in JSON).
type Target struct {
	Kind       string `json:"kind"`
	Identifier string `json:"identifier"`
}

// String renders the target as <kind>:<identifier>, the subject attribute
// of the events about it.
func (t Target) String() string { return t.Kind + ":" + t.Identifier }

// ParseTarget reads a target as String writes it and as commands and
// configuration name one, KIND:IDENTIFIER (git.repository:/srv/app): the
// kind before the first ':', holding no '/' (so a path is never read as a
// kind), both parts valid names (no control characters, at most
// MaxNameLength bytes).
func ParseTarget(s string) (Target, error) {
	kind, id, ok := strings.Cut(s, ":")
	if !ok || kind == "" || id == "" || strings.Contains(kind, "/") {
		return Target{}, fmt.Errorf("invalid target %q: want KIND:IDENTIFIER, e.g. git.repository:/srv/app", s)
	}
	t := Target{Kind: kind, Identifier: id}
	if err := t.validate("target"); err != nil {
		return Target{}, fmt.Errorf("invalid target %q: %w", s, err)
	}
	return t, nil
}

func (t Target) validate(field string) error {
	// The field names are built for an error only.
	if err := checkName(field+".kind", t.Kind); err != nil {
		return err
	}
	if err := checkName(field+".identifier", t.Identifier); err != nil {
		return err
	}
	return nil
}

// EvidenceCollected is the data of TypeEvidenceCollected: one snapshot
// (RuntimeTruth schema v1) of a target on a host.
type EvidenceCollected struct {
	// Host is the host the collector runs on.
	Host string `json:"host"`
	// Target repeats the snapshot's target, for routing without parsing
	// the snapshot.
	Target Target `json:"target"`
	// Digest is the snapshot's digest, "sha256:<hex>" over its RFC 8785
	// canonical JSON.
	Digest string `json:"digest"`
	// IntervalSeconds is the collection interval; 0 for a one-off
	// collection.
	IntervalSeconds int64 `json:"interval_seconds"`
	// Snapshot is the snapshot document (canonical JSON when built by
	// NewEvidenceCollected).
	Snapshot json.RawMessage `json:"snapshot"`
	// Baseline names the baseline to verify the snapshot against, when
	// the collector's target configuration names one; nil means the
	// baseline of Target.
	Baseline *Target `json:"baseline,omitempty"`
}

// BaselineTarget is the target whose baseline the snapshot is verified
// against: Baseline when set, else Target.
func (p EvidenceCollected) BaselineTarget() Target {
	if p.Baseline != nil {
		return *p.Baseline
	}
	return p.Target
}

// NewEvidenceCollected builds the payload of a snapshot collected on host
// every interval (0 for once).
func NewEvidenceCollected(host string, s *snapshot.Snapshot, interval time.Duration) (EvidenceCollected, error) {
	raw, err := s.Canonical()
	if err != nil {
		return EvidenceCollected{}, err
	}
	digest, err := s.Digest()
	if err != nil {
		return EvidenceCollected{}, err
	}
	return EvidenceCollected{
		Host:            host,
		Target:          Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier},
		Digest:          digest,
		IntervalSeconds: int64(interval / time.Second),
		Snapshot:        raw,
	}, nil
}

// ParseSnapshot parses the embedded snapshot strictly.
func (p EvidenceCollected) ParseSnapshot() (*snapshot.Snapshot, error) {
	return snapshot.Parse(p.Snapshot)
}

// Type is TypeEvidenceCollected.
func (EvidenceCollected) Type() string { return TypeEvidenceCollected }

// Subject is the target, <kind>:<identifier>.
func (p EvidenceCollected) Subject() string { return p.Target.String() }

// NATSSubject is rt.evidence.<host>.<target-kind>.
func (p EvidenceCollected) NATSSubject() string { return EvidenceSubject(p.Host, p.Target.Kind) }

// Validate checks the fields, parses the snapshot and checks that its
// target and digest are the ones the payload states.
func (p EvidenceCollected) Validate() error {
	_, _, err := p.check()
	return err
}

// Ecosystem is the package ecosystem of installed code.
type Ecosystem string

// The ecosystems whose installed code is checked.
const (
	Python Ecosystem = "python"
	Node   Ecosystem = "node"
)

// The kinds of FileChange.Change.
const (
	FileModified = "modified" // the content differs, or the path is no longer a regular file
	FileMissing  = "missing"  // a listed file is gone
	FileAdded    = "added"    // a file the baseline does not list appeared
)

// FileChange is one changed installed file.
type FileChange struct {
	// Path is the file as the package's baseline lists it.
	Path string `json:"path"`
	// Change is FileModified, FileMissing or FileAdded.
	Change string `json:"change"`
	// Observed is what is on disk now: "<algorithm>:<hex>", "symlink" or
	// "not a regular file"; empty when missing.
	Observed string `json:"observed,omitempty"`
}

// RunnableModified is the data of TypeRunnableModified: the installed code of
// one package differs from what was installed. It is published once per
// distinct change (ChangeDigest), as runspec records runnable.modified.
type RunnableModified struct {
	// Host is the host the environment is on.
	Host string `json:"host"`
	// Ecosystem is Python or Node.
	Ecosystem Ecosystem `json:"ecosystem"`
	// Environment is the virtual environment or Node project checked.
	Environment string `json:"environment"`
	// Runnable names the runnable whose check found the change, if any.
	Runnable string `json:"runnable,omitempty"`
	// Package and Version name the installed package.
	Package string `json:"package"`
	Version string `json:"version"`
	// Source is where the code came from: "index", "local build",
	// "editable", "link" or "project".
	Source string `json:"source"`
	// Baseline is where the known-good hashes came from: "RECORD",
	// "manifest" or "snapshot".
	Baseline string `json:"baseline"`
	// ChangedFiles lists the unexpected changes, one per path.
	ChangedFiles []FileChange `json:"changed_files"`
	// ChangeDigest identifies this set of changes: lower-case hex SHA-256
	// (see the collector's integrity package).
	ChangeDigest string `json:"change_digest"`
}

// Type is TypeRunnableModified.
func (RunnableModified) Type() string { return TypeRunnableModified }

// Subject is the package's purl (PackageURL).
func (p RunnableModified) Subject() string { return PackageURL(p.Ecosystem, p.Package, p.Version) }

// NATSSubject is rt.integrity.<host>.
func (p RunnableModified) NATSSubject() string { return IntegritySubject(p.Host) }

// The longest FileChange.Path and Observed, in characters.
const (
	maxPathLength     = 4096
	maxObservedLength = 256
)

var (
	packageSources = []string{"index", "local build", "editable", "link", "project"}
	baselineKinds  = []string{"RECORD", "manifest", "snapshot"}
	fileChanges    = []string{FileModified, FileMissing, FileAdded}
)

// Validate checks the fields the schema cannot.
func (p RunnableModified) Validate() error {
	for _, f := range []struct{ name, v string }{
		{"host", p.Host}, {"environment", p.Environment}, {"package", p.Package}, {"version", p.Version},
	} {
		if err := checkName(f.name, f.v); err != nil {
			return err
		}
	}
	if p.Ecosystem != Python && p.Ecosystem != Node {
		return schemaErr("ecosystem", "%q is not python or node", p.Ecosystem)
	}
	if p.Runnable != "" {
		if err := checkName("runnable", p.Runnable); err != nil {
			return err
		}
	}
	if !slices.Contains(packageSources, p.Source) {
		return schemaErr("source", "unknown source %q", p.Source)
	}
	if !slices.Contains(baselineKinds, p.Baseline) {
		return schemaErr("baseline", "unknown baseline %q", p.Baseline)
	}
	if len(p.ChangedFiles) == 0 {
		return schemaErr("changed_files", "empty")
	}
	seen := make(map[string]bool, len(p.ChangedFiles))
	for i, c := range p.ChangedFiles {
		field := "changed_files/" + strconv.Itoa(i)
		switch {
		case c.Path == "" || utf8.RuneCountInString(c.Path) > maxPathLength:
			return schemaErr(field+"/path", "empty, or longer than %d characters", maxPathLength)
		case strings.IndexByte(c.Path, 0) >= 0 || !utf8.ValidString(c.Path):
			return fieldErr(field+"/path", "holds NUL or invalid UTF-8")
		case utf8.RuneCountInString(c.Observed) > maxObservedLength:
			return schemaErr(field+"/observed", "longer than %d characters", maxObservedLength)
		}
		if seen[c.Path] {
			return fieldErr(field+"/path", "%q listed twice", c.Path)
		}
		seen[c.Path] = true
		if !slices.Contains(fileChanges, c.Change) {
			return schemaErr(field+"/change", "unknown change %q", c.Change)
		}
	}
	if !isHex64(p.ChangeDigest) {
		return schemaErr("change_digest", "not 64 lower-case hex digits")
	}
	return nil
}

// PackageURL renders a package as a purl: pkg:pypi/<name>@<version> (the
// name normalized as PEP 503 does) or pkg:npm/<name>@<version> (a scope's
// '@' escaped, pkg:npm/%40scope/name@1.0.0).
func PackageURL(eco Ecosystem, name, version string) string {
	switch eco {
	case Python:
		name = pep503.ReplaceAllString(strings.ToLower(name), "-")
		return "pkg:pypi/" + purlEscape(name) + "@" + purlEscape(version)
	case Node:
		if scope, rest, ok := strings.Cut(name, "/"); ok && strings.HasPrefix(scope, "@") {
			return "pkg:npm/" + purlEscape(scope) + "/" + purlEscape(rest) + "@" + purlEscape(version)
		}
		return "pkg:npm/" + purlEscape(name) + "@" + purlEscape(version)
	}
	return "pkg:generic/" + purlEscape(name) + "@" + purlEscape(version)
}

var pep503 = regexp.MustCompile(`[-_.]+`)

func purlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// Status is a verification outcome.
type Status string

// The verification outcomes.
const (
	StatusPass  Status = "pass"
	StatusDrift Status = "drift"
	StatusError Status = "error"
	// StatusStale says no authentic evidence of the host and target came
	// for its stale_after: the verifier cannot tell what runs there.
	StatusStale Status = "stale"
)

// Verdict is the data of TypeVerdictPass, TypeVerdictDrift,
// TypeVerdictError and TypeVerdictStale: the outcome of verifying one
// snapshot against the target's baseline, or (stale) of no authentic
// snapshot coming in time.
type Verdict struct {
	// Status is pass, drift, error or stale; it selects the event type.
	Status Status `json:"status"`
	// Host is the host the snapshot came from.
	Host string `json:"host"`
	// Target is the snapshot's target.
	Target Target `json:"target"`
	// EvidenceID is the id of the evidence.collected event verified (for
	// a stale verdict, the last one).
	EvidenceID string `json:"evidence_id"`
	// SnapshotDigest is the verified snapshot's digest.
	SnapshotDigest string `json:"snapshot_digest"`
	// BaselineDigest is the baseline's digest; absent for an error verdict
	// when there is no usable baseline.
	BaselineDigest string `json:"baseline_digest,omitempty"`
	// Report is the verification report (pass and drift only); its status
	// is the verdict's.
	Report *report.Report `json:"report,omitempty"`
	// Error says why verification failed (error), or since when nothing
	// came (stale).
	Error string `json:"error,omitempty"`
	// LastSeen is when the last authentic evidence was verified, RFC 3339
	// in UTC (stale only).
	LastSeen string `json:"last_seen,omitempty"`
}

// Type is the verdict type of the status, or "" for an unknown status.
func (p Verdict) Type() string {
	switch p.Status {
	case StatusPass:
		return TypeVerdictPass
	case StatusDrift:
		return TypeVerdictDrift
	case StatusError:
		return TypeVerdictError
	case StatusStale:
		return TypeVerdictStale
	}
	return ""
}

// Subject is the target, <kind>:<identifier>.
func (p Verdict) Subject() string { return p.Target.String() }

// NATSSubject is rt.verdict.<host>.<status>.
func (p Verdict) NATSSubject() string { return VerdictSubject(p.Host, p.Status) }

// Validate checks that a pass or drift verdict carries a matching report
// and a baseline digest, and that an error verdict carries an error.
func (p Verdict) Validate() error {
	if p.Type() == "" {
		return schemaErr("status", "%q is not pass, drift, error or stale", p.Status)
	}
	if err := checkName("host", p.Host); err != nil {
		return err
	}
	if err := p.Target.validate("target"); err != nil {
		return err
	}
	if err := checkID("evidence_id", p.EvidenceID); err != nil {
		return err
	}
	if err := checkDigest("snapshot_digest", p.SnapshotDigest); err != nil {
		return err
	}
	if p.LastSeen != "" && !isUTCTime(p.LastSeen) {
		return schemaErr("last_seen", "%q is not an RFC 3339 time in UTC", p.LastSeen)
	}
	if p.Status == StatusStale {
		if _, err := time.Parse(time.RFC3339Nano, p.LastSeen); err != nil || !strings.HasSuffix(p.LastSeen, "Z") {
			return fieldErr("last_seen", "%q is not an RFC 3339 time in UTC", p.LastSeen)
		}
	} else if p.LastSeen != "" {
		return fieldErr("last_seen", "a %s verdict has no last_seen", p.Status)
	}
	if p.Status == StatusError || p.Status == StatusStale {
		if p.BaselineDigest != "" {
			if err := checkDigest("baseline_digest", p.BaselineDigest); err != nil {
				return err
			}
		}
		if p.Report != nil {
			return schemaErr("report", "a %s verdict has no report", p.Status)
		}
		return checkMessage("error", p.Error)
	}
	if err := checkDigest("baseline_digest", p.BaselineDigest); err != nil {
		return err
	}
	if p.Error != "" {
		return schemaErr("error", "a %s verdict has no error", p.Status)
	}
	r := p.Report
	if r == nil {
		return schemaErr("report", "a %s verdict needs its report", p.Status)
	}
	if err := r.Validate(); err != nil {
		return &fieldError{field: "report", err: err, schema: true}
	}
	switch {
	case r.ReportSchemaVersion != report.SchemaVersion:
		return schemaErr("report/report_schema_version", "%d, want %d", r.ReportSchemaVersion, report.SchemaVersion)
	case string(r.Status) != string(p.Status):
		return schemaErr("report/status", "%q, but the verdict is %q", r.Status, p.Status)
	case r.Target.Kind != p.Target.Kind || r.Target.Identifier != p.Target.Identifier:
		return fieldErr("report/target", "%s:%s, but the verdict's target is %s", r.Target.Kind, r.Target.Identifier, p.Target)
	case (r.Status == report.Pass) != (len(r.Changes) == 0):
		return schemaErr("report/changes", "%d changes in a %s report", len(r.Changes), r.Status)
	}
	return nil
}

// BaselineChange says what happened to a baseline.
type BaselineChange string

// The baseline changes.
const (
	BaselineCreated BaselineChange = "created"
	BaselineUpdated BaselineChange = "updated"
	BaselineRemoved BaselineChange = "removed"
)

// BaselineChanged is the data of TypeBaselineChanged.
type BaselineChanged struct {
	// Target is the baseline's target.
	Target Target `json:"target"`
	// Change is created, updated or removed.
	Change BaselineChange `json:"change"`
	// Digest is the new baseline's digest (not when removed).
	Digest string `json:"digest,omitempty"`
	// PreviousDigest is the replaced baseline's digest (not when created).
	PreviousDigest string `json:"previous_digest,omitempty"`
	// Actor names who made the change (a user or a workload identity).
	Actor string `json:"actor,omitempty"`
}

// Type is TypeBaselineChanged.
func (BaselineChanged) Type() string { return TypeBaselineChanged }

// Subject is the target, <kind>:<identifier>.
func (p BaselineChanged) Subject() string { return p.Target.String() }

// NATSSubject is rt.baseline.<target-kind>.<target-identifier>.
func (p BaselineChanged) NATSSubject() string { return BaselineSubject(p.Target) }

// Validate checks that the digests present are the ones the change needs.
func (p BaselineChanged) Validate() error {
	if err := p.Target.validate("target"); err != nil {
		return err
	}
	needNew, needOld := false, false
	switch p.Change {
	case BaselineCreated:
		needNew = true
	case BaselineUpdated:
		needNew, needOld = true, true
	case BaselineRemoved:
		needOld = true
	default:
		return schemaErr("change", "%q is not created, updated or removed", p.Change)
	}
	if err := optionalDigest("digest", p.Digest, needNew, p.Change); err != nil {
		return err
	}
	if err := optionalDigest("previous_digest", p.PreviousDigest, needOld, p.Change); err != nil {
		return err
	}
	if p.Change == BaselineUpdated && p.Digest == p.PreviousDigest {
		return fieldErr("digest", "an update to the same digest")
	}
	if p.Actor != "" {
		return checkName("actor", p.Actor)
	}
	return nil
}

func optionalDigest(field, v string, need bool, change BaselineChange) error {
	if !need {
		if v != "" {
			return fieldErr(field, "not part of a %s change", change)
		}
		return nil
	}
	return checkDigest(field, v)
}

// AttestationCreated is the data of TypeAttestationCreated: a baseline was
// signed. It carries the Sigstore bundle, which verifies the in-toto
// statement whose subject is the baseline's digest.
type AttestationCreated struct {
	// Target is the baseline's target.
	Target Target `json:"target"`
	// BaselineDigest is the attested baseline's digest.
	BaselineDigest string `json:"baseline_digest"`
	// PredicateType is the statement's predicateType URI.
	PredicateType string `json:"predicate_type"`
	// StatementDigest is "sha256:<hex>" over the signed statement bytes.
	StatementDigest string `json:"statement_digest"`
	// BundleDigest is "sha256:<hex>" over the RFC 8785 canonical JSON of
	// Bundle (so re-indenting the bundle keeps it).
	BundleDigest string `json:"bundle_digest"`
	// Bundle is the Sigstore bundle (a JSON object).
	Bundle json.RawMessage `json:"bundle"`
	// CertificateIdentity and OIDCIssuer name the keyless signer; empty
	// for a key-pair signature.
	CertificateIdentity string `json:"certificate_identity,omitempty"`
	OIDCIssuer          string `json:"oidc_issuer,omitempty"`
}

// BundleDigest returns "sha256:<hex>" over the canonical JSON of a bundle.
func BundleDigest(bundle []byte) (string, error) {
	canon, err := canonjson.Transform(bundle)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Type is TypeAttestationCreated.
func (AttestationCreated) Type() string { return TypeAttestationCreated }

// Subject is the target, <kind>:<identifier>.
func (p AttestationCreated) Subject() string { return p.Target.String() }

// NATSSubject is rt.attestation.<target-kind>.<target-identifier>.
func (p AttestationCreated) NATSSubject() string { return AttestationSubject(p.Target) }

// Validate checks the digests, including the bundle's.
func (p AttestationCreated) Validate() error {
	if err := p.Target.validate("target"); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{
		{"baseline_digest", p.BaselineDigest}, {"statement_digest", p.StatementDigest}, {"bundle_digest", p.BundleDigest},
	} {
		if err := checkDigest(f.name, f.v); err != nil {
			return err
		}
	}
	if u, err := url.Parse(p.PredicateType); err != nil || !u.IsAbs() {
		return schemaErr("predicate_type", "%q is not an absolute URI", p.PredicateType)
	}
	if err := checkName("predicate_type", p.PredicateType); err != nil {
		return err
	}
	if t := strings.TrimLeft(string(p.Bundle), " \t\r\n"); !strings.HasPrefix(t, "{") {
		return schemaErr("bundle", "not a JSON object")
	}
	got, err := BundleDigest(p.Bundle)
	if err != nil {
		return fieldErr("bundle", "%v", err)
	}
	if got != p.BundleDigest {
		return fieldErr("bundle_digest", "%s, but the bundle's digest is %s", p.BundleDigest, got)
	}
	for _, f := range []struct{ name, v string }{
		{"certificate_identity", p.CertificateIdentity}, {"oidc_issuer", p.OIDCIssuer},
	} {
		if f.v != "" {
			if err := checkName(f.name, f.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// CollectionFailed is the data of TypeCollectionFailed.
type CollectionFailed struct {
	// Host is the host the collector runs on.
	Host string `json:"host"`
	// Collector names the source that failed (git, process, systemd,
	// codex, python, node, ...).
	Collector string `json:"collector"`
	// Target is what was being collected, when known.
	Target *Target `json:"target,omitempty"`
	// Reason classifies the failure: a lower-case token such as timeout,
	// unavailable, permission, too_large.
	Reason string `json:"reason"`
	// Message says what happened, for people. It must never hold collected
	// content (instruction text, environment values, tokens).
	Message string `json:"message"`
	// Retryable says whether the next collection may succeed unchanged.
	Retryable bool `json:"retryable"`
}

// Type is TypeCollectionFailed.
func (CollectionFailed) Type() string { return TypeCollectionFailed }

// Subject is the collector.
func (p CollectionFailed) Subject() string { return p.Collector }

// NATSSubject is rt.collect.failed.<host>.
func (p CollectionFailed) NATSSubject() string { return CollectFailedSubject(p.Host) }

// Validate checks the fields the schema cannot.
func (p CollectionFailed) Validate() error {
	if err := checkName("host", p.Host); err != nil {
		return err
	}
	if err := checkName("collector", p.Collector); err != nil {
		return err
	}
	if p.Target != nil {
		if err := p.Target.validate("target"); err != nil {
			return err
		}
	}
	if !isReasonToken(p.Reason) {
		return schemaErr("reason", "%q is not a lower-case token", p.Reason)
	}
	return checkMessage("message", p.Message)
}

// EventRejected is the data of TypeEventRejected, a dead-letter record: a
// message a consumer terminated because it will never handle it. The record
// names the message (stream and sequence) and why; it does not copy the
// data, which may hold anything, only its size and digest and the raw
// values of the identifying headers.
type EventRejected struct {
	// Stream and Consumer name where the message was consumed.
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	// OriginalSubject is the message's NATS subject.
	OriginalSubject string `json:"original_subject"`
	// StreamSequence is the message's sequence in Stream.
	StreamSequence uint64 `json:"stream_sequence"`
	// Deliveries counts the deliveries, the rejecting one included.
	Deliveries uint64 `json:"deliveries"`
	// Reason is the Reason of the rejection (ReasonPermanent for a
	// handler's own).
	Reason Reason `json:"reason"`
	// Error is the error text, cut to MaxMessageLength bytes.
	Error string `json:"error"`
	// Envelope holds the raw header values that identify the message,
	// each cut to 256 bytes, when present.
	Envelope Envelope `json:"envelope"`
	// DataSize and DataDigest ("sha256:<hex>") identify the data.
	DataSize   int    `json:"data_size"`
	DataDigest string `json:"data_digest"`
}

// Envelope holds raw header values of a rejected message.
type Envelope struct {
	ID          string `json:"id,omitempty"`
	Type        string `json:"type,omitempty"`
	Source      string `json:"source,omitempty"`
	Subject     string `json:"subject,omitempty"`
	SpecVersion string `json:"specversion,omitempty"`
	MsgID       string `json:"msg_id,omitempty"`
}

// Type is TypeEventRejected.
func (EventRejected) Type() string { return TypeEventRejected }

// Subject is <stream>:<stream-sequence>.
func (p EventRejected) Subject() string {
	return p.Stream + ":" + strconv.FormatUint(p.StreamSequence, 10)
}

// NATSSubject is rt.dlq.<stream>.<host>, the host of the original
// subject (DeadLetterSubject).
func (p EventRejected) NATSSubject() string { return DeadLetterSubject(p.Stream, p.OriginalSubject) }

// Validate checks the fields the schema cannot.
func (p EventRejected) Validate() error {
	if err := checkName("stream", p.Stream); err != nil {
		return err
	}
	if err := checkName("consumer", p.Consumer); err != nil {
		return err
	}
	if !ValidSubject(p.OriginalSubject) {
		return schemaErr("original_subject", "%q is not a NATS subject", p.OriginalSubject)
	}
	if p.StreamSequence == 0 || p.Deliveries == 0 {
		return schemaErr("stream_sequence", "stream_sequence and deliveries start at 1")
	}
	if !isReasonToken(string(p.Reason)) {
		return schemaErr("reason", "%q is not a lower-case token", p.Reason)
	}
	if err := checkMessage("error", p.Error); err != nil {
		return err
	}
	if p.DataSize < 0 {
		return schemaErr("data_size", "negative")
	}
	for _, f := range []struct{ name, v string }{
		{"id", p.Envelope.ID}, {"type", p.Envelope.Type}, {"source", p.Envelope.Source},
		{"subject", p.Envelope.Subject}, {"specversion", p.Envelope.SpecVersion}, {"msg_id", p.Envelope.MsgID},
	} {
		if utf8.RuneCountInString(f.v) > MaxEnvelopeValue {
			return schemaErr("envelope/"+f.name, "longer than %d characters", MaxEnvelopeValue)
		}
	}
	return checkDigest("data_digest", p.DataDigest)
}

// fieldError is a payload rule violation at a field; decoding turns it into
// an *Error with ReasonSchema for a rule the JSON Schema states (schema),
// else ReasonInvalidPayload.
type fieldError struct {
	field  string
	err    error
	schema bool
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

func fieldErr(field, format string, args ...any) error {
	return &fieldError{field: field, err: fmt.Errorf(format, args...)}
}

// schemaErr is fieldErr for a rule the JSON Schema states.
func schemaErr(field, format string, args ...any) error {
	return &fieldError{field: field, err: fmt.Errorf(format, args...), schema: true}
}

func checkDigest(field, v string) error {
	if !ValidDigest(v) {
		return schemaErr(field, "%q is not sha256:<64 lower-case hex digits>", v)
	}
	return nil
}

// checkName accepts a non-empty string of at most MaxNameLength bytes
// without control characters. The schema counts MaxNameLength in code
// points: a name within that but over in bytes breaks the payload's rule
// alone.
func checkName(field, v string) error {
	if err := nameProblem(v); err != nil {
		return &fieldError{field: field, err: err, schema: len(v) <= MaxNameLength || utf8.RuneCountInString(v) > MaxNameLength}
	}
	return nil
}

// nameProblem is checkName's verdict without the field: nil, or what is
// wrong with v.
func nameProblem(v string) error {
	if v == "" {
		return fmt.Errorf("empty")
	}
	if i := ControlIndex(v); i >= 0 {
		return fmt.Errorf("control character at byte %d", i)
	}
	if len(v) > MaxNameLength {
		return fmt.Errorf("longer than %d bytes", MaxNameLength)
	}
	return nil
}

func checkMessage(field, v string) error {
	if v == "" {
		return schemaErr(field, "empty")
	}
	if strings.TrimSpace(v) == "" {
		return fieldErr(field, "empty")
	}
	if len(v) > MaxMessageLength {
		// The schema counts code points.
		return &fieldError{field: field, err: fmt.Errorf("longer than %d bytes", MaxMessageLength), schema: utf8.RuneCountInString(v) > MaxMessageLength}
	}
	if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
		return fieldErr(field, "invalid UTF-8 or NUL")
	}
	return nil
}

func checkID(field, v string) error {
	if err := ValidID(v); err != nil {
		return &fieldError{field: field, err: err, schema: true}
	}
	return nil
}

// ControlIndex returns the byte index of the first invalid UTF-8 sequence or
// control character (U+0000-U+001F, U+007F-U+009F) in s, or -1.
func ControlIndex(s string) int {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return i // invalid UTF-8, not a real U+FFFD
			}
		case r < 0x20, 0x7F <= r && r <= 0x9F:
			return i
		}
	}
	return -1
}
