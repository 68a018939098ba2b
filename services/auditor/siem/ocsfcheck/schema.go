package ocsfcheck

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ocsfcheck/internal/facts"
)

// The JSON Schema document is one resource with resources embedded: the
// record (dispatching on class_uid), one per class, one per class and set
// of object profiles, and one holding every object and data type. The
// URLs only name them: nothing is fetched.
const (
	draft2020  = "https://json-schema.org/draft/2020-12/schema"
	baseURL    = "https://ocsfcheck.invalid/ocsf/" + Version + "/"
	recordURL  = baseURL + "record.json"
	objectsURL = baseURL + "objects.json"
)

// jsonSchema is a JSON Schema object under construction.
type jsonSchema = map[string]any

// builder turns the facts into the JSON Schema document.
//
// Profiles are what make this more than a translation: an attribute that
// belongs to profiles exists only when the record names one of them in
// metadata.profiles. At the top level of the record a profile is tested
// with if/then. Inside objects, where metadata cannot be seen, an object
// refers to its profile-specific attributes with $dynamicRef: by default
// the reference finds an empty schema, so the attributes are unevaluated
// and refused, but when the record names the profile, the validation has
// passed through a resource (one per class and set of profiles) whose
// $dynamicAnchor of that name brings them in.
type builder struct {
	f       *facts.File
	m       model
	objects map[string]*shape
	// objectProfiles are the profiles some object attribute belongs to,
	// sorted; profiled maps each object to those of its attributes.
	objectProfiles []string
	profiled       map[string][]string
}

// buildSchema builds the JSON Schema document of the facts.
func buildSchema(f *facts.File) (jsonSchema, error) {
	b := &builder{
		f:        f,
		m:        model{f: f},
		objects:  make(map[string]*shape),
		profiled: make(map[string][]string),
	}
	classes, err := b.resolveClasses()
	if err != nil {
		return nil, err
	}
	b.objectProfiles = b.usedObjectProfiles()
	objects, err := b.objectsResource()
	if err != nil {
		return nil, err
	}
	defs := jsonSchema{"objects": objects}
	record := jsonSchema{
		"$schema":  draft2020,
		"$id":      recordURL,
		"type":     "object",
		"required": []any{"class_uid"},
		"$defs":    defs,
	}
	var uids []any
	var dispatch []any
	for _, c := range classes {
		resources, err := b.classResources(c)
		if err != nil {
			return nil, fmt.Errorf("class %s: %w", c.name, err)
		}
		maps.Copy(defs, resources)
		uids = append(uids, c.classUID)
		dispatch = append(dispatch, jsonSchema{
			"if": jsonSchema{
				"required":   []any{"class_uid"},
				"properties": jsonSchema{"class_uid": jsonSchema{"const": c.classUID}},
			},
			"then": jsonSchema{"$ref": classURL(c.name)},
		})
	}
	record["properties"] = jsonSchema{"class_uid": jsonSchema{"enum": uids}}
	record["allOf"] = dispatch
	return record, nil
}

// resolveClasses resolves the classes records may be of, sorted by
// class_uid, and every object they reach.
func (b *builder) resolveClasses() ([]*class, error) {
	var classes []*class
	for _, uid := range b.f.ClassUIDs {
		name, err := b.classByUID(uid)
		if err != nil {
			return nil, err
		}
		c, err := b.m.resolveClass(name)
		if err != nil {
			return nil, err
		}
		if err := b.reach(&c.shape); err != nil {
			return nil, err
		}
		classes = append(classes, c)
	}
	return classes, nil
}

func (b *builder) classByUID(uid int) (string, error) {
	for _, name := range slices.Sorted(maps.Keys(b.f.Classes)) {
		if c := b.f.Classes[name]; c.ClassUID != nil && *c.ClassUID == uid {
			return name, nil
		}
	}
	return "", fmt.Errorf("no class of the facts has class_uid %d", uid)
}

