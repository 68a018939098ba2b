package ecscheck

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// walker visits a decoded document field by field, guided by the schema,
// and collects the values of the fields it accepted and the problems.
type walker struct {
	s        *schema
	cfg      *config
	values   map[string][]any // flat name -> accepted non-null values
	present  map[string]bool  // ECS fields given a value, valid or not
	problems []Problem
}

func (w *walker) problem(field, format string, args ...any) {
	w.problems = append(w.problems, Problem{Field: field, Reason: fmt.Sprintf(format, args...)})
}

func (w *walker) record(name string, v any) {
	w.values[name] = append(w.values[name], v)
}

// members visits the members of obj, an object found at prefix ("" for the
// document itself).
func (w *walker) members(prefix string, obj map[string]any) {
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		w.member(prefix, key, obj[key])
	}
}

// member visits one member. A dotted key is the same path as the nested
// objects it names, as Elasticsearch reads it: {"a.b": v} is {"a": {"b": v}}.
func (w *walker) member(prefix, key string, v any) {
	first, rest, dotted := strings.Cut(key, ".")
	if first == "" || (dotted && rest == "") {
		w.problem(join(prefix, key), "a field name has an empty segment")
		return
	}
	if dotted {
		v = map[string]any{rest: v}
	}
	w.visit(join(prefix, first), v)
}

// visit checks the value v found at path.
func (w *walker) visit(path string, v any) {
	switch {
	case v == nil:
		// null is no value, as in Elasticsearch.
	case w.cfg.isCustom(path):
		// A custom field: its content is the caller's.
	case w.s.fields[path] != nil:
		w.present[path] = w.present[path] || len(elements(v)) > 0
		w.field(w.s.fields[path], v)
	case w.s.parents[path] || w.cfg.isCustomParent(path):
		w.container(path, v)
	default:
		w.unknown(path, v)
	}
}

// container checks the value of a path that is no field but lies above
// fields, such as "host" or "host.os": an object, or an array of objects.
func (w *walker) container(path string, v any) {
	for _, e := range elements(v) {
		m, ok := e.(map[string]any)
		if !ok {
			w.problem(path, "expected an object holding fields below %s, got %s", path, describe(e))
			continue
		}
		w.members(path, m)
	}
}

// unknown reports the leaves of a value found at a path that is neither
// an ECS field nor a custom one.
func (w *walker) unknown(path string, v any) {
	reported := false
	for _, e := range elements(v) {
		if m, ok := e.(map[string]any); ok && len(m) > 0 {
			w.members(path, m)
			continue
		}
		if !reported {
			w.problem(path, "%s", w.unknownReason())
			reported = true
		}
	}
}

func (w *walker) unknownReason() string {
	if len(w.cfg.custom) == 0 {
		return fmt.Sprintf("not an ECS %s field (custom fields need a namespace of their own, named with WithCustom)", w.s.version)
	}
	return fmt.Sprintf("not an ECS %s field and not under a custom prefix (%s)", w.s.version, strings.Join(w.cfg.custom, ", "))
}

// field checks the value of an ECS field.
func (w *walker) field(f *field, v any) {
	if _, isArray := v.([]any); f.array && !isArray {
		w.problem(f.name, "must be an array (ECS normalize: array), got %s", describe(v))
	}
	switch f.kind {
	case kindObject:
		w.objectField(f, v)
	case kindFlattened, kindNested:
		w.objectsField(f, v)
	case kindGeoPoint:
		w.geoField(f, v)
	default:
		w.leaf(f, v)
	}
}

// objectField checks an ECS object field: a map of object_type values
// (labels), a closed object whose members are the ECS fields below it
// (log.syslog), or an open object when ECS defines nothing below it
// (entity.raw).
func (w *walker) objectField(f *field, v any) {
	for _, e := range elements(v) {
		m, ok := e.(map[string]any)
		switch {
		case !ok:
			w.problem(f.name, "expected an object (ECS object), got %s", describe(e))
		case f.objectType != "":
			w.typedMembers(f, m)
		case f.children:
			w.members(f.name, m)
		default:
			w.record(f.name, m)
		}
	}
}

