// Package facts defines the facts file of package ocsfcheck: the facts of
// the OCSF schema that internal/genfacts extracts from the ocsf-schema
// repository and that the validator builds its JSON Schema from.
//
// Classes, objects and profiles are recorded as their files define them,
// with "$include" resolved: "extends" and the dictionary are left for the
// reader to merge, so that each fact stays traceable to its files. One
// enum is not written out in any file: that of observable.type_id, which
// the OCSF schema compiler gathers from the "observable" numbers declared
// across the schema; the generator gathers it likewise into the
// observable object, and lists the files declaring them in its source.
package facts

import (
	"maps"
	"slices"
)

// Requirement levels of an attribute.
const (
	Required    = "required"
	Recommended = "recommended"
	Optional    = "optional"
)

// Constraint kinds of a class or object.
const (
	AtLeastOne = "at_least_one"
	JustOne    = "just_one"
)

// TypeObject is the type of an attribute whose values are objects; its
// ObjectType names the object.
const TypeObject = "object_t"

// File is the whole facts file.
type File struct {
	// Version is the schema version, from version.json.
	Version string `json:"version"`
	// Tag and Commit are the git tag the facts were read at and its commit.
	Tag    string `json:"tag"`
	Commit string `json:"commit"`
	// ClassUIDs are the class_uid of the classes the facts were extracted
	// for, the classes a record may be of.
	ClassUIDs []int `json:"class_uids"`
	// Types are the dictionary's data types the attributes use.
	Types map[string]Type `json:"types"`
	// Categories are the categories of the classes, by name.
	Categories map[string]Category `json:"categories"`
	// Dictionary holds every attribute name the classes, objects and
	// profiles use.
	Dictionary map[string]DictionaryAttribute `json:"dictionary"`
	// Classes, Objects and Profiles are keyed by their "name".
	Classes  map[string]Class   `json:"classes"`
	Objects  map[string]Object  `json:"objects"`
	Profiles map[string]Profile `json:"profiles"`
	// KnownProfiles names every profile the schema defines, used here or
	// not: the values metadata.profiles may hold.
	KnownProfiles []string `json:"known_profiles"`
	// Source gives, for each class, object and profile, the repository
	// files its facts were read from.
	Source Source `json:"source"`
}

// Type is a dictionary data type.
type Type struct {
	// Type is the base type of a subtype (string_t for ip_t); empty for a
	// base type.
	Type   string  `json:"type,omitempty"`
	Regex  string  `json:"regex,omitempty"`
	Range  []int64 `json:"range,omitempty"`
	MaxLen int     `json:"max_len,omitempty"`
}

// Category is an event category.
type Category struct {
	UID     int    `json:"uid"`
	Caption string `json:"caption"`
}

// DictionaryAttribute is an attribute as the dictionary defines it.
type DictionaryAttribute struct {
	// Type is a dictionary type name, or TypeObject.
	Type       string `json:"type"`
	ObjectType string `json:"object_type,omitempty"`
	IsArray    bool   `json:"is_array,omitempty"`
	// Enum maps each enum value to its caption.
	Enum map[string]string `json:"enum,omitempty"`
}

// Attribute is an attribute as a class, object or profile file defines
// it; a field left empty is inherited (from the class or object extended,
// then from the dictionary).
type Attribute struct {
	Requirement string `json:"requirement,omitempty"`
	// Type and ObjectType override the dictionary's type.
	Type       string `json:"type,omitempty"`
	ObjectType string `json:"object_type,omitempty"`
	IsArray    *bool  `json:"is_array,omitempty"`
	// Enum adds values to (or renames values of) the inherited enum.
	Enum map[string]string `json:"enum,omitempty"`
	// Profiles: nil, not said here; empty, the attribute belongs to no
	// profile ("profile": null in the source); else the attribute exists
	// only when one of these profiles is applied.
	Profiles *[]string `json:"profiles,omitempty"`
	// DeprecatedSince is the version an "@deprecated" attribute gives.
	DeprecatedSince string `json:"deprecated_since,omitempty"`
}

// Constraints map a constraint kind (AtLeastOne, JustOne) to attribute
// names. An empty, non-nil Constraints drops the inherited ones.
type Constraints map[string][]string

// Class is an event class, or a base class another extends.
type Class struct {
	Name    string `json:"name"`
	Caption string `json:"caption"`
	// Category is the category name ("other" for base_event).
	Category string `json:"category,omitempty"`
	// UID is the class's own uid; ClassUID and CategoryUID are resolved
	// (category uid * 1000 + uid) for concrete classes only.
	UID         *int   `json:"uid,omitempty"`
	ClassUID    *int   `json:"class_uid,omitempty"`
	CategoryUID *int   `json:"category_uid,omitempty"`
	Extends     string `json:"extends,omitempty"`
	// Attributes, with "$include" resolved.
	Attributes  map[string]Attribute `json:"attributes"`
	Profiles    []string             `json:"profiles,omitempty"`
	Constraints *Constraints         `json:"constraints,omitempty"`
}

// Object is an object, hidden ("_entity") or not.
type Object struct {
	Name        string               `json:"name"`
	Extends     string               `json:"extends,omitempty"`
	Attributes  map[string]Attribute `json:"attributes"`
	Profiles    []string             `json:"profiles,omitempty"`
	Constraints *Constraints         `json:"constraints,omitempty"`
}

// Profile is a profile's own attributes.
type Profile struct {
	Name       string               `json:"name"`
	Attributes map[string]Attribute `json:"attributes"`
}

// Source lists the files each class, object and profile came from: its
// own file first, then the files it includes.
type Source struct {
	Classes  map[string][]string `json:"classes"`
	Objects  map[string][]string `json:"objects"`
	Profiles map[string][]string `json:"profiles"`
}

// requirementRank orders the requirement levels.
var requirementRank = map[string]int{Optional: 1, Recommended: 2, Required: 3}

// Overlay returns base with over's facts laid on top, as the OCSF schema
// compiler merges an attribute of a child over its parent's (and a file's
// own attribute over an included one): what over says wins, enums are
// merged value by value, and the profiles of two profile-specific
// definitions are united, the stronger requirement winning.
func Overlay(base, over Attribute) Attribute {
	out := base
	if over.Requirement != "" {
		out.Requirement = over.Requirement
		bothProfiled := over.Profiles != nil && len(*over.Profiles) > 0 && base.Profiles != nil
		if bothProfiled && requirementRank[base.Requirement] > requirementRank[over.Requirement] {
			out.Requirement = base.Requirement
		}
	}
	if over.Type != "" {
		out.Type, out.ObjectType = over.Type, over.ObjectType
	}
	if over.IsArray != nil {
		out.IsArray = over.IsArray
	}
	if len(over.Enum) > 0 {
		out.Enum = make(map[string]string, len(base.Enum)+len(over.Enum))
		maps.Copy(out.Enum, base.Enum)
		maps.Copy(out.Enum, over.Enum)
	}
	if over.Profiles != nil {
		out.Profiles = overlayProfiles(base.Profiles, *over.Profiles)
	}
	if over.DeprecatedSince != "" {
		out.DeprecatedSince = over.DeprecatedSince
	}
	return out
}

// overlayProfiles merges an attribute's profiles: an empty over (the
// source's "profile": null) makes the attribute profile-independent,
// otherwise the two lists are united.
func overlayProfiles(base *[]string, over []string) *[]string {
	if len(over) == 0 {
		return &[]string{}
	}
	var merged []string
	if base != nil {
		merged = append(merged, *base...)
	}
	merged = append(merged, over...)
	slices.Sort(merged)
	merged = slices.Compact(merged)
	return &merged
}