// usedObjectProfiles returns the profiles some attribute of an object
// belongs to, sorted.
func (b *builder) usedObjectProfiles() []string {
	profiles := make(map[string]bool)
	for _, o := range b.objects {
		for _, a := range o.attributes {
			for _, p := range a.profiles {
				profiles[p] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(profiles))
}

// reach resolves every object a class or object's attributes reach.
func (b *builder) reach(s *shape) error {
	for _, name := range slices.Sorted(maps.Keys(s.attributes)) {
		a := s.attributes[name]
		if a.typ != facts.TypeObject {
			continue
		}
		if _, done := b.objects[a.objectType]; done {
			continue
		}
		o, err := b.m.resolveObject(a.objectType)
		if err != nil {
			return err
		}
		b.objects[a.objectType] = o
		if err := b.reach(o); err != nil {
			return err
		}
	}
	return nil
}

// objectsResource is the resource of the objects and the data types.
func (b *builder) objectsResource() (jsonSchema, error) {
	defs := jsonSchema{}
	for name, t := range b.f.Types {
		s, err := b.typeSchema(name, t)
		if err != nil {
			return nil, err
		}
		defs[typeDef(name)] = s
	}
	for name, o := range b.objects {
		s, parts, err := b.objectSchema(o)
		if err != nil {
			return nil, fmt.Errorf("object %s: %w", name, err)
		}
		defs[name] = s
		for p, part := range parts {
			anchor := profileAnchor(name, p)
			// The default: nothing, so that the attributes stay refused.
			defs[anchor] = jsonSchema{"$dynamicAnchor": anchor}
			defs[anchor+".on"] = part
		}
		b.profiled[name] = slices.Sorted(maps.Keys(parts))
	}
	return jsonSchema{"$id": objectsURL, "$defs": defs}, nil
}

// objectSchema is the schema of an object, and the parts of it that
// belong to profiles. An object without attributes (the generic "object"
// of unmapped) is open.
func (b *builder) objectSchema(o *shape) (jsonSchema, map[string]jsonSchema, error) {
	s := jsonSchema{"type": "object"}
	if len(o.attributes) == 0 {
		return s, nil, nil
	}
	if err := b.addAttributes(s, o.attributes); err != nil {
		return nil, nil, err
	}
	parts, err := b.profileParts(o.attributes)
	if err != nil {
		return nil, nil, err
	}
	var allOf []any
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		allOf = append(allOf, jsonSchema{"$dynamicRef": "#" + profileAnchor(o.name, p)})
	}
	allOf = append(allOf, constraintSchemas(o.constraints)...)
	closeSchema(s, allOf, len(parts) > 0)
	return s, parts, nil
}

// closeSchema sets allOf and refuses members the schema does not define:
// with additionalProperties, or, when subschemas of allOf define some
// (profiled), with unevaluatedProperties.
func closeSchema(s jsonSchema, allOf []any, profiled bool) {
	if len(allOf) > 0 {
		s["allOf"] = allOf
	}
	if profiled {
		s["unevaluatedProperties"] = false
	} else {
		s["additionalProperties"] = false
	}
}

// addAttributes adds the attributes that belong to no profile to s as
// properties, the required ones to its required.
func (b *builder) addAttributes(s jsonSchema, attrs map[string]attribute) error {
	props := jsonSchema{}
	var required []any
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a := attrs[name]
		if a.profiles != nil {
			continue
		}
		v, err := b.valueSchema(a)
		if err != nil {
			return fmt.Errorf("attribute %s: %w", name, err)
		}
		props[name] = v
		if a.requirement == facts.Required {
			required = append(required, name)
		}
	}
	s["properties"] = props
	if len(required) > 0 {
		s["required"] = required
	}
	return nil
}

// profileParts groups the attributes that belong to profiles by profile:
// for each, a schema with those attributes as properties, the required
// ones required.
func (b *builder) profileParts(attrs map[string]attribute) (map[string]jsonSchema, error) {
	props := make(map[string]jsonSchema)
	required := make(map[string][]any)
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a := attrs[name]
		if a.profiles == nil {
			continue
		}
		v, err := b.valueSchema(a)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		for _, p := range a.profiles {
			if props[p] == nil {
				props[p] = jsonSchema{}
			}
			props[p][name] = v
			if a.requirement == facts.Required {
				required[p] = append(required[p], name)
			}
		}
	}
	parts := make(map[string]jsonSchema, len(props))
	for p, ps := range props {
		parts[p] = jsonSchema{"properties": ps}
		if len(required[p]) > 0 {
			parts[p]["required"] = required[p]
		}
	}
	return parts, nil
}

