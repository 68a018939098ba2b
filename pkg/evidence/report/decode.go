package report

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// UnmarshalJSON reads a report strictly: no unknown or duplicate keys,
// scalar values, a side that is present exactly when it has a value.
//
// It also reads the shape runtimetruth wrote before its reports matched
// RuntimeTruth's (verdict.*.v1 events, verdict records stored then): a
// change with "change" (added, removed or modified) instead of "status",
// fields with their own "change" and bare before/after values, a missing
// side left out. That shape is read as the current one says the same
// thing: modified is changed, an added or removed kind has no fields.
// Validate holds what either shape decodes to to the current rules.
func (r *Report) UnmarshalJSON(b []byte) error {
	out, err := Parse(b, AnyShape)
	if err != nil {
		return err
	}
	*r = out
	return nil
}

// Shape is the JSON shape of a report's changes.
type Shape int

// The shapes Parse reads.
const (
	// AnyShape reads either shape (UnmarshalJSON).
	AnyShape Shape = iota
	// CurrentShape is RuntimeTruth's: "status", sides {"present": ...}.
	CurrentShape
	// LegacyShape is the shape runtimetruth wrote before
	// (verdict.*.v1): "change", bare before/after values.
	LegacyShape
)

// Parse reads a report strictly, as UnmarshalJSON does, its changes in
// the shape given.
func Parse(b []byte, shape Shape) (Report, error) {
	t, err := jsontree.Parse(b)
	if err != nil {
		return Report{}, fmt.Errorf("report: %w", err)
	}
	out, err := fromTree(t, shape)
	if err != nil {
		return Report{}, fmt.Errorf("report: %w", err)
	}
	return out, nil
}