// typedMembers checks the members of an object with an object_type: each
// one a value (or array of values) of that type, named by one segment.
func (w *walker) typedMembers(f *field, m map[string]any) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		path := f.name + "." + key
		if key == "" || strings.Contains(key, ".") {
			w.problem(path, "%s maps names to %s values; a dotted or empty name makes a nested object, which it does not hold", f.name, f.objectType)
			continue
		}
		for _, x := range elements(m[key]) {
			if _, isObj := x.(map[string]any); isObj {
				w.problem(path, "%s holds %s values, not nested objects", f.name, f.objectType)
				continue
			}
			if r := checkScalar(f.objectKind, f.objectType, x); r != "" {
				w.problem(path, "%s", r)
				continue
			}
			w.record(path, x)
		}
	}
}

// objectsField checks a flattened or nested field: objects, whose members
// are the ECS fields below a nested field when ECS defines some, and any
// content otherwise.
func (w *walker) objectsField(f *field, v any) {
	typ := "flattened"
	if f.kind == kindNested {
		typ = "nested"
	}
	for _, e := range elements(v) {
		m, ok := e.(map[string]any)
		switch {
		case !ok:
			w.problem(f.name, "expected an object (ECS %s), got %s", typ, describe(e))
		case f.kind == kindNested && f.children:
			w.members(f.name, m)
		default:
			w.record(f.name, m)
		}
	}
}

// geoField checks a geo_point field: one point or an array of points.
func (w *walker) geoField(f *field, v any) {
	points := []any{v}
	if a, ok := v.([]any); ok {
		if _, _, single := lonLatArray(a); !single {
			points = elements(v)
		}
	}
	for _, p := range points {
		if r := checkGeoPoint(p); r != "" {
			w.problem(f.name, "%s", r)
			continue
		}
		w.record(f.name, p)
	}
}

// leaf checks the value of a scalar field: one value or an array of them.
func (w *walker) leaf(f *field, v any) {
	for _, x := range elements(v) {
		if m, ok := x.(map[string]any); ok && len(m) > 0 {
			w.leafMembers(f, m)
			continue
		}
		if r := checkScalar(f.kind, f.ecsType, x); r != "" {
			w.problem(f.name, "%s", r)
			continue
		}
		if r := w.checkConstraints(f, x); r != "" {
			w.problem(f.name, "%s", r)
			continue
		}
		w.record(f.name, x)
	}
}

// leafMembers reports the members of an object given for a scalar field:
// a multi-field (host.os.name.text) or an unknown field below a leaf.
func (w *walker) leafMembers(f *field, m map[string]any) {
	for _, key := range slices.Sorted(maps.Keys(m)) {
		first, _, _ := strings.Cut(key, ".")
		path := f.name + "." + first
		if slices.Contains(f.multi, first) {
			w.problem(path, "a multi-field of %s, derived by Elasticsearch at index time; send %s only", f.name, f.name)
			continue
		}
		w.problem(path, "not an ECS %s field: %s is an ECS %s and has no members", w.s.version, f.name, f.ecsType)
	}
}

// checkConstraints checks a value of the right type against the field's
// pattern and allowed values.
func (w *walker) checkConstraints(f *field, x any) string {
	s, ok := x.(string)
	if !ok {
		return ""
	}
	if f.pattern != nil && !f.pattern.MatchString(s) {
		return fmt.Sprintf("%q does not match the ECS pattern %s", s, f.pattern)
	}
	if len(f.allowed) > 0 && !slices.Contains(f.allowed, s) {
		return fmt.Sprintf("%q is not an allowed value (allowed: %s)", s, strings.Join(f.allowed, ", "))
	}
	return ""
}

// elements returns the non-null values of v: v itself, or the elements of
// an array, arrays within it flattened as Elasticsearch does.
func elements(v any) []any {
	a, ok := v.([]any)
	if !ok {
		if v == nil {
			return nil
		}
		return []any{v}
	}
	var out []any
	for _, e := range a {
		out = append(out, elements(e)...)
	}
	return out
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
