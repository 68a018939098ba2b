package events

import (
	"strconv"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
)

// A verdict's data, written directly: a verifier sends a verdict per
// snapshot. The bytes are the ones encoding/json writes with HTML escaping
// off (marshal: passed through json.HTMLEscape, they are json.Marshal's),
// without the reflection; verdict_test.go holds the two to the same bytes
// (TestMarshalVerdictIsMarshal, FuzzMarshalVerdict). The data is checked
// without running the whole verdict schema each time: Validate holds every
// member of the verdict to what the schema requires, and report.Validate
// the report to the schema's report rules
// (schemas/verdict.v2.schema.json#/properties/report, with the report
// schema it refers to; package report's tests hold Validate to that
// schema, this package's hold NewMsg of a verdict to the reference codec's
// JSON Schema run).

// marshalVerdict encodes v as marshal does, without reflection
// (AppendJSON).
func marshalVerdict(v Verdict) []byte { return v.AppendJSON(make([]byte, 0, 512)) }

// checkVerdictReport is validateData for a verdict that passed Validate.
func checkVerdictReport(s *Spec, p Payload, data []byte) error {
	if len(data) > MaxDataSize {
		return invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	v, ok := p.(Verdict)
	if !ok || s.SchemaURI != schemaBase+"verdict/v2.json" {
		return validateData(s, data)
	}
	if v.Report == nil {
		return nil
	}
	if err := v.Report.Validate(); err != nil {
		return &Error{Reason: ReasonSchema, Field: "/report", Err: err}
	}
	return nil
}

// AppendJSON appends v as its event's data carries it: as encoding/json
// writes it with HTML escaping off (passed through json.HTMLEscape, the
// bytes are json.Marshal's). It is the one encoder of a verdict, for
// records that hold one (the verifier's).
func (v Verdict) AppendJSON(dst []byte) []byte {
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
