package report

import (
	"errors"
	"fmt"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
)

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("invalid report")

// Validate checks r against the rules of Schema that its Go type does not
// already guarantee, so that a report passing Validate marshals to a
// document the schema accepts (and one failing it to a document the schema
// refuses): the schema version, the status and its changes (none for
// pass, some for drift), non-empty target and kind names, distinct
// non-empty protected selectors, the change names, and which sides each
// field change carries. It is the producer's check, at a small fraction of
// a JSON Schema validation's cost.
func (r *Report) Validate() error {
	switch {
	case r.ReportSchemaVersion != SchemaVersion:
		return fmt.Errorf("%w: report_schema_version %d", ErrInvalid, r.ReportSchemaVersion)
	case r.Target.Kind == "" || r.Target.Identifier == "":
		return fmt.Errorf("%w: target %q:%q", ErrInvalid, r.Target.Kind, r.Target.Identifier)
	case r.Protected == nil:
		return fmt.Errorf("%w: protected is null", ErrInvalid)
	case r.Changes == nil:
		return fmt.Errorf("%w: changes is null", ErrInvalid)
	}
	switch r.Status {
	case Pass:
		if len(r.Changes) > 0 {
			return fmt.Errorf("%w: pass with %d changes", ErrInvalid, len(r.Changes))
		}
	case Drift:
		if len(r.Changes) == 0 {
			return fmt.Errorf("%w: drift without changes", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: status %q", ErrInvalid, r.Status)
	}
	for i, p := range r.Protected {
		if p == "" {
			return fmt.Errorf("%w: protected[%d] is empty", ErrInvalid, i)
		}
		for _, q := range r.Protected[:i] {
			if p == q {
				return fmt.Errorf("%w: protected %q twice", ErrInvalid, p)
			}
		}
	}
	for i, c := range r.Changes {
		switch {
		case c.Kind == "":
			return fmt.Errorf("%w: changes[%d]: empty kind", ErrInvalid, i)
		case !validStatus(c.Change):
			return fmt.Errorf("%w: changes[%d]: change %q", ErrInvalid, i, c.Change)
		case c.Fields == nil:
			return fmt.Errorf("%w: changes[%d]: fields is null", ErrInvalid, i)
		}
		for j, f := range c.Fields {
			var ok bool
			switch f.Change {
			case diff.Added:
				ok = f.After != nil && f.Before == nil
			case diff.Removed:
				ok = f.Before != nil && f.After == nil
			case diff.Modified:
				ok = f.Before != nil && f.After != nil
			default:
				return fmt.Errorf("%w: changes[%d].fields[%d]: change %q", ErrInvalid, i, j, f.Change)
			}
			if !ok {
				return fmt.Errorf("%w: changes[%d].fields[%d]: a %s field with before %t, after %t", ErrInvalid, i, j,
					f.Change, f.Before != nil, f.After != nil)
			}
		}
	}
	return nil
}

func validStatus(s diff.Status) bool {
	return s == diff.Added || s == diff.Removed || s == diff.Modified
}
