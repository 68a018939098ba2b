package siem

import (
	"encoding/json"
	"fmt"
	"path"
)

// OCSFVersion is the OCSF schema version the records follow.
const OCSFVersion = "1.8.0"

// Product names what makes the records: runtimetruth at Version, on the
// host Hostname (the auditor's, or the CLI's for an export).
type Product struct {
	Version  string
	Hostname string
}

// classes are the OCSF classes' categories and names.
var classes = map[Class]struct {
	category      int
	name, catName string
}{
	ClassBase:       {0, "Base Event", "Uncategorized"},
	ClassEventLog:   {1, "Event Log Activity", "System Activity"},
	ClassCompliance: {2, "Compliance Finding", "Findings"},
	ClassDetection:  {2, "Detection Finding", "Findings"},
	ClassEntity:     {3, "Entity Management", "Identity & Access Management"},
	ClassAppError:   {6, "Application Error", "Application Activity"},
}

var severityNames = map[Severity]string{
	SeverityInformational: "Informational", SeverityLow: "Low", SeverityMedium: "Medium",
	SeverityHigh: "High", SeverityCritical: "Critical",
}

// ocsfRecord is an OCSF event of one of the classes: the base event's
// attributes and those of each class, each omitted where the class has
// none.
type ocsfRecord struct {
	ActivityID   int    `json:"activity_id"`
	ActivityName string `json:"activity_name,omitempty"`
	CategoryUID  int    `json:"category_uid"`
	CategoryName string `json:"category_name"`
	ClassUID     int    `json:"class_uid"`
	ClassName    string `json:"class_name"`
	TypeUID      int    `json:"type_uid"`
	Time         int64  `json:"time"`
	SeverityID   int    `json:"severity_id"`
	Severity     string `json:"severity"`
	Message      string `json:"message"`
	// StatusID is a finding's status (New, In Progress, Resolved).
	StatusID int    `json:"status_id,omitempty"`
	RawData  string `json:"raw_data,omitempty"`

	Metadata    ocsfMetadata     `json:"metadata"`
	Device      *ocsfDevice      `json:"device,omitempty"`
	Actor       *ocsfActor       `json:"actor,omitempty"`
	LogName     string           `json:"log_name,omitempty"`
	LogProvider string           `json:"log_provider,omitempty"`
	FindingInfo *ocsfFindingInfo `json:"finding_info,omitempty"`
	Compliance  *ocsfCompliance  `json:"compliance,omitempty"`
	IsAlert     *bool            `json:"is_alert,omitempty"`
	Evidences   []ocsfEvidence   `json:"evidences,omitempty"`
	Resources   []ocsfResource   `json:"resources,omitempty"`
	Entity      *ocsfEntity      `json:"entity,omitempty"`
	// Unmapped carries the audit chain's proof of the record.
	Unmapped ocsfUnmapped `json:"unmapped"`
}

type ocsfMetadata struct {
	UID            string      `json:"uid"`
	Version        string      `json:"version"`
	Product        ocsfProduct `json:"product"`
	LogName        string      `json:"log_name"`
	LoggedTime     int64       `json:"logged_time,omitempty"`
	CorrelationUID string      `json:"correlation_uid,omitempty"`
	Profiles       []string    `json:"profiles,omitempty"`
	IsTruncated    bool        `json:"is_truncated,omitempty"`
	Untruncated    int         `json:"untruncated_size,omitempty"`
}

type ocsfProduct struct {
	Name       string `json:"name"`
	VendorName string `json:"vendor_name"`
	Version    string `json:"version,omitempty"`
}

type ocsfDevice struct {
	Hostname string `json:"hostname"`
	TypeID   int    `json:"type_id"`
}

type ocsfActor struct {
	AppName string `json:"app_name"`
}

type ocsfFindingInfo struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	FirstSeenTime int64  `json:"first_seen_time,omitempty"`
	LastSeenTime  int64  `json:"last_seen_time,omitempty"`
}

type ocsfCompliance struct {
	StatusID  int      `json:"status_id"`
	Status    string   `json:"status"`
	Standards []string `json:"standards"`
	Control   string   `json:"control"`
}

type ocsfEvidence struct {
	File ocsfFile `json:"file"`
}

type ocsfFile struct {
	Name   string            `json:"name"`
	Path   string            `json:"path"`
	TypeID int               `json:"type_id"`
	Hashes []ocsfFingerprint `json:"hashes,omitempty"`
}

type ocsfFingerprint struct {
	AlgorithmID int    `json:"algorithm_id"`
	Algorithm   string `json:"algorithm"`
	Value       string `json:"value"`
}

type ocsfResource struct {
	UID      string `json:"uid"`
	Name     string `json:"name,omitempty"`
	Type     string `json:"type,omitempty"`
	Hostname string `json:"hostname,omitempty"`
}

