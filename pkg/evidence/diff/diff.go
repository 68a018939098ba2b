package diff

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// Errors returned by Compare.
var (
	ErrTargetMismatch  = errors.New("snapshot targets differ")
	ErrUnsupportedKind = errors.New("unsupported evidence kind")
	ErrProvenance      = errors.New("evidence provenance differs")
)

// Status says how a kind or a field changed.
type Status string

// The change statuses of an evidence kind, RuntimeTruth's words.
const (
	Added   Status = "added"
	Removed Status = "removed"
	Changed Status = "changed"
)

// FieldChange is one changed data field. A side that is absent (the field is
// missing from that snapshot) has its Has flag false, distinct from null.
type FieldChange struct {
	Field     string
	Before    snapshot.Value
	After     snapshot.Value
	HasBefore bool
	HasAfter  bool
}

// KindChange is the change of one evidence kind. For an added or removed
// kind, Fields lists every field of the record that exists.
type KindChange struct {
	Kind   string
	Status Status
	Fields []FieldChange
}

// Result is the semantic difference between two snapshots.
type Result struct {
	Target  snapshot.Target
	Changes []KindChange
}

// Empty reports whether nothing changed.
func (r *Result) Empty() bool { return len(r.Changes) == 0 }

// Compare returns the semantic changes from before to after.
func Compare(before, after *snapshot.Snapshot) (*Result, error) {
	if before.Target != after.Target {
		return nil, fmt.Errorf("%w: %s != %s", ErrTargetMismatch, before.Target, after.Target)
	}
	// Each snapshot's records by kind, in comparison order.
	var buf [32]*snapshot.Record
	var b, a []*snapshot.Record
	if n := len(kinds); 2*n <= len(buf) {
		b, a = buf[:n], buf[n:2*n]
	} else {
		b, a = make([]*snapshot.Record, n), make([]*snapshot.Record, n)
	}
	if err := index(before, b); err != nil {
		return nil, err
	}
	if err := index(after, a); err != nil {
		return nil, err
	}
	res := &Result{Target: before.Target}
	for i, k := range kinds {
		rb, ra := b[i], a[i]
		switch {
		case rb == nil && ra == nil:
			continue
		case rb == nil:
			res.Changes = append(res.Changes, KindChange{Kind: k.Name, Status: Added, Fields: fieldsOf(nil, ra.Data)})
		case ra == nil:
			res.Changes = append(res.Changes, KindChange{Kind: k.Name, Status: Removed, Fields: fieldsOf(rb.Data, nil)})
		default:
			if rb.Plane != ra.Plane || rb.Source != ra.Source {
				return nil, fmt.Errorf("%w for %s; schema-v1 provenance changes are not comparable yet", ErrProvenance, snapshot.Quote(k.Name))
			}
			if fields := fieldsOf(rb.Data, ra.Data); len(fields) > 0 {
				res.Changes = append(res.Changes, KindChange{Kind: k.Name, Status: Changed, Fields: fields})
			}
		}
	}
	return res, nil
}

// kinds are the supported kinds in comparison order.
var kinds = snapshot.Kinds()

// index puts each record of s at its kind's place in byKind (len(kinds)
// long, all nil).
func index(s *snapshot.Snapshot, byKind []*snapshot.Record) error {
	for i := range s.Evidence {
		r := &s.Evidence[i]
		k := snapshot.KindIndex(r.Kind)
		if k < 0 {
			return fmt.Errorf("%w %s", ErrUnsupportedKind, snapshot.Quote(r.Kind))
		}
		if byKind[k] != nil {
			return fmt.Errorf("duplicate evidence kind %s", snapshot.Quote(r.Kind))
		}
		byKind[k] = r
	}
	return nil
}

// fieldsOf lists the fields that differ between two data maps (either may be
// nil), sorted by name; nil when none does.
func fieldsOf(before, after snapshot.Data) []FieldChange {
	if same(before, after) {
		return nil
	}
	keys := make([]string, 0, len(before)+len(after))
	for k := range before {
		keys = append(keys, k)
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []FieldChange
	for _, k := range keys {
		vb, hb := before[k]
		va, ha := after[k]
		if hb && ha && vb == va {
			continue
		}
		out = append(out, FieldChange{Field: k, Before: vb, After: va, HasBefore: hb, HasAfter: ha})
	}
	return out
}

// same reports whether two data maps hold the same fields and values, the
// common case, decided without listing and sorting the keys.
func same(before, after snapshot.Data) bool {
	if len(before) != len(after) {
		return false
	}
	for k, vb := range before {
		if va, ok := after[k]; !ok || va != vb {
			return false
		}
	}
	return true
}

// Render formats the result as RuntimeTruth's human diff: one upper-case
// section per changed kind, a blank line between sections, and
// "No runtime changes." when nothing changed. There is no trailing newline.
// Field names and values are printed as they are, except that characters
// that are not graphic (control characters, terminal escapes, format
// characters) are escaped (snapshot.Printable), so that a value cannot
// forge lines or drive the terminal; RuntimeTruth prints them verbatim.
func (r *Result) Render() string {
	if r.Empty() {
		return "No runtime changes."
	}
	var sb strings.Builder
	for i, c := range r.Changes {
		if i > 0 {
			sb.WriteString("\n\n")
		}
		k, _ := snapshot.LookupKind(c.Kind)
		sb.WriteString(k.Header)
		if c.Status != Changed {
			sb.WriteString("\n  evidence: ")
			sb.WriteString(string(c.Status))
			continue
		}
		for _, f := range c.Fields {
			sb.WriteString("\n  ")
			sb.WriteString(snapshot.Printable(f.Field))
			sb.WriteString(": ")
			sb.WriteString(render(f.Before, f.HasBefore))
			sb.WriteString(" -> ")
			sb.WriteString(render(f.After, f.HasAfter))
		}
	}
	return sb.String()
}

func render(v snapshot.Value, present bool) string {
	if !present {
		return "<missing>"
	}
	return snapshot.Printable(v.String())
}
