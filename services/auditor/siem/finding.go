package siem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// Class is what a record reports, as OCSF classes it; ECS and CEF say the
// same in their terms.
type Class int

// The classes (OCSF class_uid).
const (
	// ClassBase: an event no finding is about (evidence collected).
	ClassBase Class = 0
	// ClassEventLog: the audit log itself lost or restarted a stream
	// (a gap, a reset).
	ClassEventLog Class = 1008
	// ClassCompliance: a target checked against its baseline (a verdict).
	ClassCompliance Class = 2003
	// ClassDetection: installed code modified, or evidence refused.
	ClassDetection Class = 2004
	// ClassEntity: a baseline, its attestation or a host's keys changed.
	ClassEntity Class = 3004
	// ClassAppError: a message no consumer could read, or a collector
	// that could not collect.
	ClassAppError Class = 6008
)

// Activity is the record's activity (OCSF activity_id of its class).
type Activity int

// Activities of the finding classes (2003, 2004).
const (
	ActivityCreate Activity = 1
	ActivityUpdate Activity = 2
	ActivityClose  Activity = 3
)

// Activities of Entity Management (3004).
const (
	ActivityEntityCreate   Activity = 1
	ActivityEntityUpdate   Activity = 3
	ActivityEntityDelete   Activity = 4
	ActivityEntityEnroll   Activity = 6
	ActivityEntityUnenroll Activity = 7
)

// ActivityGeneralError is Application Error's (6008) activity.
const ActivityGeneralError Activity = 1

// ActivityOther is the base event's "other" activity (99).
const ActivityOther Activity = 99

// Severity is OCSF's severity_id; CEF and ECS scale it (cefSeverity,
// ecsSeverity).
type Severity int

// Severities.
const (
	SeverityInformational Severity = 1
	SeverityLow           Severity = 2
	SeverityMedium        Severity = 3
	SeverityHigh          Severity = 4
	SeverityCritical      Severity = 5
)

// Compliance is a compliance finding's status (OCSF compliance.status_id).
type Compliance int

// Compliance statuses: a pass, a drift (fail), an error or a silence
// (warning: the target could not be judged).
const (
	CompliancePass    Compliance = 1
	ComplianceWarning Compliance = 2
	ComplianceFail    Compliance = 3
)

// File is a changed file of a detection (runnable.modified).
type File struct {
	// Path is relative to the package's environment; Change is
	// modified, missing or added; SHA256 the hex digest on disk now
	// (none for a missing file).
	Path, Change, SHA256 string
}

// Finding is one link of the audit chain as a SIEM record says it: the
// one mapping OCSF, ECS and CEF render, so the three cannot disagree.
type Finding struct {
	Class    Class
	Activity Activity
	Severity Severity
	// Title is a one-line name of what happened; Message says it with its
	// details.
	Title, Message string
	// Time is the event's time; Stored when the stream stored it.
	Time, Stored time.Time

	// Host and Target ("<kind>:<identifier>") are what the record is
	// about, when it names them.
	Host, Target string
	// Actor made the change (Entity); Reason is a refusal's or
	// rejection's reason.
	Actor, Reason string

	// UID identifies the finding across records (findings): a host and
	// target's episode (Episodes), or the change itself.
	UID string
	// Compliance is a compliance finding's status (every detection is an
	// alert: OCSF is_alert, ECS event.kind alert).
	Compliance Compliance
	// EpisodeStart is when the compliance finding's episode began.
	EpisodeStart time.Time
	// Files are a detection's changed files; Package its package URL.
	Files   []File
	Package string
	// Entity names what an entity-management record changed (a baseline
	// of a target, a host's keys) and its new digest or state.
	Entity, EntityType, EntityState string

	// Raw is the event's data as linked (OCSF raw_data, ECS
	// event.original): a drift's whole report, say.
	Raw json.RawMessage
	// Truncated says Render left Raw out (or cut Message) to keep the
	// record within its bound; Untruncated is the size it had.
	Truncated   bool
	Untruncated int

	// Link is where the record is in the audit chain, and what it is
	// there: the proof a SIEM record can be checked with.
	Link Link
}

