package ecscheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Problem is one way in which a document departs from ECS.
type Problem struct {
	// Field is the dotted name of the offending field, such as
	// "event.kind" or "labels.env".
	Field string
	// Reason says what is wrong with it.
	Reason string
}

func (p Problem) String() string { return p.Field + ": " + p.Reason }

// Error is the error Validate returns for a document that is not valid
// ECS. It lists every problem found, sorted by field.
type Error struct {
	// Version is the ECS release the document was checked against.
	Version  string
	Problems []Problem
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("ecscheck: not a valid ECS %s document: %s", e.Version, strings.Join(parts, "; "))
}

// Option adjusts Validate.
type Option func(*config)

// WithCustom names prefixes under which custom (non-ECS) fields live, such
// as "runtimetruth": every field at or below runtimetruth is accepted,
// whatever its value. A prefix may be dotted ("acme.audit"); its first
// segment must not be an ECS field set or field, since ECS wants custom
// fields in a namespace of their own.
func WithCustom(prefixes ...string) Option {
	return func(c *config) { c.custom = append(c.custom, prefixes...) }
}

// WithVersion requires ecs.version to be exactly version. Without it any
// ecs.version string is accepted (the field is still required). Pass
// Version to require the release the facts describe.
func WithVersion(version string) Option {
	return func(c *config) {
		c.version = version
		c.versionSet = true
	}
}

type config struct {
	custom     []string
	version    string
	versionSet bool
}

// isCustom reports whether path is at or below a custom prefix.
func (c *config) isCustom(path string) bool {
	for _, p := range c.custom {
		if path == p || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}

// isCustomParent reports whether path lies above a custom prefix, as
// "acme" above "acme.audit".
func (c *config) isCustomParent(path string) bool {
	for _, p := range c.custom {
		if strings.HasPrefix(p, path+".") {
			return true
		}
	}
	return false
}

func newConfig(s *schema, opts []Option) (*config, error) {
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	for _, p := range c.custom {
		if err := s.checkCustomPrefix(p); err != nil {
			return nil, fmt.Errorf("ecscheck: WithCustom(%q): %w", p, err)
		}
	}
	if c.versionSet && c.version == "" {
		return nil, errors.New("ecscheck: WithVersion: empty version")
	}
	return c, nil
}

func (s *schema) checkCustomPrefix(p string) error {
	if p == "" || slices.Contains(strings.Split(p, "."), "") {
		return errors.New("empty segment in prefix")
	}
	first, _, _ := strings.Cut(p, ".")
	if s.topLevel[first] {
		return fmt.Errorf("%q is an ECS %s name; custom fields need a namespace of their own", first, s.version)
	}
	return nil
}

// Validate checks that doc, one JSON document as it is sent to
// Elasticsearch, is valid ECS 9.4.0 (see the package documentation for
// what that covers). It returns nil, an *Error listing every problem, or
// another error when doc is not a JSON object or an option is wrong.
func Validate(doc []byte, opts ...Option) error {
	s, err := loadSchema()
	if err != nil {
		return err
	}
	cfg, err := newConfig(s, opts)
	if err != nil {
		return err
	}
	root, err := decode(doc)
	if err != nil {
		return err
	}
	w := &walker{s: s, cfg: cfg, values: make(map[string][]any), present: make(map[string]bool)}
	w.members("", root)
	w.checkRequired()
	if cfg.versionSet {
		w.checkVersion(cfg.version)
	}
	w.checkCategorization()
	if len(w.problems) == 0 {
		return nil
	}
	slices.SortStableFunc(w.problems, func(a, b Problem) int { return strings.Compare(a.Field, b.Field) })
	return &Error{Version: s.version, Problems: w.problems}
}

// decode reads one JSON object, numbers kept as json.Number.
func decode(doc []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("ecscheck: decode document: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("ecscheck: decode document: data after the JSON value")
	}
	m, ok := root.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("ecscheck: the document is %s, not a JSON object", describe(root))
	}
	return m, nil
}

// checkRequired reports the fields ECS requires that have no value.
func (w *walker) checkRequired() {
	for _, name := range w.s.required {
		if !w.present[name] {
			w.problem(name, "required by ECS %s, missing", w.s.version)
		}
	}
}

// checkVersion requires every ecs.version value to be want.
func (w *walker) checkVersion(want string) {
	for _, v := range w.stringValues("ecs.version") {
		if v != want {
			w.problem("ecs.version", "is %q, want %q", v, want)
		}
	}
}

// checkCategorization requires each event.type value to be expected by at
// least one of the document's event.category values. Values that are not
// allowed at all were reported already and are skipped here.
func (w *walker) checkCategorization() {
	var cats []string
	for _, c := range w.stringValues("event.category") {
		if _, ok := w.s.expected[c]; ok && !slices.Contains(cats, c) {
			cats = append(cats, c)
		}
	}
	slices.Sort(cats)
	seen := make(map[string]bool)
	for _, t := range w.stringValues("event.type") {
		if seen[t] {
			continue
		}
		seen[t] = true
		if len(cats) == 0 {
			w.problem("event.type", "%q given without an event.category: ECS defines the event types each category expects", t)
			continue
		}
		if !w.expects(cats, t) {
			w.problem("event.type", "%q is not expected for event.category %s (expected: %s)",
				t, strings.Join(cats, ", "), strings.Join(w.expectedFor(cats), ", "))
		}
	}
}

func (w *walker) expects(cats []string, t string) bool {
	for _, c := range cats {
		if slices.Contains(w.s.expected[c], t) {
			return true
		}
	}
	return false
}

// expectedFor returns the union of the event types cats expect, sorted.
func (w *walker) expectedFor(cats []string) []string {
	var out []string
	for _, c := range cats {
		out = append(out, w.s.expected[c]...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// stringValues returns the accepted string values of a field.
func (w *walker) stringValues(name string) []string {
	var out []string
	for _, v := range w.values[name] {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
