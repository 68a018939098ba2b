package events

import (
	"strconv"
	"unicode/utf8"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
)

// The verdict's JSON written directly, byte for byte as marshal (encoding/
// json, HTML escaping off) writes it, without reflection: a verifier
// encodes a verdict per snapshot. jsonenc_test.go holds the two to the
// same bytes.

// AppendJSONString appends s as encoding/json writes a string with HTML
// escaping off (json.Encoder.SetEscapeHTML(false)), as every string of an
// event's data is written: '"', '\\' and control characters escaped,
// invalid UTF-8 replaced by \ufffd, U+2028 and U+2029 escaped. Passing the
// result through json.HTMLEscape gives what json.Marshal writes.
func AppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendVerdict appends v as marshal writes it.
func appendVerdict(dst []byte, v Verdict) []byte {
	dst = append(dst, `{"status":`...)
	dst = AppendJSONString(dst, string(v.Status))
	dst = append(dst, `,"host":`...)
	dst = AppendJSONString(dst, v.Host)
	dst = append(dst, `,"target":{"kind":`...)
	dst = AppendJSONString(dst, v.Target.Kind)
	dst = append(dst, `,"identifier":`...)
	dst = AppendJSONString(dst, v.Target.Identifier)
	dst = append(dst, `},"evidence_id":`...)
	dst = AppendJSONString(dst, v.EvidenceID)
	dst = append(dst, `,"snapshot_digest":`...)
	dst = AppendJSONString(dst, v.SnapshotDigest)
	if v.BaselineDigest != "" {
		dst = append(dst, `,"baseline_digest":`...)
		dst = AppendJSONString(dst, v.BaselineDigest)
	}
	if v.Report != nil {
		dst = append(dst, `,"report":`...)
		dst = appendReport(dst, v.Report)
	}
	if v.Error != "" {
		dst = append(dst, `,"error":`...)
		dst = AppendJSONString(dst, v.Error)
	}
	if v.LastSeen != "" {
		dst = append(dst, `,"last_seen":`...)
		dst = AppendJSONString(dst, v.LastSeen)
	}
	return append(dst, '}')
}

// appendReport appends r as encoding/json writes a report.Report.
func appendReport(dst []byte, r *report.Report) []byte {
	dst = append(dst, `{"changes":`...)
	dst = appendArray(dst, r.Changes, appendChange)
	dst = append(dst, `,"protected":`...)
	dst = appendArray(dst, r.Protected, AppendJSONString)
	dst = append(dst, `,"report_schema_version":`...)
	dst = strconv.AppendInt(dst, int64(r.ReportSchemaVersion), 10)
	dst = append(dst, `,"status":`...)
	dst = AppendJSONString(dst, string(r.Status))
	dst = append(dst, `,"target":{"identifier":`...)
	dst = AppendJSONString(dst, r.Target.Identifier)
	dst = append(dst, `,"kind":`...)
	dst = AppendJSONString(dst, r.Target.Kind)
	return append(dst, "}}"...)
}

// appendArray appends xs as encoding/json writes a slice: null when nil,
// else each element as elem writes it, in brackets, comma-separated.
func appendArray[T any](dst []byte, xs []T, elem func([]byte, T) []byte) []byte {
	if xs == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i, x := range xs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = elem(dst, x)
	}
	return append(dst, ']')
}

func appendChange(dst []byte, c report.Change) []byte {
	dst = append(dst, `{"fields":`...)
	dst = appendArray(dst, c.Fields, appendField)
	dst = append(dst, `,"kind":`...)
	dst = AppendJSONString(dst, c.Kind)
	dst = append(dst, `,"status":`...)
	dst = AppendJSONString(dst, string(c.Status))
	return append(dst, '}')
}

// appendField appends f as encoding/json writes it: each side as its
// MarshalJSON (report.AppendSide) writes it, copied as is.
func appendField(dst []byte, f report.Field) []byte {
	dst = append(dst, `{"after":`...)
	dst = report.AppendSide(dst, f.After)
	dst = append(dst, `,"before":`...)
	dst = report.AppendSide(dst, f.Before)
	dst = append(dst, `,"field":`...)
	dst = AppendJSONString(dst, f.Field)
	return append(dst, '}')
}
