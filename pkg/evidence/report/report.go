// Package report builds the versioned machine-readable verification report
// (report_schema_version 1) printed by --json, and publishes its JSON Schema.
//
// The report carries the status, the baseline's target, the protected
// selectors and the structured changes. A field missing from one side has no
// "before" or "after" key at all, which is distinct from a JSON null value.
package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
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

// Change is the change of one evidence kind.
type Change struct {
	Change diff.Status `json:"change"`
	Fields []Field     `json:"fields"`
	Kind   string      `json:"kind"`
}

// Field is the change of one data field; a nil side is missing.
type Field struct {
	After  *snapshot.Value `json:"after,omitempty"`
	Before *snapshot.Value `json:"before,omitempty"`
	Change diff.Status     `json:"change"`
	Field  string          `json:"field"`
}

// New builds the report of a (protected) comparison result.
func New(res *diff.Result, protected []diff.Selector) *Report {
	r := &Report{
		Changes:             []Change{},
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
		ch := Change{Change: c.Status, Kind: c.Kind, Fields: make([]Field, len(c.Fields))}
		for i, f := range c.Fields {
			fld := Field{Change: f.Status(), Field: f.Field}
			if f.HasBefore {
				fld.Before = &f.Before
			}
			if f.HasAfter {
				fld.After = &f.After
			}
			ch.Fields[i] = fld
		}
		r.Changes = append(r.Changes, ch)
	}
	return r
}

// Marshal writes the report as compact JSON with sorted keys, as
// RuntimeTruth prints it.
func (r *Report) Marshal() ([]byte, error) {
	return pyjson.Marshal(r.Tree(), pyjson.Compact)
}

// Tree returns the report as a JSON document (the same document
// encoding/json produces from the struct).
func (r *Report) Tree() jsontree.Value {
	str := func(s string) jsontree.Value { return jsontree.Value{Kind: jsontree.String, Text: s} }
	member := func(k string, v jsontree.Value) jsontree.Member { return jsontree.Member{Key: k, Value: v} }
	changes := make([]jsontree.Value, len(r.Changes))
	for i, c := range r.Changes {
		fields := make([]jsontree.Value, len(c.Fields))
		for j, f := range c.Fields {
			m := make([]jsontree.Member, 0, 4)
			if f.After != nil {
				m = append(m, member("after", f.After.Tree()))
			}
			if f.Before != nil {
				m = append(m, member("before", f.Before.Tree()))
			}
			m = append(m, member("change", str(string(f.Change))), member("field", str(f.Field)))
			fields[j] = jsontree.Value{Kind: jsontree.Object, Members: m}
		}
		changes[i] = jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
			member("change", str(string(c.Change))),
			member("fields", jsontree.Value{Kind: jsontree.Array, Items: fields}),
			member("kind", str(c.Kind)),
		}}
	}
	protected := make([]jsontree.Value, len(r.Protected))
	for i, p := range r.Protected {
		protected[i] = str(p)
	}
	return jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
		member("changes", jsontree.Value{Kind: jsontree.Array, Items: changes}),
		member("protected", jsontree.Value{Kind: jsontree.Array, Items: protected}),
		member("report_schema_version", jsontree.Value{Kind: jsontree.Number, Text: strconv.Itoa(r.ReportSchemaVersion)}),
		member("status", str(string(r.Status))),
		member("target", jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
			member("identifier", str(r.Target.Identifier)),
			member("kind", str(r.Target.Kind)),
		}}),
	}}
}

// UnmarshalJSON decodes a field change keeping a null side (present, JSON
// null) distinct from a missing one (nil).
func (f *Field) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*f = Field{}
	side := func(key string) (*snapshot.Value, error) {
		r, ok := raw[key]
		if !ok {
			return nil, nil
		}
		v := new(snapshot.Value)
		return v, v.UnmarshalJSON(r)
	}
	var err error
	if f.Before, err = side("before"); err != nil {
		return fmt.Errorf("field before: %w", err)
	}
	if f.After, err = side("after"); err != nil {
		return fmt.Errorf("field after: %w", err)
	}
	if err := json.Unmarshal(raw["change"], &f.Change); err != nil {
		return fmt.Errorf("field change: %w", err)
	}
	if err := json.Unmarshal(raw["field"], &f.Field); err != nil {
		return fmt.Errorf("field name: %w", err)
	}
	return nil
}
