// Package report builds the versioned machine-readable verification report
// (report_schema_version 1) printed by --json, and publishes its JSON Schema.
//
// The report is RuntimeTruth's, byte for byte: the status, the baseline's
// target, the protected selectors and the structured changes. Each change
// names its evidence kind and its status (changed, added or removed) and
// lists its changed fields; each field has a before and an after side, an
// object that says whether the field is present and, when it is, its value:
//
//	{"after":{"present":true,"value":null},"before":{"present":false},"field":"branch"}
//
// A missing side is {"present":false}, distinct from a JSON null value; an
// added or removed kind has no fields ("fields":[]). RuntimeTruth's tests
// pin the changed-kind shape (test_verify_json_drift_report_preserves_structure);
// these two encodings are the reading of its documentation ("missing values
// remain distinct from JSON null"), as its code could not be read.
//
// The report runtimetruth wrote before it matched RuntimeTruth's (each
// change with a "change" of added, removed or modified, bare before/after
// values, a missing side left out) is still read by Report's UnmarshalJSON,
// for verdict.*.v1 events and verdict records stored before.
package report

import (
	_ "embed"
	"strconv"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/pyjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// SchemaVersion is the report_schema_version this package writes.
const SchemaVersion = 1

// Schema is the JSON Schema (draft 2020-12) of a report.
//
//go:embed report.schema.json
var Schema []byte

// Status is the verification outcome.
type Status string

// The outcomes a report can carry.
const (
	Pass  Status = "pass"
	Drift Status = "drift"
)

// Report is one verification report. Fields are declared in key order.
type Report struct {
	Changes             []Change `json:"changes"`
	Protected           []string `json:"protected"`
	ReportSchemaVersion int      `json:"report_schema_version"`
	Status              Status   `json:"status"`
	Target              Target   `json:"target"`
}

// Target is the baseline's target.
type Target struct {
	Identifier string `json:"identifier"`
	Kind       string `json:"kind"`
}

// Change is the change of one evidence kind: changed (with its changed
// fields), added or removed (with no fields).
type Change struct {
	Fields []Field     `json:"fields"`
	Kind   string      `json:"kind"`
	Status diff.Status `json:"status"`
}

// Field is the change of one data field.
type Field struct {
	After  Side   `json:"after"`
	Before Side   `json:"before"`
	Field  string `json:"field"`
}

// Side is one side of a field change: the field's value, or missing.
type Side struct {
	Present bool
	Value   snapshot.Value
}

// Missing is the side of a field absent from its snapshot.
var Missing = Side{}

// Present returns the side of a field that holds v.
func Present(v snapshot.Value) Side { return Side{Present: true, Value: v} }

// New builds the report of a (protected) comparison result.
func New(res *diff.Result, protected []diff.Selector) *Report {
	r := &Report{
		Changes:             make([]Change, 0, len(res.Changes)),
		Protected:           make([]string, len(protected)),
		ReportSchemaVersion: SchemaVersion,
		Status:              Pass,
		Target:              Target{Kind: res.Target.Kind, Identifier: res.Target.Identifier},
	}
	for i, s := range protected {
		r.Protected[i] = s.String()
	}
	if !res.Empty() {
		r.Status = Drift
	}
	for _, c := range res.Changes {
		ch := Change{Status: c.Status, Kind: c.Kind, Fields: []Field{}}
		if c.Status == diff.Changed {
			ch.Fields = make([]Field, len(c.Fields))
			for i, f := range c.Fields {
				ch.Fields[i] = Field{Field: f.Field, Before: side(f.Before, f.HasBefore), After: side(f.After, f.HasAfter)}
			}
		}
		r.Changes = append(r.Changes, ch)
	}
	return r
}

func side(v snapshot.Value, present bool) Side {
	if !present {
		return Missing
	}
	return Present(v)
}

// Marshal writes the report as compact JSON with sorted keys, as
// RuntimeTruth prints it (json.dumps with sort_keys: non-ASCII characters
// escaped).
func (r *Report) Marshal() ([]byte, error) {
	return pyjson.Marshal(r.Tree(), pyjson.Compact)
}

// Tree returns the report as a JSON document (the same document
// encoding/json produces from the struct).
func (r *Report) Tree() jsontree.Value {
	changes := make([]jsontree.Value, len(r.Changes))
	for i, c := range r.Changes {
		fields := make([]jsontree.Value, len(c.Fields))
		for j, f := range c.Fields {
			fields[j] = object(
				member("after", f.After.Tree()),
				member("before", f.Before.Tree()),
				member("field", str(f.Field)),
			)
		}
		changes[i] = object(
			member("fields", jsontree.Value{Kind: jsontree.Array, Items: fields}),
			member("kind", str(c.Kind)),
			member("status", str(string(c.Status))),
		)
	}
	protected := make([]jsontree.Value, len(r.Protected))
	for i, p := range r.Protected {
		protected[i] = str(p)
	}
	return object(
		member("changes", jsontree.Value{Kind: jsontree.Array, Items: changes}),
		member("protected", jsontree.Value{Kind: jsontree.Array, Items: protected}),
		member("report_schema_version", jsontree.Value{Kind: jsontree.Number, Text: strconv.Itoa(r.ReportSchemaVersion)}),
		member("status", str(string(r.Status))),
		member("target", object(
			member("identifier", str(r.Target.Identifier)),
			member("kind", str(r.Target.Kind)),
		)),
	)
}

// Tree returns the side as its JSON object.
func (s Side) Tree() jsontree.Value {
	if !s.Present {
		return object(member("present", jsontree.Value{Kind: jsontree.Bool}))
	}
	return object(member("present", jsontree.Value{Kind: jsontree.Bool, Bool: true}), member("value", s.Value.Tree()))
}

// MarshalJSON encodes the side as {"present":false} or
// {"present":true,"value":V}.
func (s Side) MarshalJSON() ([]byte, error) { return AppendSide(nil, s), nil }

// AppendSide appends the side's JSON object, as MarshalJSON writes it.
func AppendSide(dst []byte, s Side) []byte {
	if !s.Present {
		return append(dst, `{"present":false}`...)
	}
	dst = append(dst, `{"present":true,"value":`...)
	return append(s.Value.AppendJSON(dst), '}')
}

func str(s string) jsontree.Value { return jsontree.Value{Kind: jsontree.String, Text: s} }

func member(k string, v jsontree.Value) jsontree.Member { return jsontree.Member{Key: k, Value: v} }

func object(m ...jsontree.Member) jsontree.Value {
	return jsontree.Value{Kind: jsontree.Object, Members: m}
}