type ocsfEntity struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	TypeID  int    `json:"type_id"`
	Version string `json:"version,omitempty"`
}

// ocsfUnmapped is what OCSF has no place for: the link (chain, seq,
// hash, prev, the CloudEvent), and the finding's details.
type ocsfUnmapped struct {
	Link
	Target string `json:"target,omitempty"`
	Reason string `json:"reason,omitempty"`
	Actor  string `json:"actor,omitempty"`
	// Changes are a detection's files by change, for files without a
	// digest (missing) too.
	Changes []File `json:"changed_files,omitempty"`
	Package string `json:"package,omitempty"`
}

// entityTypes are the OCSF managed_entity type_id of what an Entity
// Management record changes.
var entityTypes = map[string]int{"baseline": 5, "attestation": 5, "host key": 1}

// OCSF renders f as an OCSF 1.8.0 record (one JSON object).
func OCSF(f Finding, p Product) ([]byte, error) {
	c, ok := classes[f.Class]
	if !ok {
		return nil, fmt.Errorf("ocsf: no class %d", f.Class)
	}
	r := ocsfRecord{
		ActivityID: int(f.Activity), CategoryUID: c.category, CategoryName: c.catName,
		ClassUID: int(f.Class), ClassName: c.name, TypeUID: int(f.Class)*100 + int(f.Activity),
		Time: millis(f.Time), SeverityID: int(f.Severity), Severity: severityNames[f.Severity], Message: f.Message,
		Metadata: ocsfMetadata{
			UID: f.Link.EventID, Version: OCSFVersion, LogName: "runtimetruth audit chain", LoggedTime: millis(f.Stored),
			Product: ocsfProduct{Name: "runtimetruth", VendorName: "runtimetruth", Version: p.Version},
		},
		Unmapped: ocsfUnmapped{Link: f.Link, Target: f.Target, Reason: f.Reason, Actor: f.Actor, Package: f.Package},
		RawData:  string(f.Raw),
	}
	r.Metadata.IsTruncated, r.Metadata.Untruncated = f.Truncated, f.Untruncated
	if f.Host != "" {
		r.Device = &ocsfDevice{Hostname: f.Host}
	}
	switch f.Class {
	case ClassCompliance, ClassDetection:
		r.StatusID = findingStatus(f.Activity)
		r.FindingInfo = &ocsfFindingInfo{UID: f.UID, Title: f.Title, LastSeenTime: millis(f.Time)}
		if !f.EpisodeStart.IsZero() {
			r.FindingInfo.FirstSeenTime = millis(f.EpisodeStart)
		}
		r.Metadata.CorrelationUID = f.UID
		if f.Target != "" {
			r.Resources = []ocsfResource{{UID: f.Target, Type: "runtimetruth target", Hostname: f.Host}}
		}
	case ClassEventLog:
		r.Actor = &ocsfActor{AppName: "runtimetruth-auditor"}
		r.Device = &ocsfDevice{Hostname: p.Hostname}
		r.LogName, r.LogProvider = f.Link.Stream, "NATS JetStream"
	case ClassEntity:
		r.Entity = &ocsfEntity{Name: f.Entity, Type: f.EntityType, TypeID: entityTypes[f.EntityType], Version: f.EntityState}
	}
	if f.Class == ClassCompliance {
		r.Compliance = &ocsfCompliance{StatusID: int(f.Compliance), Status: complianceNames[f.Compliance],
			Standards: []string{"runtimetruth baseline"}, Control: f.Target}
	}
	if f.Class == ClassDetection {
		alert := true
		r.IsAlert = &alert
		for _, fl := range f.Files {
			file := ocsfFile{Name: path.Base(fl.Path), Path: fl.Path, TypeID: 1}
			if fl.SHA256 != "" {
				file.Hashes = []ocsfFingerprint{{AlgorithmID: 3, Algorithm: "SHA-256", Value: fl.SHA256}}
			}
			r.Evidences = append(r.Evidences, ocsfEvidence{File: file})
		}
		r.Unmapped.Changes = f.Files
	}
	if r.Device != nil && f.Class != ClassCompliance && f.Class != ClassDetection && f.Class != ClassEventLog {
		r.Metadata.Profiles = []string{"host"} // device comes with the host profile outside findings and system activity
	}
	return json.Marshal(r)
}

var complianceNames = map[Compliance]string{CompliancePass: "Pass", ComplianceWarning: "Warning", ComplianceFail: "Fail"}

// findingStatus is a finding's status_id: New when created, In Progress
// when updated, Resolved when closed.
func findingStatus(a Activity) int {
	switch a {
	case ActivityCreate:
		return 1
	case ActivityClose:
		return 4
	}
	return 2
}
