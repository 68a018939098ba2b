package ocsfcheck

import (
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ocsfcheck/internal/facts"
)

// The datetime profile and the types it involves: with it, every
// timestamp_t attribute x gains an optional sibling x_dt of datetime_t.
const (
	datetimeProfile = "datetime"
	datetimeType    = "datetime_t"
	timestampType   = "timestamp_t"
	datetimeSuffix  = "_dt"
)

// attribute is an attribute of a class or object with everything
// inherited merged in: the extended classes or objects, then the
// dictionary.
type attribute struct {
	requirement string
	typ         string // a dictionary type, or facts.TypeObject
	objectType  string
	isArray     bool
	enum        []string // values, sorted
	profiles    []string // nil: always there; else only with one of these
}

// shape is a class or object with its inheritance resolved.
type shape struct {
	name        string
	attributes  map[string]attribute
	constraints facts.Constraints
}

// class is a concrete class, resolved.
type class struct {
	shape
	classUID    int
	categoryUID int
	activities  []int // activity_id values, sorted
}

// model resolves the classes and objects of a facts file.
type model struct {
	f *facts.File
}

// resolveClass resolves a concrete class: its extends chain, the
// dictionary, the datetime siblings, and the values the compiler fixes for
// a class (class_uid, category_uid, type_uid).
func (m model) resolveClass(name string) (*class, error) {
	c, ok := m.f.Classes[name]
	if !ok || c.ClassUID == nil || c.CategoryUID == nil {
		return nil, fmt.Errorf("class %q is not a concrete class of the facts", name)
	}
	s, err := m.resolve(name, m.classLink)
	if err != nil {
		return nil, fmt.Errorf("class %s: %w", name, err)
	}
	out := &class{shape: *s, classUID: *c.ClassUID, categoryUID: *c.CategoryUID}
	if err := out.fixUIDs(); err != nil {
		return nil, fmt.Errorf("class %s: %w", name, err)
	}
	return out, nil
}

// resolveObject resolves an object: its extends chain, the dictionary and
// the datetime siblings.
func (m model) resolveObject(name string) (*shape, error) {
	s, err := m.resolve(name, m.objectLink)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", name, err)
	}
	return s, nil
}

// link is what a class or object contributes to those extending it.
type link struct {
	extends     string
	attributes  map[string]facts.Attribute
	constraints *facts.Constraints
}

func (m model) classLink(name string) (link, bool) {
	c, ok := m.f.Classes[name]
	return link{extends: c.Extends, attributes: c.Attributes, constraints: c.Constraints}, ok
}

func (m model) objectLink(name string) (link, bool) {
	o, ok := m.f.Objects[name]
	return link{extends: o.Extends, attributes: o.Attributes, constraints: o.Constraints}, ok
}

// resolve merges the extends chain of a class or object, root first: a
// child's attribute facts over its parent's, a child's constraints (even
// empty ones) instead of its parent's. Then it merges the dictionary.
func (m model) resolve(name string, get func(string) (link, bool)) (*shape, error) {
	var chain []link
	for at := name; at != ""; {
		l, ok := get(at)
		if !ok {
			return nil, fmt.Errorf("extends undefined %q", at)
		}
		if len(chain) > len(m.f.Classes)+len(m.f.Objects) {
			return nil, fmt.Errorf("extends cycle at %q", at)
		}
		chain = append(chain, l)
		at = l.extends
	}
	merged := make(map[string]facts.Attribute)
	var constraints *facts.Constraints
	for _, l := range slices.Backward(chain) {
		for attr, a := range l.attributes {
			if base, ok := merged[attr]; ok {
				a = facts.Overlay(base, a)
			}
			merged[attr] = a
		}
		if l.constraints != nil {
			constraints = l.constraints
		}
	}
	return m.finish(name, merged, constraints)
}

// fixUIDs sets what the schema compiler derives for a concrete class:
// class_uid and category_uid take the class's value only, type_uid one
// value per activity (class_uid * 100 + activity_id).
func (c *class) fixUIDs() error {
	activity, ok := c.attributes["activity_id"]
	if !ok || len(activity.enum) == 0 {
		return fmt.Errorf("no activity_id enum")
	}
	for _, v := range activity.enum {
		id, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("activity_id value %q: %w", v, err)
		}
		c.activities = append(c.activities, id)
	}
	slices.Sort(c.activities)
	typeUIDs := make([]string, 0, len(c.activities))
	for _, id := range c.activities {
		typeUIDs = append(typeUIDs, strconv.Itoa(c.classUID*100+id))
	}
	for name, values := range map[string][]string{
		"class_uid":    {strconv.Itoa(c.classUID)},
		"category_uid": {strconv.Itoa(c.categoryUID)},
		"type_uid":     typeUIDs,
	} {
		a, ok := c.attributes[name]
		if !ok {
			return fmt.Errorf("no %s attribute", name)
		}
		a.enum = values
		c.attributes[name] = a
	}
	return nil
}

// finish merges the dictionary into the attributes and adds the datetime
// siblings.
func (m model) finish(name string, merged map[string]facts.Attribute, constraints *facts.Constraints) (*shape, error) {
	s := &shape{name: name, attributes: make(map[string]attribute, len(merged))}
	if constraints != nil {
		s.constraints = *constraints
	}
	_, withDatetime := m.f.Profiles[datetimeProfile]
	for attrName, a := range merged {
		d, ok := m.f.Dictionary[attrName]
		if !ok {
			return nil, fmt.Errorf("attribute %s is not in the dictionary", attrName)
		}
		final := m.withDictionary(a, d)
		s.attributes[attrName] = final
		if withDatetime && final.typ == timestampType {
			s.attributes[attrName+datetimeSuffix] = attribute{
				requirement: facts.Optional,
				typ:         datetimeType,
				isArray:     d.IsArray,
				profiles:    []string{datetimeProfile},
			}
		}
	}
	return s, nil
}

// withDictionary lays an attribute's facts over the dictionary's.
func (m model) withDictionary(a facts.Attribute, d facts.DictionaryAttribute) attribute {
	out := attribute{
		requirement: a.Requirement,
		typ:         d.Type,
		objectType:  d.ObjectType,
		isArray:     d.IsArray,
	}
	if out.requirement == "" {
		out.requirement = facts.Optional
	}
	if a.Type != "" {
		out.typ, out.objectType = a.Type, a.ObjectType
	}
	if a.IsArray != nil {
		out.isArray = *a.IsArray
	}
	if len(d.Enum)+len(a.Enum) > 0 {
		values := maps.Clone(d.Enum)
		if values == nil {
			values = make(map[string]string)
		}
		maps.Copy(values, a.Enum)
		out.enum = slices.Sorted(maps.Keys(values))
	}
	if a.Profiles != nil && len(*a.Profiles) > 0 {
		out.profiles = slices.Clone(*a.Profiles)
	}
	return out
}