// valueSchema is the schema of an attribute's value.
func (b *builder) valueSchema(a attribute) (jsonSchema, error) {
	def := typeDef(a.typ)
	if a.typ == facts.TypeObject {
		def = a.objectType
		if _, ok := b.objects[def]; !ok {
			return nil, fmt.Errorf("object %q is not resolved", def)
		}
	} else if _, ok := b.f.Types[a.typ]; !ok {
		return nil, fmt.Errorf("type %q is not in the facts", a.typ)
	}
	item := jsonSchema{"$ref": objectsURL + "#/$defs/" + def}
	if a.enum != nil {
		values, err := b.enumValues(a)
		if err != nil {
			return nil, err
		}
		item["enum"] = values
	}
	if a.isArray {
		return jsonSchema{"type": "array", "items": item}, nil
	}
	return item, nil
}

// enumValues are an attribute's enum values, as numbers for an integer
// type.
func (b *builder) enumValues(a attribute) ([]any, error) {
	base, err := b.baseType(a.typ)
	if err != nil {
		return nil, err
	}
	values := make([]any, 0, len(a.enum))
	switch base {
	case "integer_t", "long_t":
		ints := make([]int, 0, len(a.enum))
		for _, v := range a.enum {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("enum value %q of an integer: %w", v, err)
			}
			ints = append(ints, n)
		}
		slices.Sort(ints)
		for _, n := range ints {
			values = append(values, n)
		}
	case "string_t":
		for _, v := range a.enum {
			values = append(values, v)
		}
	default:
		return nil, fmt.Errorf("enum on type %s", a.typ)
	}
	return values, nil
}

// baseType follows a type's base types to the primitive one.
func (b *builder) baseType(name string) (string, error) {
	for range len(b.f.Types) + 1 {
		t, ok := b.f.Types[name]
		if !ok {
			return "", fmt.Errorf("type %q is not in the facts", name)
		}
		if t.Type == "" {
			return name, nil
		}
		name = t.Type
	}
	return "", fmt.Errorf("type %q: base type cycle", name)
}

// typeSchema is the schema of a dictionary type: its primitive JSON type
// and the regex, max_len and range it and its base types give.
func (b *builder) typeSchema(name string, t facts.Type) (jsonSchema, error) {
	base, err := b.baseType(name)
	if err != nil {
		return nil, err
	}
	s := jsonSchema{}
	switch base {
	case "string_t":
		s["type"] = "string"
	case "integer_t", "long_t":
		s["type"] = "integer"
	case "float_t":
		s["type"] = "number"
	case "boolean_t":
		s["type"] = "boolean"
	case "json_t":
		// any JSON value
	default:
		return nil, fmt.Errorf("type %s: unknown primitive type %s", name, base)
	}
	for at := t; ; at = b.f.Types[at.Type] {
		if _, set := s["pattern"]; !set && at.Regex != "" {
			s["pattern"] = at.Regex
		}
		if _, set := s["maxLength"]; !set && at.MaxLen > 0 {
			s["maxLength"] = at.MaxLen
		}
		if _, set := s["minimum"]; !set && len(at.Range) == 2 {
			s["minimum"], s["maximum"] = at.Range[0], at.Range[1]
		}
		if at.Type == "" {
			return s, nil
		}
	}
}

// classResources are the resources of a class: the class itself, which
// picks the resource of the object profiles the record names, and that
// resource for each set of object profiles.
func (b *builder) classResources(c *class) (jsonSchema, error) {
	body, err := b.classBody(c)
	if err != nil {
		return nil, err
	}
	resources := jsonSchema{}
	var pick []any
	for _, set := range subsets(b.objectProfiles) {
		url := profilesURL(c.name, set)
		resources[c.name+"+"+setName(set)] = b.profilesResource(url, c.name, set)
		pick = append(pick, jsonSchema{"if": b.namesExactly(set), "then": jsonSchema{"$ref": url}})
	}
	resources[c.name] = jsonSchema{
		"$id":   classURL(c.name),
		"$defs": jsonSchema{"body": body},
		"allOf": pick,
	}
	return resources, nil
}