func fromTree(t jsontree.Value, shape Shape) (Report, error) {
	var r Report
	m, err := members(t, "report", "changes", "protected", "report_schema_version", "status", "target")
	if err != nil {
		return r, err
	}
	v := m["report_schema_version"]
	n, err := v.Int64()
	if v.Kind != jsontree.Number || err != nil {
		return r, fmt.Errorf("report_schema_version: not an integer")
	}
	r.ReportSchemaVersion = int(n)
	st, err := text(m["status"], "status")
	if err != nil {
		return r, err
	}
	r.Status = Status(st)
	tm, err := members(m["target"], "target", "identifier", "kind")
	if err != nil {
		return r, err
	}
	if r.Target.Identifier, err = text(tm["identifier"], "target.identifier"); err != nil {
		return r, err
	}
	if r.Target.Kind, err = text(tm["kind"], "target.kind"); err != nil {
		return r, err
	}
	prot := m["protected"]
	if prot.Kind != jsontree.Array {
		return r, fmt.Errorf("protected: not an array")
	}
	r.Protected = make([]string, len(prot.Items))
	for i, p := range prot.Items {
		if r.Protected[i], err = text(p, "protected["+strconv.Itoa(i)+"]"); err != nil {
			return r, err
		}
	}
	ch := m["changes"]
	if ch.Kind != jsontree.Array {
		return r, fmt.Errorf("changes: not an array")
	}
	r.Changes = make([]Change, len(ch.Items))
	for i, c := range ch.Items {
		path := "changes[" + strconv.Itoa(i) + "]"
		_, legacy := c.Get("change")
		switch {
		case legacy && shape == CurrentShape:
			err = fmt.Errorf("%s: a change of the earlier shape (\"change\")", path)
		case !legacy && shape == LegacyShape:
			err = fmt.Errorf("%s: a change of the current shape, in a report of the earlier one", path)
		case legacy:
			r.Changes[i], err = legacyChange(c, path)
		default:
			r.Changes[i], err = change(c, path)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

// changeHead reads what a change of either shape starts with: an object
// of exactly the keys fields, kind and status (statusKey, "status" or the
// earlier shape's "change"), in that order of checks: kind a string,
// status a string, fields an array.
func changeHead(t jsontree.Value, path, statusKey string) (kind, status string, fields []jsontree.Value, err error) {
	keys := []string{"fields", "kind", statusKey}
	slices.Sort(keys) // members names the first missing key in this order
	m, err := members(t, path, keys...)
	if err != nil {
		return "", "", nil, err
	}
	if kind, err = text(m["kind"], path+".kind"); err != nil {
		return "", "", nil, err
	}
	if status, err = text(m[statusKey], path+"."+statusKey); err != nil {
		return "", "", nil, err
	}
	fs := m["fields"]
	if fs.Kind != jsontree.Array {
		return "", "", nil, fmt.Errorf("%s.fields: not an array", path)
	}
	return kind, status, fs.Items, nil
}

func change(t jsontree.Value, path string) (Change, error) {
	kind, st, fs, err := changeHead(t, path, "status")
	if err != nil {
		return Change{}, err
	}
	c := Change{Kind: kind, Status: diff.Status(st), Fields: make([]Field, len(fs))}
	for j, f := range fs {
		fp := path + ".fields[" + strconv.Itoa(j) + "]"
		fm, err := members(f, fp, "after", "before", "field")
		if err != nil {
			return c, err
		}
		if c.Fields[j].Field, err = text(fm["field"], fp+".field"); err != nil {
			return c, err
		}
		if c.Fields[j].Before, err = sideOf(fm["before"], fp+".before"); err != nil {
			return c, err
		}
		if c.Fields[j].After, err = sideOf(fm["after"], fp+".after"); err != nil {
			return c, err
		}
	}
	return c, nil
}

func sideOf(t jsontree.Value, path string) (Side, error) {
	if t.Kind != jsontree.Object {
		return Side{}, fmt.Errorf("%s: not an object", path)
	}
	p, ok := t.Get("present")
	if !ok || p.Kind != jsontree.Bool {
		return Side{}, fmt.Errorf("%s.present: missing or not a boolean", path)
	}
	want := 1
	if p.Bool {
		want = 2
	}
	v, hasValue := t.Get("value")
	if len(t.Members) != want || hasValue != p.Bool {
		if p.Bool {
			return Side{}, fmt.Errorf("%s: a present side has exactly present and value", path)
		}
		return Side{}, fmt.Errorf("%s: a missing side has present only", path)
	}
	if !p.Bool {
		return Missing, nil
	}
	val, err := snapshot.ScalarOf(v)
	if err != nil {
		return Side{}, fmt.Errorf("%s.value: %w", path, err)
	}
	return Present(val), nil
}

// legacyChange reads a change of the earlier shape, as the verdict v1
// schema has it: each field names itself and its change (added with an
// after value only, removed with a before value only, modified with
// both). An added or removed kind keeps no fields.
func legacyChange(t jsontree.Value, path string) (Change, error) {
	kind, st, fs, err := changeHead(t, path, "change")
	if err != nil {
		return Change{}, err
	}
	c := Change{Kind: kind, Fields: []Field{}}
	switch st {
	case "added":
		c.Status = diff.Added
	case "removed":
		c.Status = diff.Removed
	case "modified":
		c.Status = diff.Changed
	default:
		return c, fmt.Errorf("%s.change: %q is not added, removed or modified", path, st)
	}
	fields := make([]Field, len(fs))
	for j, f := range fs {
		if fields[j], err = legacyField(f, path+".fields["+strconv.Itoa(j)+"]"); err != nil {
			return c, err
		}
	}
	if c.Status == diff.Changed {
		c.Fields = fields
	}
	return c, nil
}

// legacyField reads a field of a change of the earlier shape.
func legacyField(f jsontree.Value, path string) (Field, error) {
	var out Field
	if f.Kind != jsontree.Object {
		return out, fmt.Errorf("%s: not an object", path)
	}
	var change string
	var hasField bool
	for _, fm := range f.Members {
		var err error
		switch fm.Key {
		case "field":
			hasField = true
			out.Field, err = text(fm.Value, path+".field")
		case "change":
			change, err = text(fm.Value, path+".change")
		case "before", "after":
			var v snapshot.Value
			if v, err = snapshot.ScalarOf(fm.Value); err == nil {
				if fm.Key == "before" {
					out.Before = Present(v)
				} else {
					out.After = Present(v)
				}
			}
		default:
			err = fmt.Errorf("unknown key %q", fm.Key)
		}
		if err != nil {
			return out, fmt.Errorf("%s.%s: %w", path, fm.Key, err)
		}
	}
	if !hasField {
		return out, fmt.Errorf("%s: missing key \"field\"", path)
	}
	want := map[string][2]bool{"added": {false, true}, "removed": {true, false}, "modified": {true, true}}
	sides, ok := want[change]
	if !ok {
		return out, fmt.Errorf("%s.change: %q is not added, removed or modified", path, change)
	}
	if out.Before.Present != sides[0] || out.After.Present != sides[1] {
		return out, fmt.Errorf("%s: a field %s has the wrong sides", path, change)
	}
	return out, nil
}

// members checks that t is an object with exactly the given keys.
func members(t jsontree.Value, path string, keys ...string) (map[string]jsontree.Value, error) {
	if t.Kind != jsontree.Object {
		return nil, fmt.Errorf("%s: not an object", path)
	}
	out := make(map[string]jsontree.Value, len(keys))
	for _, m := range t.Members {
		known := false
		for _, k := range keys {
			known = known || m.Key == k
		}
		if !known {
			return nil, fmt.Errorf("%s: unknown key %q", path, m.Key)
		}
		out[m.Key] = m.Value
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			return nil, fmt.Errorf("%s: missing key %q", path, k)
		}
	}
	return out, nil
}

func text(t jsontree.Value, path string) (string, error) {
	if t.Kind != jsontree.String {
		return "", fmt.Errorf("%s: not a string", path)
	}
	return t.Text, nil
}