// Link is a record's place in the audit chain and its event's identity.
type Link struct {
	Chain      string `json:"chain"`
	Seq        uint64 `json:"seq"`
	Hash       string `json:"hash"`
	Prev       string `json:"prev"`
	EventID    string `json:"event_id"`
	EventType  string `json:"event_type"`
	Source     string `json:"source"`
	Stream     string `json:"stream"`
	StreamSeq  uint64 `json:"stream_seq"`
	Subject    string `json:"subject,omitempty"`
	Rejected   bool   `json:"rejected,omitempty"`
	Superseded string `json:"superseded_by,omitempty"`
}

// refusals are the reasons evidence is refused as not authentic (the
// verifier's dead letters, the auditor's own checks): detections.
var refusals = map[events.Reason]bool{
	"clock_skew": true, "replayed": true, "unsigned": true, link.ReasonBadSignature: true, link.ReasonClaimMismatch: true,
	"key_changed": true, "not_enrolled": true, "revoked": true,
}

// Map maps a link to its finding, ep keeping the host and target
// episodes of compliance findings across the links it is given in chain
// order (nil: each verdict on its own, as if no episode were open). A
// link whose event data does not read as its type's (a tampered log) is
// an application error naming why: every link gives a record.
func Map(r link.Record, ep *Episodes) Finding {
	m := r.Meta
	f := Finding{
		Time: m.Time, Stored: m.Stored, Host: m.Host, Target: m.Target, Reason: m.Reason,
		Link: Link{Chain: r.Chain, Seq: r.Seq, Hash: r.Hash, Prev: r.Prev, EventID: m.ID, EventType: m.Type,
			Source: m.Source, Stream: m.Stream, StreamSeq: m.StreamSeq, Subject: m.Subject, Rejected: m.Rejected},
	}
	if f.Time.IsZero() {
		f.Time = m.Stored
	}
	typ := m.Type
	if s, ok := events.Lookup(typ); ok && s.SupersededBy != "" {
		typ, f.Link.Superseded = s.SupersededBy, s.SupersededBy
	}
	data, err := dataOf(r.Event)
	if err != nil {
		return unreadable(f, err)
	}
	f.Raw = data
	if typ == events.TypeEvidenceCollected && !m.Rejected {
		// The most frequent event, and the one whose data (a whole
		// snapshot) costs most to read: what it says is in the link's
		// columns, and the snapshot rides in Raw.
		f.Class, f.Activity, f.Severity = ClassBase, ActivityOther, SeverityInformational
		f.Title = "Evidence collected"
		f.Message = fmt.Sprintf("evidence of %s collected on %s", m.Target, m.Host)
		return f
	}
	p, err := events.DecodeData(typ, data)
	if err != nil && m.Rejected {
		// The auditor's own record of a stream gap or reset names the
		// stream's every subject (">"), which event.rejected's schema
		// does not take: read as the auditor wrote it.
		var rec events.EventRejected
		if json.Unmarshal(data, &rec) == nil && (rec.Reason == link.ReasonGap || rec.Reason == link.ReasonReset) {
			p, err = rec, nil
		}
	}
	if err != nil {
		return unreadable(f, err)
	}
	switch p := p.(type) {
	case events.Verdict:
		verdict(&f, p, ep)
	case events.RunnableModified:
		modified(&f, p)
	case events.EventRejected:
		rejected(&f, p, m)
	case events.CollectionFailed:
		f.Class, f.Activity, f.Severity = ClassAppError, ActivityGeneralError, SeverityLow
		f.Title = "Collection failed"
		f.Message = fmt.Sprintf("collector %s on %s could not collect: %s: %s", p.Collector, p.Host, p.Reason, p.Message)
		f.Reason = p.Reason
	case events.BaselineChanged:
		entity(&f, "baseline", p.Target.String(), p.Actor)
		f.Activity = map[events.BaselineChange]Activity{
			events.BaselineCreated: ActivityEntityCreate, events.BaselineUpdated: ActivityEntityUpdate, events.BaselineRemoved: ActivityEntityDelete,
		}[p.Change]
		f.EntityState = p.Digest
		f.Title = "Baseline " + string(p.Change)
		f.Message = fmt.Sprintf("baseline of %s %s by %s", p.Target, p.Change, orNone(p.Actor))
		if p.Digest != "" {
			f.Message += ": " + p.Digest
		}
		if p.PreviousDigest != "" {
			f.Message += " (was " + p.PreviousDigest + ")"
		}
	case events.AttestationCreated:
		entity(&f, "attestation", p.Target.String(), p.CertificateIdentity)
		f.Activity, f.EntityState = ActivityEntityCreate, p.BaselineDigest
		f.Title = "Baseline attested"
		f.Message = fmt.Sprintf("baseline %s of %s signed", p.BaselineDigest, p.Target)
		if p.CertificateIdentity != "" {
			f.Message += " by " + p.CertificateIdentity + " (issuer " + p.OIDCIssuer + ")"
		}
	case events.HostKeyChanged:
		hostKeys(&f, p)
	default:
		return unreadable(f, fmt.Errorf("no mapping of %T", p))
	}
	return f
}

