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
// non-empty protected selectors, the change statuses, fields only (and
// always) for a changed kind, and a field present on one side at least. It is the producer's check, at a small fraction of
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
		case c.Fields == nil:
			return fmt.Errorf("%w: changes[%d]: fields is null", ErrInvalid, i)
		}
		switch c.Status {
		case diff.Added, diff.Removed:
			if len(c.Fields) > 0 {
				return fmt.Errorf("%w: changes[%d]: an %s kind with %d fields", ErrInvalid, i, c.Status, len(c.Fields))
			}
		case diff.Changed:
			if len(c.Fields) == 0 {
				return fmt.Errorf("%w: changes[%d]: a changed kind without fields", ErrInvalid, i)
			}
		default:
			return fmt.Errorf("%w: changes[%d]: status %q", ErrInvalid, i, c.Status)
		}
		for j, f := range c.Fields {
			if !f.Before.Present && !f.After.Present {
				return fmt.Errorf("%w: changes[%d].fields[%d]: missing on both sides", ErrInvalid, i, j)
			}
		}
	}
	return nil
}