// profilesResource is the resource a class goes through when the record
// names exactly the object profiles of set: it anchors their attributes.
func (b *builder) profilesResource(url, className string, set []string) jsonSchema {
	defs := jsonSchema{}
	for name, profiles := range b.profiled {
		for _, p := range profiles {
			if slices.Contains(set, p) {
				anchor := profileAnchor(name, p)
				defs[anchor] = jsonSchema{
					"$dynamicAnchor": anchor,
					"$ref":           objectsURL + "#/$defs/" + anchor + ".on",
				}
			}
		}
	}
	return jsonSchema{
		"$id":   url,
		"$defs": defs,
		"$ref":  classURL(className) + "#/$defs/body",
	}
}

// classBody is the schema of a record of the class.
func (b *builder) classBody(c *class) (jsonSchema, error) {
	s := jsonSchema{"type": "object"}
	if err := b.addAttributes(s, c.attributes); err != nil {
		return nil, err
	}
	parts, err := b.profileParts(c.attributes)
	if err != nil {
		return nil, err
	}
	var allOf []any
	for _, p := range slices.Sorted(maps.Keys(parts)) {
		allOf = append(allOf, jsonSchema{"if": b.names(p), "then": parts[p]})
	}
	for _, id := range c.activities {
		allOf = append(allOf, jsonSchema{
			"if": jsonSchema{
				"required":   []any{"activity_id"},
				"properties": jsonSchema{"activity_id": jsonSchema{"const": id}},
			},
			"then": jsonSchema{
				"properties": jsonSchema{"type_uid": jsonSchema{"const": c.classUID*100 + id}},
			},
		})
	}
	allOf = append(allOf, b.metadataRules())
	allOf = append(allOf, constraintSchemas(c.constraints)...)
	closeSchema(s, allOf, true)
	return s, nil
}

// metadataRules: the record says it is of this version, and names only
// profiles the schema defines.
func (b *builder) metadataRules() jsonSchema {
	known := make([]any, 0, len(b.f.KnownProfiles))
	for _, p := range b.f.KnownProfiles {
		known = append(known, p)
	}
	return jsonSchema{"properties": jsonSchema{"metadata": jsonSchema{"properties": jsonSchema{
		"version":  jsonSchema{"const": b.f.Version},
		"profiles": jsonSchema{"items": jsonSchema{"enum": known}},
	}}}}
}

// names is the condition that the record names profile p in
// metadata.profiles.
func (b *builder) names(p string) jsonSchema {
	return jsonSchema{
		"type":     "object",
		"required": []any{"metadata"},
		"properties": jsonSchema{"metadata": jsonSchema{
			"type":     "object",
			"required": []any{"profiles"},
			"properties": jsonSchema{"profiles": jsonSchema{
				"type":     "array",
				"contains": jsonSchema{"const": p},
			}},
		}},
	}
}

// namesExactly is the condition that, of the object profiles, the record
// names exactly those of set.
func (b *builder) namesExactly(set []string) jsonSchema {
	var all []any
	for _, p := range b.objectProfiles {
		if slices.Contains(set, p) {
			all = append(all, b.names(p))
		} else {
			all = append(all, jsonSchema{"not": b.names(p)})
		}
	}
	return jsonSchema{"allOf": all}
}

// constraintSchemas translates constraints: at_least_one to anyOf,
// just_one to oneOf, of the attributes being present.
func constraintSchemas(cs facts.Constraints) []any {
	var out []any
	for _, kind := range slices.Sorted(maps.Keys(cs)) {
		var present []any
		for _, name := range cs[kind] {
			present = append(present, jsonSchema{"required": []any{name}})
		}
		switch kind {
		case facts.AtLeastOne:
			out = append(out, jsonSchema{"anyOf": present})
		case facts.JustOne:
			out = append(out, jsonSchema{"oneOf": present})
		}
	}
	return out
}

// subsets returns every subset of set, each sorted.
func subsets(set []string) [][]string {
	out := [][]string{nil}
	for _, e := range set {
		for _, s := range out {
			out = append(out, append(slices.Clone(s), e))
		}
	}
	return out
}

func classURL(name string) string {
	return baseURL + "classes/" + name + ".json"
}

func profilesURL(className string, set []string) string {
	return baseURL + "classes/" + className + "/" + setName(set) + ".json"
}

func setName(set []string) string {
	if len(set) == 0 {
		return "no-profiles"
	}
	return "profiles-" + strings.Join(set, "+")
}

func typeDef(name string) string {
	return "type." + name
}

func profileAnchor(object, profile string) string {
	return object + "." + profile
}