// dataOf is the data of a link's event: the value of its top-level
// "data" member, the other members skipped, not decoded.
func dataOf(event []byte) (json.RawMessage, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(event))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("the link's event is not a JSON object")
	}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, fmt.Errorf("the link's event: %w", err)
		}
		if name.String() != "data" {
			if err := dec.SkipValue(); err != nil {
				return nil, fmt.Errorf("the link's event: %w", err)
			}
			continue
		}
		v, err := dec.ReadValue()
		if err != nil {
			return nil, fmt.Errorf("the link's event: data: %w", err)
		}
		return json.RawMessage(bytes.Clone(v)), nil
	}
	return nil, fmt.Errorf("the link's event has no data")
}

// unreadable is the application error of a link whose event does not
// read.
func unreadable(f Finding, err error) Finding {
	f.Class, f.Activity, f.Severity = ClassAppError, ActivityGeneralError, SeverityMedium
	f.Title = "Unreadable audit record"
	f.Message = "the linked event does not read: " + err.Error()
	return f
}

func verdict(f *Finding, v events.Verdict, ep *Episodes) {
	f.Class, f.Host, f.Target = ClassCompliance, v.Host, v.Target.String()
	open := ep.observe(f.Host, f.Target, v.Status != events.StatusPass, f.Link.EventID, f.Time)
	f.UID, f.EpisodeStart, f.Activity = open.uid, open.start, open.activity
	switch v.Status {
	case events.StatusPass:
		f.Compliance, f.Severity = CompliancePass, SeverityInformational
		f.Title = "Target matches its baseline"
		f.Message = fmt.Sprintf("%s on %s matches baseline %s", f.Target, f.Host, v.BaselineDigest)
	case events.StatusDrift:
		f.Compliance, f.Severity = ComplianceFail, SeverityHigh
		f.Title = "Target drifted from its baseline"
		f.Message = fmt.Sprintf("%s on %s drifted from baseline %s: %s", f.Target, f.Host, v.BaselineDigest, changes(v))
	case events.StatusError:
		f.Compliance, f.Severity = ComplianceWarning, SeverityMedium
		f.Title = "Target could not be verified"
		f.Message = fmt.Sprintf("%s on %s could not be verified: %s", f.Target, f.Host, v.Error)
	case events.StatusStale:
		f.Compliance, f.Severity = ComplianceWarning, SeverityMedium
		f.Title = "Target silent"
		f.Message = fmt.Sprintf("%s on %s sent no authentic evidence: %s", f.Target, f.Host, v.Error)
	}
}

// changes names a drift's changed kinds and fields, the first few.
func changes(v events.Verdict) string {
	if v.Report == nil || len(v.Report.Changes) == 0 {
		return "no change reported"
	}
	const shown = 8
	var names []string
	total := 0
	for _, c := range v.Report.Changes {
		if len(c.Fields) == 0 {
			total++
			if len(names) < shown {
				names = append(names, c.Kind+" "+string(c.Status))
			}
			continue
		}
		for _, fd := range c.Fields {
			total++
			if len(names) < shown {
				names = append(names, c.Kind+"."+fd.Field)
			}
		}
	}
	s := fmt.Sprintf("%d change", total)
	if total != 1 {
		s += "s"
	}
	s += ": " + strings.Join(names, ", ")
	if total > shown {
		s += ", …"
	}
	return s
}

