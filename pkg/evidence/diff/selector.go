package diff

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// ErrSelector is wrapped by every selector error.
var ErrSelector = errors.New("invalid selector")

// MaxSelectorLen bounds a selector's length.
const MaxSelectorLen = 4096

// Selector protects a whole evidence kind (Field empty) or one exact field.
type Selector struct {
	Kind  string
	Field string
}

// String returns the selector as written: kind or kind.field.
func (s Selector) String() string {
	if s.Field == "" {
		return s.Kind
	}
	return s.Kind + "." + s.Field
}

// ParseSelector parses "<kind>" or "<kind>.<field>", where kind is a supported
// evidence kind (the longest one that matches) and field is the rest of the
// string verbatim: it may contain dots, colons and slashes, as in
// "codex.instructions.source:/srv/agent/AGENTS.md". There are no wildcards.
func ParseSelector(s string) (Selector, error) {
	switch {
	case s == "":
		return Selector{}, fmt.Errorf("%w: empty selector", ErrSelector)
	case len(s) > MaxSelectorLen:
		return Selector{}, fmt.Errorf("%w: selector longer than %d bytes", ErrSelector, MaxSelectorLen)
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }) >= 0:
		return Selector{}, fmt.Errorf("%w: %s contains control characters or invalid UTF-8", ErrSelector, snapshot.Quote(s))
	}
	best := ""
	for _, k := range snapshot.Kinds() {
		if (s == k.Name || strings.HasPrefix(s, k.Name+".")) && len(k.Name) > len(best) {
			best = k.Name
		}
	}
	if best == "" {
		return Selector{}, fmt.Errorf("%w: unknown selector %s: not a supported evidence kind or kind.field", ErrSelector, snapshot.Quote(s))
	}
	if s == best {
		return Selector{Kind: best}, nil
	}
	if len(s) == len(best)+1 {
		return Selector{}, fmt.Errorf("%w: unknown selector %s: empty field after the kind", ErrSelector, snapshot.Quote(s))
	}
	return Selector{Kind: best, Field: s[len(best)+1:]}, nil
}

// ParseSelectors parses each selector and removes duplicates, keeping the
// first occurrence.
func ParseSelectors(list []string) ([]Selector, error) {
	out := make([]Selector, 0, len(list))
	seen := make(map[Selector]bool, len(list))
	for _, s := range list {
		sel, err := ParseSelector(s)
		if err != nil {
			return nil, err
		}
		if !seen[sel] {
			seen[sel] = true
			out = append(out, sel)
		}
	}
	return out, nil
}

// Check reports an error unless the selector names evidence present in at
// least one of the two snapshots: an unavailable kind or a field in neither
// snapshot is an error rather than a silent pass.
func (s Selector) Check(before, after *snapshot.Snapshot) error {
	rb, okb := before.Record(s.Kind)
	ra, oka := after.Record(s.Kind)
	if !okb && !oka {
		what := "an evidence field"
		if s.Field == "" {
			what = "an evidence kind"
		}
		return fmt.Errorf("%w: %s does not match %s: evidence kind %s is not in either snapshot", ErrSelector, snapshot.Quote(s.String()), what, snapshot.Quote(s.Kind))
	}
	if s.Field == "" {
		return nil
	}
	if okb {
		if _, ok := rb.Data[s.Field]; ok {
			return nil
		}
	}
	if oka {
		if _, ok := ra.Data[s.Field]; ok {
			return nil
		}
	}
	return fmt.Errorf("%w: %s does not match an evidence field: field %s is not in the %s evidence of either snapshot", ErrSelector, snapshot.Quote(s.String()), snapshot.Quote(s.Field), s.Kind)
}

// Protect narrows the result to the selected kinds and fields. With no
// selectors the result is returned unchanged (strict full verification).
func (r *Result) Protect(sels []Selector) *Result {
	if len(sels) == 0 {
		return r
	}
	out := &Result{Target: r.Target}
	for _, c := range r.Changes {
		whole := false
		fields := map[string]bool{}
		for _, s := range sels {
			if s.Kind != c.Kind {
				continue
			}
			if s.Field == "" {
				whole = true
				break
			}
			fields[s.Field] = true
		}
		if whole {
			out.Changes = append(out.Changes, c)
			continue
		}
		if len(fields) == 0 {
			continue
		}
		kept := KindChange{Kind: c.Kind, Status: c.Status}
		for _, f := range c.Fields {
			if fields[f.Field] {
				kept.Fields = append(kept.Fields, f)
			}
		}
		if len(kept.Fields) > 0 {
			// A protected field of an added or removed record is reported as
			// that field's change.
			kept.Status = Changed
			out.Changes = append(out.Changes, kept)
		}
	}
	return out
}

// Verify is verification as `runtimetruth verify` and the verifier service
// perform it: compare baseline with current, check that every selector
// names evidence present in one of the two snapshots, then narrow the
// result to the selectors. An empty result is a PASS.
func Verify(baseline, current *snapshot.Snapshot, sels []Selector) (*Result, error) {
	res, err := Compare(baseline, current)
	if err != nil {
		return nil, err
	}
	for _, s := range sels {
		if err := s.Check(baseline, current); err != nil {
			return nil, err
		}
	}
	return res.Protect(sels), nil
}
