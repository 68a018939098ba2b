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
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	t, err := jsontree.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	return pyjson.Marshal(t, pyjson.Compact)
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