func modified(f *Finding, p events.RunnableModified) {
	f.Class, f.Activity, f.Severity = ClassDetection, ActivityCreate, SeverityHigh
	f.Host, f.Package = p.Host, events.PackageURL(p.Ecosystem, p.Package, p.Version)
	f.UID = events.FindingIDs.ID("modified", p.Host, p.Environment, f.Package, p.ChangeDigest)
	f.Title = "Installed code modified"
	f.Message = fmt.Sprintf("%s in %s on %s differs from its %s: %d file", f.Package, p.Environment, p.Host, p.Baseline, len(p.ChangedFiles))
	if len(p.ChangedFiles) != 1 {
		f.Message += "s"
	}
	for _, c := range p.ChangedFiles {
		f.Files = append(f.Files, File{Path: c.Path, Change: string(c.Change), SHA256: strings.TrimPrefix(c.Observed, "sha256:")})
	}
}

func rejected(f *Finding, p events.EventRejected, m link.Meta) {
	f.Reason = string(p.Reason)
	if f.Host == "" {
		f.Host = link.DeadLetterHost(m.NATSSubject)
	}
	if f.Host == "=" { // a subject naming no host (link.HostOf)
		f.Host = ""
	}
	if refusals[p.Reason] {
		f.Class, f.Activity, f.Severity = ClassDetection, ActivityCreate, SeverityHigh
		f.UID = events.FindingIDs.ID("refused", f.Host, f.Reason, f.Link.EventID)
		f.Title = "Evidence refused"
		f.Message = fmt.Sprintf("evidence of %s refused (%s): %s", orNone(f.Host), p.Reason, p.Error)
		return
	}
	switch p.Reason {
	case link.ReasonGap, link.ReasonReset:
		f.Class, f.Severity = ClassEventLog, SeverityHigh
		f.Activity = map[events.Reason]Activity{link.ReasonGap: eventLogDelete, link.ReasonReset: eventLogClear}[p.Reason]
		f.Title = "Audit stream " + strings.TrimPrefix(string(p.Reason), "stream_")
		f.Message = p.Error
		return
	}
	f.Class, f.Activity, f.Severity = ClassAppError, ActivityGeneralError, SeverityMedium
	f.Title = "Message rejected"
	f.Message = fmt.Sprintf("message %s:%d of %s rejected by %s (%s): %s", p.Stream, p.StreamSequence, orNone(f.Host), p.Consumer, p.Reason, p.Error)
}

// Activities of Event Log Activity (1008): a gap is records deleted
// before they were read, a reset the log cleared.
const (
	eventLogClear  Activity = 1
	eventLogDelete Activity = 2
)

func entity(f *Finding, typ, name, actor string) {
	f.Class, f.Severity, f.EntityType, f.Entity, f.Actor = ClassEntity, SeverityInformational, typ, name, actor
}

// hostKeys maps a change of a host's keys: an enrollment when a key is
// enrolled, an unenrollment when keys are only revoked, a creation when a
// key is only seen (pending); low severity but for a key only seen.
func hostKeys(f *Finding, p events.HostKeyChanged) {
	entity(f, "host key", p.Host, p.Actor)
	f.Host = p.Host
	parts := make([]string, len(p.Keys))
	states := map[events.KeyState]bool{}
	for i, k := range p.Keys {
		from := string(k.Previous)
		if from == "" {
			from = "new"
		}
		parts[i] = fmt.Sprintf("%s %s → %s", k.Key, from, k.State)
		states[k.State] = true
	}
	switch {
	case states[events.KeyEnrolled]:
		f.Activity, f.Severity, f.EntityState = ActivityEntityEnroll, SeverityLow, string(events.KeyEnrolled)
	case states[events.KeyRevoked]:
		f.Activity, f.Severity, f.EntityState = ActivityEntityUnenroll, SeverityLow, string(events.KeyRevoked)
	default:
		f.Activity, f.EntityState = ActivityEntityCreate, string(events.KeyPending)
	}
	f.Title = "Host keys changed"
	f.Message = fmt.Sprintf("keys of host %s changed by %s: %s", p.Host, p.Actor, strings.Join(parts, "; "))
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// millis is t in milliseconds since the epoch (OCSF's timestamp_t); 0
// for the zero time.
func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
