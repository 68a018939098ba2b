package siem

import (
	"encoding/json"
	"path"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// ECSVersion is the Elastic Common Schema version of the documents.
const ECSVersion = "9.4.0"

// ecsDoc is an ECS document as Elasticsearch ingests it. Fields ECS has
// no place for live under "runtimetruth", ECS's way for custom fields.
type ecsDoc struct {
	Timestamp string      `json:"@timestamp"`
	ECS       ecsVersion  `json:"ecs"`
	Message   string      `json:"message"`
	Tags      []string    `json:"tags,omitempty"`
	Event     ecsEvent    `json:"event"`
	Host      *ecsHost    `json:"host,omitempty"`
	Rule      *ecsRule    `json:"rule,omitempty"`
	File      *ecsFile    `json:"file,omitempty"`
	Package   *ecsPackage `json:"package,omitempty"`
	User      *ecsUser    `json:"user,omitempty"`
	Error     *ecsError   `json:"error,omitempty"`
	Related   *ecsRelated `json:"related,omitempty"`
	Observer  ecsObserver `json:"observer"`
	Custom    ecsCustom   `json:"runtimetruth"`
}

type ecsVersion struct {
	Version string `json:"version"`
}

type ecsEvent struct {
	Kind     string   `json:"kind"`
	Category []string `json:"category,omitempty"`
	Type     []string `json:"type,omitempty"`
	Action   string   `json:"action"`
	Outcome  string   `json:"outcome,omitempty"`
	Severity int      `json:"severity"`
	ID       string   `json:"id"`
	Created  string   `json:"created,omitempty"`
	Start    string   `json:"start,omitempty"`
	Hash     string   `json:"hash"`
	Sequence uint64   `json:"sequence"`
	Dataset  string   `json:"dataset"`
	Module   string   `json:"module"`
	Provider string   `json:"provider,omitempty"`
	Reason   string   `json:"reason,omitempty"`
	Original string   `json:"original,omitempty"`
}

type ecsHost struct {
	Hostname string `json:"hostname"`
	Name     string `json:"name"`
}

type ecsRule struct {
	Name     string `json:"name"`
	UUID     string `json:"uuid,omitempty"`
	Category string `json:"category"`
	Ruleset  string `json:"ruleset"`
}

type ecsFile struct {
	Name string   `json:"name"`
	Path string   `json:"path"`
	Hash *ecsHash `json:"hash,omitempty"`
}

type ecsHash struct {
	SHA256 string `json:"sha256"`
}

type ecsPackage struct {
	Reference string `json:"reference"`
}

type ecsUser struct {
	Name string `json:"name"`
}

type ecsError struct {
	Message string `json:"message"`
}

type ecsRelated struct {
	Hash  []string `json:"hash,omitempty"`
	Hosts []string `json:"hosts,omitempty"`
	User  []string `json:"user,omitempty"`
}

type ecsObserver struct {
	Hostname string `json:"hostname,omitempty"`
	Product  string `json:"product"`
	Vendor   string `json:"vendor"`
	Version  string `json:"version,omitempty"`
	Type     string `json:"type"`
}

// ecsCustom is the custom fields: the link and what ECS has no
// field for.
type ecsCustom struct {
	Link
	ClassUID   int    `json:"class_uid"`
	FindingUID string `json:"finding_uid,omitempty"`
	Target     string `json:"target,omitempty"`
	Compliance string `json:"compliance,omitempty"`
	Files      []File `json:"changed_files,omitempty"`
}

// ecsCategorization is a class's event.kind, category and type, per
// activity where it tells them apart.
func ecsCategorization(f Finding) (kind string, category, typ []string, outcome string) {
	switch f.Class {
	case ClassCompliance:
		outcome = map[Compliance]string{CompliancePass: "success", ComplianceFail: "failure", ComplianceWarning: "unknown"}[f.Compliance]
		return "state", []string{"configuration"}, []string{"info"}, outcome
	case ClassDetection:
		if len(f.Files) > 0 {
			return "alert", []string{"file", "intrusion_detection"}, []string{"change", "info"}, ""
		}
		return "alert", []string{"intrusion_detection"}, []string{"denied"}, ""
	case ClassEntity:
		cat := "configuration"
		if f.EntityType == "host key" {
			cat = "iam"
		}
		t := map[Activity]string{
			ActivityEntityCreate: "creation", ActivityEntityUpdate: "change", ActivityEntityDelete: "deletion",
			ActivityEntityEnroll: "change", ActivityEntityUnenroll: "change",
		}[f.Activity]
		return "event", []string{cat}, []string{t}, "success"
	case ClassBase:
		return "state", []string{"configuration"}, []string{"info"}, ""
	}
	return "event", nil, nil, "failure" // an error, a gap in the log
}

// ECS renders f as an ECS 9.4 document (one JSON object).
func ECS(f Finding, p Product) ([]byte, error) {
	kind, category, typ, outcome := ecsCategorization(f)
	d := ecsDoc{
		Timestamp: rfc3339(f.Time), ECS: ecsVersion{ECSVersion}, Message: f.Message,
		Event: ecsEvent{Kind: kind, Category: category, Type: typ, Outcome: outcome, Action: action(f.Link.EventType, f.Link.Rejected),
			Severity: int(f.Severity), ID: f.Link.EventID, Created: rfc3339(f.Stored), Hash: f.Link.Hash, Sequence: f.Link.Seq,
			Dataset: "runtimetruth.audit", Module: "runtimetruth", Provider: f.Link.Source, Reason: f.Reason},
		Observer: ecsObserver{Hostname: p.Hostname, Product: "runtimetruth", Vendor: "runtimetruth", Version: p.Version, Type: "auditor"},
		Custom:   ecsCustom{Link: f.Link, ClassUID: int(f.Class), FindingUID: f.UID, Target: f.Target, Files: f.Files},
	}
	if !f.EpisodeStart.IsZero() {
		d.Event.Start = rfc3339(f.EpisodeStart)
	}
	d.Event.Original = string(f.Raw)
	if f.Truncated {
		d.Tags = []string{"truncated"}
	}
	related := ecsRelated{}
	if f.Host != "" {
		d.Host = &ecsHost{Hostname: f.Host, Name: f.Host}
		related.Hosts = []string{f.Host}
	}
	if f.Class == ClassCompliance {
		d.Rule = &ecsRule{Name: f.Target, UUID: f.UID, Category: "baseline", Ruleset: "runtimetruth"}
		d.Custom.Compliance = complianceNames[f.Compliance]
	}
	for _, fl := range f.Files {
		if fl.SHA256 != "" {
			related.Hash = append(related.Hash, fl.SHA256)
		}
	}
	if len(f.Files) == 1 { // ECS has one file per document: the others are in runtimetruth.changed_files
		fl := f.Files[0]
		d.File = &ecsFile{Name: path.Base(fl.Path), Path: fl.Path}
		if fl.SHA256 != "" {
			d.File.Hash = &ecsHash{SHA256: fl.SHA256}
		}
	}
	if f.Package != "" {
		d.Package = &ecsPackage{Reference: f.Package}
	}
	if f.Actor != "" {
		d.User = &ecsUser{Name: f.Actor}
		related.User = []string{f.Actor}
	}
	if f.Class == ClassAppError || f.Class == ClassEventLog {
		d.Error = &ecsError{Message: f.Message}
	}
	if len(related.Hash)+len(related.Hosts)+len(related.User) > 0 {
		d.Related = &related
	}
	return json.Marshal(d)
}

// action is event.action: the event type without prefix and version,
// dots made dashes ("verdict-drift"), or "rejected" for a rejection.
func action(typ string, rejected bool) string {
	if rejected {
		return "rejected"
	}
	t := strings.TrimPrefix(typ, events.TypePrefix)
	if i := strings.LastIndex(t, ".v"); i > 0 {
		t = t[:i]
	}
	return strings.ReplaceAll(t, ".", "-")
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}
