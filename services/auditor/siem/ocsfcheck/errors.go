package ocsfcheck

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// invalidError is the refusal of a record: the faults the validator
// found, each with the JSON Pointer of the value at fault. It wraps the
// validator's *jsonschema.ValidationError, which has them all in a tree.
type invalidError struct {
	faults []string
	err    *jsonschema.ValidationError
}

func (e *invalidError) Error() string {
	return fmt.Sprintf("ocsfcheck: record is not valid OCSF %s: %s", Version, strings.Join(e.faults, "; "))
}

func (e *invalidError) Unwrap() error { return e.err }

// refusal turns the validator's error into an invalidError.
func refusal(err error) error {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("ocsfcheck: validate: %w", err)
	}
	var faults []string
	for _, f := range faultsOf(verr) {
		if !slices.Contains(faults, f) {
			faults = append(faults, f)
		}
	}
	return &invalidError{faults: faults, err: verr}
}

// faultsOf lists the faults of a validation error tree: its leaves, save
// that the failure of a constraint (anyOf or oneOf of members being
// present) is told as one fault, and a refused member as unknown.
func faultsOf(e *jsonschema.ValidationError) []string {
	at := fmt.Sprintf("at '%s'", pointer(e.InstanceLocation))
	switch k := e.ErrorKind.(type) {
	case *kind.FalseSchema:
		return []string{at + ": unknown attribute (not defined here, or of a profile metadata.profiles does not name)"}
	case *kind.AnyOf:
		if names, ok := missing(e.Causes); ok {
			return []string{fmt.Sprintf("%s: at least one of %s is required", at, names)}
		}
	case *kind.OneOf:
		if names, ok := missing(e.Causes); ok && len(k.Subschemas) == 0 {
			return []string{fmt.Sprintf("%s: exactly one of %s is required", at, names)}
		}
	case *kind.Pattern:
		// The regexes of ip_t and others are long: name the type instead.
		if _, typ, ok := strings.Cut(e.SchemaURL, "/$defs/"+typeDef("")); ok {
			return []string{fmt.Sprintf("%s: %q does not match the regex of %s", at, k.Got, typ)}
		}
	}
	if len(e.Causes) == 0 {
		return []string{e.Error()}
	}
	var out []string
	for _, c := range e.Causes {
		out = append(out, faultsOf(c)...)
	}
	return out
}

// missing returns the members the causes of a constraint's failure miss,
// if that is all they say.
func missing(causes []*jsonschema.ValidationError) (string, bool) {
	var names []string
	for _, c := range causes {
		r, ok := c.ErrorKind.(*kind.Required)
		if !ok || len(c.Causes) > 0 {
			return "", false
		}
		for _, m := range r.Missing {
			names = append(names, "'"+m+"'")
		}
	}
	return strings.Join(names, ", "), len(names) > 0
}

// pointer is the JSON Pointer of an instance location.
func pointer(location []string) string {
	var b strings.Builder
	for _, token := range location {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(token))
	}
	return b.String()
}
