package ecscheck

import (
	_ "embed" // the facts file
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Version is the ECS release the embedded facts describe.
const Version = "9.4.0"

//go:embed facts/ecs-9.4.0.json
var factsJSON []byte

// factsFile is the embedded facts file, as internal/genfacts writes it.
type factsFile struct {
	Version            string                `json:"version"`
	Tag                string                `json:"tag"`
	Source             string                `json:"source"`
	ExpectedEventTypes map[string][]string   `json:"expected_event_types"`
	Fields             map[string]fieldFacts `json:"fields"`
}

// fieldFacts are the facts of one ECS field.
type fieldFacts struct {
	Type       string   `json:"type"`
	Array      bool     `json:"array"`
	Required   bool     `json:"required"`
	ObjectType string   `json:"object_type"`
	Pattern    string   `json:"pattern"`
	Allowed    []string `json:"allowed"`
	Expected   []string `json:"expected"` // suggested values, not enforced
	Multi      []string `json:"multi_fields"`
}

// field is a field ready for validation.
type field struct {
	name       string
	ecsType    string
	kind       kind
	array      bool
	objectKind kind // kind of an object's members when object_type is set
	objectType string
	pattern    *regexp.Regexp
	allowed    []string // sorted
	multi      []string
	children   bool // some ECS field lies below this one
}

// schema is the facts, indexed for validation. It is built once and never
// modified afterwards.
type schema struct {
	version  string
	fields   map[string]*field
	parents  map[string]bool // proper ancestors of ECS fields ("host", "host.os")
	topLevel map[string]bool // first segments of ECS field names
	required []string        // sorted
	expected map[string][]string
}

// loadSchema parses the embedded facts once.
var loadSchema = sync.OnceValues(func() (*schema, error) {
	return parseSchema(factsJSON)
})

func parseSchema(data []byte) (*schema, error) {
	var ff factsFile
	if err := json.Unmarshal(data, &ff); err != nil {
		return nil, fmt.Errorf("ecscheck: parse embedded facts: %w", err)
	}
	if ff.Version != Version {
		return nil, fmt.Errorf("ecscheck: embedded facts are for ECS %q, want %q", ff.Version, Version)
	}
	s := &schema{
		version:  ff.Version,
		fields:   make(map[string]*field, len(ff.Fields)),
		parents:  make(map[string]bool),
		topLevel: make(map[string]bool),
		expected: ff.ExpectedEventTypes,
	}
	for name, f := range ff.Fields {
		fl, err := newField(name, f)
		if err != nil {
			return nil, fmt.Errorf("ecscheck: embedded facts: %w", err)
		}
		s.fields[name] = fl
		s.addAncestors(name)
		if f.Required {
			s.required = append(s.required, name)
		}
	}
	for name, fl := range s.fields {
		fl.children = s.parents[name]
	}
	slices.Sort(s.required)
	return s, nil
}

func newField(name string, f fieldFacts) (*field, error) {
	k, err := kindOf(f.Type)
	if err != nil {
		return nil, fmt.Errorf("field %s: %w", name, err)
	}
	fl := &field{
		name:       name,
		ecsType:    f.Type,
		kind:       k,
		array:      f.Array,
		objectType: f.ObjectType,
		allowed:    slices.Sorted(slices.Values(f.Allowed)),
		multi:      f.Multi,
	}
	if f.ObjectType != "" {
		if fl.objectKind, err = kindOf(f.ObjectType); err != nil {
			return nil, fmt.Errorf("field %s: object_type: %w", name, err)
		}
	}
	if f.Pattern != "" {
		if fl.pattern, err = regexp.Compile(f.Pattern); err != nil {
			return nil, fmt.Errorf("field %s: pattern: %w", name, err)
		}
	}
	return fl, nil
}

func (s *schema) addAncestors(name string) {
	first, _, _ := strings.Cut(name, ".")
	s.topLevel[first] = true
	for i := strings.IndexByte(name, '.'); i >= 0; i = nextDot(name, i) {
		s.parents[name[:i]] = true
	}
}

// nextDot returns the index of the first '.' in name after index i, or -1.
func nextDot(name string, i int) int {
	j := strings.IndexByte(name[i+1:], '.')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}
