package siem

import (
	"path"
	"strconv"
	"strings"
)

// CEF renders f as a CEF:0 event (ArcSight Common Event Format, one line):
// the header CEF:0|runtimetruth|runtimetruth|version|signature|name|
// severity| followed by key=value extensions. Header fields escape
// backslash and pipe, extension values backslash, equals, CR and LF, as
// the format's specification says; no value holds a raw line break.
//
// A space follows the header's last pipe: liblognorm 2.0.6 (Debian
// bookworm's, behind rsyslog's mmnormalize) drops the first character of
// the first extension key otherwise (liblognorm issue #363), and parsers
// of the format skip the space.
//
// The link rides in labeled custom fields: cs1 chain, cn1 seq, cs2 hash,
// cs3 prev, cs4 target, cs5 finding uid, cs6 event type.
func CEF(f Finding, p Product) []byte {
	var b strings.Builder
	b.WriteString("CEF:0|runtimetruth|runtimetruth|")
	b.WriteString(cefHeader(p.Version))
	b.WriteByte('|')
	b.WriteString(cefHeader(signature(f)))
	b.WriteByte('|')
	b.WriteString(cefHeader(f.Title))
	b.WriteByte('|')
	b.WriteString(strconv.Itoa(cefSeverity(f.Severity)))
	b.WriteString("| ")
	ext := [][2]string{
		{"rt", strconv.FormatInt(millis(f.Time), 10)},
		{"externalId", f.Link.EventID},
		{"cat", classes[f.Class].name},
		{"act", cefActivity(f)},
		{"msg", f.Message},
		{"dvchost", f.Host},
		{"suser", f.Actor},
		{"reason", f.Reason},
		{"deviceProcessName", f.Link.Source},
		{"cs1Label", "chain"}, {"cs1", f.Link.Chain},
		{"cn1Label", "seq"}, {"cn1", strconv.FormatUint(f.Link.Seq, 10)},
		{"cs2Label", "hash"}, {"cs2", f.Link.Hash},
		{"cs3Label", "prev"}, {"cs3", f.Link.Prev},
		{"cs4Label", "target"}, {"cs4", f.Target},
		{"cs5Label", "findingUid"}, {"cs5", f.UID},
		{"cs6Label", "eventType"}, {"cs6", f.Link.EventType},
	}
	if f.Class == ClassCompliance {
		ext = append(ext, [2]string{"outcome", complianceNames[f.Compliance]})
	}
	if len(f.Files) > 0 { // CEF has one file per event: the first; msg counts them
		fl := f.Files[0]
		ext = append(ext, [2]string{"fname", path.Base(fl.Path)}, [2]string{"filePath", fl.Path}, [2]string{"fileHash", fl.SHA256})
	}
	first := true
	for _, kv := range ext {
		if kv[1] == "" {
			continue
		}
		if !first {
			b.WriteByte(' ')
		}
		first = false
		b.WriteString(kv[0])
		b.WriteByte('=')
		b.WriteString(cefValue(kv[1]))
	}
	return []byte(b.String())
}

// signature is the header's Device Event Class ID: the event type without
// prefix and version ("verdict.drift"), or "rejected.<reason>".
func signature(f Finding) string {
	if f.Link.Rejected {
		return "rejected." + f.Reason
	}
	return strings.ReplaceAll(action(f.Link.EventType, false), "-", ".")
}

// cefSeverity scales a severity to CEF's 0–10: Low 0–3, Medium 4–6,
// High 7–8, Very-High 9–10.
func cefSeverity(s Severity) int {
	switch s {
	case SeverityInformational:
		return 1
	case SeverityLow:
		return 3
	case SeverityMedium:
		return 5
	case SeverityHigh:
		return 8
	case SeverityCritical:
		return 10
	}
	return 0
}

// cefActivity names the activity: create, update, close, ….
func cefActivity(f Finding) string {
	switch f.Class {
	case ClassCompliance, ClassDetection:
		return map[Activity]string{ActivityCreate: "create", ActivityUpdate: "update", ActivityClose: "close"}[f.Activity]
	case ClassEntity:
		return map[Activity]string{ActivityEntityCreate: "create", ActivityEntityUpdate: "update", ActivityEntityDelete: "delete",
			ActivityEntityEnroll: "enroll", ActivityEntityUnenroll: "unenroll"}[f.Activity]
	case ClassEventLog:
		return map[Activity]string{eventLogClear: "clear", eventLogDelete: "delete"}[f.Activity]
	}
	return ""
}

// cefHeader escapes a header field: backslash and pipe; a line break is a
// space (a header is one line).
var cefHeaderEscaper = strings.NewReplacer(`\`, `\\`, `|`, `\|`, "\r\n", " ", "\n", " ", "\r", " ")

func cefHeader(s string) string { return cefHeaderEscaper.Replace(strings.ToValidUTF8(s, "\uFFFD")) }

// cefValue escapes an extension value: backslash, equals, CR and LF.
var cefValueEscaper = strings.NewReplacer(`\`, `\\`, `=`, `\=`, "\r\n", `\n`, "\n", `\n`, "\r", `\r`)

func cefValue(s string) string { return cefValueEscaper.Replace(strings.ToValidUTF8(s, "\uFFFD")) }
