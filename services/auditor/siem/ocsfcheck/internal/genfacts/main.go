// Command genfacts extracts the facts package ocsfcheck validates with
// from a git mirror of github.com/ocsf/ocsf-schema, at a tag.
//
// It records the classes given by -classes, every class they extend,
// every object their attributes reach (through attributes, "extends" and
// profiles, transitively), the profiles those use, and the dictionary
// attributes and data types of all of them: names, types, requirement
// levels, enum values, constraints and inheritance. It copies no
// description. "$include" is resolved here; "extends" and the dictionary
// are merged by the reader. The output is deterministic: keys are sorted.
//
// Usage, from the ocsfcheck directory:
//
//	go run ./internal/genfacts -repo /work/.mirror/ocsf+ocsf-schema/repo -tag 1.8.0 -o testdata/ocsf-1.8.0.json
//
// It is not run by the tests: it needs the mirror.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ocsfcheck/internal/facts"
)

func main() {
	repo := flag.String("repo", "/work/.mirror/ocsf+ocsf-schema/repo", "git directory of a mirror of github.com/ocsf/ocsf-schema")
	tag := flag.String("tag", "1.8.0", "git tag (or any revision) to read")
	classes := flag.String("classes", "0,1008,2003,2004,3004,6008", "comma-separated class_uid values of the classes to record")
	out := flag.String("o", "", "file to write the facts to (default: standard output)")
	flag.Parse()
	if err := run(*repo, *tag, *classes, *out); err != nil {
		fmt.Fprintln(os.Stderr, "genfacts:", err)
		os.Exit(1)
	}
}

func run(repo, tag, classList, out string) error {
	uids, err := parseUIDs(classList)
	if err != nil {
		return err
	}
	commit, err := git(repo, "rev-parse", "--verify", tag+"^{commit}")
	if err != nil {
		return err
	}
	files, err := readTree(repo, tag)
	if err != nil {
		return err
	}
	s, err := loadSchema(files)
	if err != nil {
		return fmt.Errorf("read schema at %s: %w", tag, err)
	}
	g := newGenerator(s)
	for _, uid := range uids {
		name, err := s.classByUID(uid)
		if err != nil {
			return err
		}
		if err := g.addClass(name); err != nil {
			return err
		}
	}
	f, err := g.facts(tag, strings.TrimSpace(string(commit)))
	if err != nil {
		return err
	}
	f.ClassUIDs = uids
	for _, w := range g.warnings {
		fmt.Fprintln(os.Stderr, "genfacts: warning:", w)
	}
	data, err := encode(f)
	if err != nil {
		return err
	}
	if out == "" {
		if _, err := os.Stdout.Write(data); err != nil {
			return fmt.Errorf("write facts: %w", err)
		}
		return nil
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return fmt.Errorf("write facts: %w", err)
	}
	return nil
}

// parseUIDs reads the -classes list, sorted, without duplicates.
func parseUIDs(list string) ([]int, error) {
	var uids []int
	for field := range strings.SplitSeq(list, ",") {
		uid, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil {
			return nil, fmt.Errorf("-classes: %w", err)
		}
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return slices.Compact(uids), nil
}

// git runs git on the repository and returns its standard output.
func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return outb, nil
}

// readTree returns the schema files of the core schema at the tag, by
// path. Extensions (extensions/) are left out: they are not part of the
// core schema.
func readTree(repo, tag string) (map[string][]byte, error) {
	archive, err := git(repo, "archive", "--format=tar", tag, "--",
		"version.json", "categories.json", "dictionary.json", "events", "objects", "profiles")
	if err != nil {
		return nil, err
	}
	files := make(map[string][]byte)
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read git archive: %w", err)
		}
		if hdr.Typeflag != tar.TypeReg || path.Ext(hdr.Name) != ".json" {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, fmt.Errorf("read %s from git archive: %w", hdr.Name, err)
		}
		files[hdr.Name] = data
	}
}

// jsonObject is a decoded JSON object of a schema file.
type jsonObject = map[string]any

// item is a class, object or profile file.
type item struct {
	path string
	data jsonObject
}

// schema is the repository's schema files, indexed.
type schema struct {
	files      map[string][]byte
	version    string
	categories map[string]facts.Category
	dictionary jsonObject // dictionary "attributes"
	types      jsonObject // dictionary "types" "attributes"
	classes    map[string]item
	objects    map[string]item
	profiles   map[string]item
}

func loadSchema(files map[string][]byte) (*schema, error) {
	s := &schema{
		files:      files,
		categories: make(map[string]facts.Category),
		classes:    make(map[string]item),
		objects:    make(map[string]item),
		profiles:   make(map[string]item),
	}
	if err := s.loadTop(); err != nil {
		return nil, err
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		var dest map[string]item
		switch {
		case strings.HasPrefix(p, "events/"):
			dest = s.classes
		case strings.HasPrefix(p, "objects/"):
			dest = s.objects
		case strings.HasPrefix(p, "profiles/"):
			dest = s.profiles
		default:
			continue
		}
		data, err := s.read(p)
		if err != nil {
			return nil, err
		}
		name, _ := data["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("%s: no name", p)
		}
		if prev, dup := dest[name]; dup {
			return nil, fmt.Errorf("%s and %s both define %q", prev.path, p, name)
		}
		dest[name] = item{path: p, data: data}
	}
	return s, nil
}

// loadTop reads version.json, categories.json and dictionary.json.
func (s *schema) loadTop() error {
	version, err := s.read("version.json")
	if err != nil {
		return err
	}
	s.version, _ = version["version"].(string)
	categories, err := s.read("categories.json")
	if err != nil {
		return err
	}
	for name, v := range object(categories["attributes"]) {
		c := object(v)
		uid, err := intOf(c["uid"])
		if err != nil {
			return fmt.Errorf("categories.json: %s: uid: %w", name, err)
		}
		caption, _ := c["caption"].(string)
		s.categories[name] = facts.Category{UID: uid, Caption: caption}
	}
	dictionary, err := s.read("dictionary.json")
	if err != nil {
		return err
	}
	s.dictionary = object(dictionary["attributes"])
	s.types = object(object(dictionary["types"])["attributes"])
	if s.version == "" || s.dictionary == nil || s.types == nil {
		return errors.New("version.json or dictionary.json lacks its content")
	}
	return nil
}

// read decodes a JSON file of the tree.
func (s *schema) read(p string) (jsonObject, error) {
	data, ok := s.files[p]
	if !ok {
		return nil, fmt.Errorf("%s: not in the tree", p)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v jsonObject
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return v, nil
}

// classByUID finds the concrete class whose class_uid is uid.
func (s *schema) classByUID(uid int) (string, error) {
	for _, name := range slices.Sorted(maps.Keys(s.classes)) {
		classUID, _, ok, err := s.classUIDs(name)
		if err != nil {
			return "", err
		}
		if ok && classUID == uid {
			return name, nil
		}
	}
	return "", fmt.Errorf("no class has class_uid %d", uid)
}

// classUIDs resolves a class's class_uid and category_uid: category uid *
// 1000 + the class's own uid. ok is false for a class without uid (an
// abstract base) other than base_event, whose category "other" is 0.
func (s *schema) classUIDs(name string) (classUID, categoryUID int, ok bool, err error) {
	c := s.classes[name]
	rawUID, hasUID := c.data["uid"]
	if !hasUID && name != "base_event" {
		return 0, 0, false, nil
	}
	uid := 0
	if hasUID {
		if uid, err = intOf(rawUID); err != nil {
			return 0, 0, false, fmt.Errorf("%s: uid: %w", c.path, err)
		}
	}
	category := s.classCategory(name)
	if cat, known := s.categories[category]; known {
		categoryUID = cat.UID
	} else if category != "other" {
		return 0, 0, false, fmt.Errorf("%s: unknown category %q", c.path, category)
	}
	return categoryUID*1000 + uid, categoryUID, true, nil
}

// classCategory returns a class's category, which a class may inherit
// from the class it extends.
func (s *schema) classCategory(name string) string {
	for seen := 0; name != "" && seen < len(s.classes); seen++ {
		c := s.classes[name]
		if category, ok := c.data["category"].(string); ok {
			return category
		}
		name, _ = c.data["extends"].(string)
	}
	return ""
}

// generator collects the facts reachable from the classes added.
type generator struct {
	s          *schema
	classes    map[string]facts.Class
	objects    map[string]facts.Object
	profiles   map[string]facts.Profile
	attributes map[string]bool // dictionary attribute names used
	types      map[string]bool // dictionary type names used
	source     facts.Source
	warnings   []string
}

func newGenerator(s *schema) *generator {
	return &generator{
		s:          s,
		classes:    make(map[string]facts.Class),
		objects:    make(map[string]facts.Object),
		profiles:   make(map[string]facts.Profile),
		attributes: make(map[string]bool),
		types:      make(map[string]bool),
		source: facts.Source{
			Classes:  make(map[string][]string),
			Objects:  make(map[string][]string),
			Profiles: make(map[string][]string),
		},
	}
}

// addClass records a class and, first, every class it extends.
func (g *generator) addClass(name string) error {
	if _, done := g.classes[name]; done {
		return nil
	}
	it, ok := g.s.classes[name]
	if !ok {
		return fmt.Errorf("class %q is not defined", name)
	}
	g.classes[name] = facts.Class{Name: name} // mark before recursing
	attrs, files, err := g.attributesOf(it)
	if err != nil {
		return err
	}
	c := facts.Class{
		Name:       name,
		Attributes: attrs,
		Profiles:   stringList(it.data["profiles"]),
	}
	c.Caption, _ = it.data["caption"].(string)
	c.Category = g.s.classCategory(name)
	c.Extends, _ = it.data["extends"].(string)
	if err := g.setUIDs(&c, it); err != nil {
		return err
	}
	if c.Constraints, err = constraintsOf(it); err != nil {
		return err
	}
	g.classes[name] = c
	g.source.Classes[name] = files
	if err := g.use(attrs, c.Profiles); err != nil {
		return fmt.Errorf("class %s: %w", name, err)
	}
	if c.Extends != "" {
		return g.addClass(c.Extends)
	}
	return nil
}

func (g *generator) setUIDs(c *facts.Class, it item) error {
	if raw, ok := it.data["uid"]; ok {
		uid, err := intOf(raw)
		if err != nil {
			return fmt.Errorf("%s: uid: %w", it.path, err)
		}
		c.UID = &uid
	}
	classUID, categoryUID, ok, err := g.s.classUIDs(c.Name)
	if err != nil || !ok {
		return err
	}
	c.ClassUID, c.CategoryUID = &classUID, &categoryUID
	return nil
}

// addObject records an object and, first, every object it extends.
func (g *generator) addObject(name string) error {
	if _, done := g.objects[name]; done {
		return nil
	}
	it, ok := g.s.objects[name]
	if !ok {
		return fmt.Errorf("object %q is not defined", name)
	}
	g.objects[name] = facts.Object{Name: name} // mark before recursing
	attrs, files, err := g.attributesOf(it)
	if err != nil {
		return err
	}
	o := facts.Object{
		Name:       name,
		Attributes: attrs,
		Profiles:   stringList(it.data["profiles"]),
	}
	o.Extends, _ = it.data["extends"].(string)
	if o.Constraints, err = constraintsOf(it); err != nil {
		return err
	}
	g.objects[name] = o
	g.source.Objects[name] = files
	if err := g.use(attrs, o.Profiles); err != nil {
		return fmt.Errorf("object %s: %w", name, err)
	}
	if o.Extends != "" {
		return g.addObject(o.Extends)
	}
	return nil
}

// addProfile records a profile's own attributes.
func (g *generator) addProfile(name string) error {
	if _, done := g.profiles[name]; done {
		return nil
	}
	it, ok := g.s.profiles[name]
	if !ok {
		return fmt.Errorf("profile %q is not defined", name)
	}
	g.profiles[name] = facts.Profile{Name: name} // mark before recursing
	attrs := make(map[string]facts.Attribute)
	for attrName, raw := range object(it.data["attributes"]) {
		a, err := g.attributeOf(it.path, attrName, object(raw))
		if err != nil {
			return err
		}
		attrs[attrName] = a
	}
	g.profiles[name] = facts.Profile{Name: name, Attributes: attrs}
	g.source.Profiles[name] = []string{it.path}
	if name == "datetime" {
		// The datetime profile has no attribute of its own: it gives each
		// timestamp_t attribute a datetime_t sibling named <name>_dt.
		g.types["datetime_t"] = true
	}
	return g.use(attrs, nil)
}

// use records the dictionary attributes, types, objects and profiles a
// class, object or profile uses.
func (g *generator) use(attrs map[string]facts.Attribute, profiles []string) error {
	for _, p := range profiles {
		if err := g.addProfile(p); err != nil {
			return err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a := attrs[name]
		d, err := g.dictionaryAttribute(name)
		if err != nil {
			return err
		}
		g.attributes[name] = true
		typ, objectType := d.Type, d.ObjectType
		if a.Type != "" {
			typ, objectType = a.Type, a.ObjectType
		}
		if typ == facts.TypeObject {
			if err := g.addObject(objectType); err != nil {
				return err
			}
		} else {
			g.types[typ] = true
		}
		if a.Profiles != nil {
			for _, p := range *a.Profiles {
				if err := g.addProfile(p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// attributesOf returns an item's attributes with "$include" resolved, and
// the files they came from (the item's own first).
func (g *generator) attributesOf(it item) (map[string]facts.Attribute, []string, error) {
	files := []string{it.path}
	attrs := make(map[string]facts.Attribute)
	own := object(it.data["attributes"])
	includes, err := includeList(own["$include"])
	if err != nil {
		return nil, nil, fmt.Errorf("%s: $include: %w", it.path, err)
	}
	for _, inc := range includes {
		included, err := g.included(inc)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", it.path, err)
		}
		for name, a := range included {
			if prev, dup := attrs[name]; dup {
				a = facts.Overlay(prev, a)
			}
			attrs[name] = a
		}
		files = append(files, inc)
	}
	for name, raw := range own {
		if name == "$include" {
			continue
		}
		a, err := g.attributeOf(it.path, name, object(raw))
		if err != nil {
			return nil, nil, err
		}
		if base, ok := attrs[name]; ok {
			a = facts.Overlay(base, a)
		}
		attrs[name] = a
	}
	return attrs, files, nil
}

// included returns the attributes of an included file; a profile's are
// marked as belonging to it.
func (g *generator) included(p string) (map[string]facts.Attribute, error) {
	data, err := g.s.read(p)
	if err != nil {
		return nil, fmt.Errorf("$include: %w", err)
	}
	profile := ""
	if data["meta"] == "profile" {
		profile, _ = data["name"].(string)
	}
	attrs := make(map[string]facts.Attribute)
	for name, raw := range object(data["attributes"]) {
		a, err := g.attributeOf(p, name, object(raw))
		if err != nil {
			return nil, err
		}
		if profile != "" {
			if a.Profiles != nil {
				return nil, fmt.Errorf("%s: attribute %s of a profile has a profile", p, name)
			}
			a.Profiles = &[]string{profile}
		}
		attrs[name] = a
	}
	return attrs, nil
}

// attributeOf extracts the facts of one attribute definition.
func (g *generator) attributeOf(file, name string, raw jsonObject) (facts.Attribute, error) {
	if raw == nil {
		return facts.Attribute{}, fmt.Errorf("%s: attribute %s is not an object", file, name)
	}
	var a facts.Attribute
	if inc, ok := raw["$include"].(string); ok {
		// An attribute-level include holds attribute details to build on.
		data, err := g.s.read(inc)
		if err != nil {
			return a, fmt.Errorf("%s: attribute %s: $include: %w", file, name, err)
		}
		if a, err = g.attributeOf(inc, name, data); err != nil {
			return a, err
		}
	}
	own, err := g.ownAttribute(file, name, raw)
	if err != nil {
		return a, err
	}
	return facts.Overlay(a, own), nil
}

func (g *generator) ownAttribute(file, name string, raw jsonObject) (facts.Attribute, error) {
	var a facts.Attribute
	a.Requirement, _ = raw["requirement"].(string)
	if t, ok := raw["type"].(string); ok {
		a.Type, a.ObjectType = g.typeOf(t)
	}
	if b, ok := raw["is_array"].(bool); ok {
		a.IsArray = &b
	}
	a.Enum = enumOf(raw["enum"])
	if p, ok := raw["profile"]; ok {
		// "profile": null frees the attribute from the profiles it came
		// with; a name ties it to that profile.
		list := []string{}
		if s, isString := p.(string); isString {
			list = append(list, s)
		}
		a.Profiles = &list
	}
	if ps, ok := raw["profiles"]; ok {
		list := stringList(ps)
		if list == nil {
			list = []string{}
		}
		a.Profiles = &list
	}
	if dep := object(raw["@deprecated"]); dep != nil {
		a.DeprecatedSince, _ = dep["since"].(string)
		if a.DeprecatedSince == "" {
			return a, fmt.Errorf("%s: attribute %s: @deprecated without since", file, name)
		}
	}
	return a, nil
}

// typeOf maps a type name of the schema files to a dictionary type, or to
// facts.TypeObject and the object's name.
func (g *generator) typeOf(t string) (typ, objectType string) {
	if _, ok := g.s.types[t]; ok {
		return t, ""
	}
	return facts.TypeObject, t
}

func (g *generator) dictionaryAttribute(name string) (facts.DictionaryAttribute, error) {
	raw := object(g.s.dictionary[name])
	if raw == nil {
		return facts.DictionaryAttribute{}, fmt.Errorf("attribute %q is not in the dictionary", name)
	}
	t, _ := raw["type"].(string)
	if t == "" {
		return facts.DictionaryAttribute{}, fmt.Errorf("dictionary attribute %q has no type", name)
	}
	d := facts.DictionaryAttribute{Enum: enumOf(raw["enum"])}
	d.Type, d.ObjectType = g.typeOf(t)
	d.IsArray, _ = raw["is_array"].(bool)
	return d, nil
}

// facts assembles the facts file.
func (g *generator) facts(tag, commit string) (*facts.File, error) {
	f := &facts.File{
		Version:    g.s.version,
		Tag:        tag,
		Commit:     commit,
		Types:      make(map[string]facts.Type),
		Categories: make(map[string]facts.Category),
		Dictionary: make(map[string]facts.DictionaryAttribute),
		Classes:    g.classes,
		Objects:    g.objects,
		Profiles:   g.profiles,
		Source:     g.source,
	}
	f.KnownProfiles = slices.Sorted(maps.Keys(g.s.profiles))
	for name := range g.attributes {
		d, err := g.dictionaryAttribute(name)
		if err != nil {
			return nil, err
		}
		f.Dictionary[name] = d
	}
	for name := range g.types {
		if err := g.addType(f, name); err != nil {
			return nil, err
		}
	}
	for _, c := range g.classes {
		if cat, ok := g.s.categories[c.Category]; ok {
			f.Categories[c.Category] = cat
		}
	}
	if err := g.addObservableTypes(f); err != nil {
		return nil, err
	}
	g.checkConstraints(f)
	return f, nil
}

// The observable object's type_id enum is not written out in its file:
// the compiler gathers it from the "observable" numbers declared across
// the schema.
const (
	observableObject = "observable"
	observableTypeID = "type_id"
)

// addObservableTypes completes the enum of observable.type_id with the
// values the schema declares: "observable" of dictionary types, of
// dictionary attributes, of objects and of class and object attributes,
// and "observables" of classes.
func (g *generator) addObservableTypes(f *facts.File) error {
	o, ok := f.Objects[observableObject]
	if !ok {
		return nil
	}
	declared := make(map[string]string) // type_id value -> caption
	files := make(map[string]bool)
	declare := func(file string, id any, caption string) error {
		key := fmt.Sprint(id)
		if prev, dup := declared[key]; dup {
			return fmt.Errorf("%s: observable %s of %q is already %q", file, key, caption, prev)
		}
		declared[key] = caption
		files[file] = true
		return nil
	}
	if err := g.observablesOfDictionary(declare); err != nil {
		return err
	}
	for _, items := range []map[string]item{g.s.objects, g.s.classes} {
		for _, name := range slices.Sorted(maps.Keys(items)) {
			if err := g.observablesOf(items, name, declare); err != nil {
				return err
			}
		}
	}
	a := o.Attributes[observableTypeID]
	a.Enum = maps.Clone(a.Enum)
	if a.Enum == nil {
		a.Enum = make(map[string]string)
	}
	maps.Copy(a.Enum, declared)
	o.Attributes[observableTypeID] = a
	f.Objects[observableObject] = o
	g.source.Objects[observableObject] = append(g.source.Objects[observableObject], slices.Sorted(maps.Keys(files))...)
	return nil
}

type declareFunc func(file string, id any, caption string) error

func (g *generator) observablesOfDictionary(declare declareFunc) error {
	for _, group := range []jsonObject{g.s.types, g.s.dictionary} {
		for _, name := range slices.Sorted(maps.Keys(group)) {
			d := object(group[name])
			if id, ok := d["observable"]; ok {
				caption, _ := d["caption"].(string)
				if err := declare("dictionary.json", id, caption); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// observablesOf declares the observables of a class or object file.
func (g *generator) observablesOf(items map[string]item, name string, declare declareFunc) error {
	it := items[name]
	kind := "Object"
	if strings.HasPrefix(it.path, "events/") {
		kind = "Class"
	}
	caption := captionOf(items, name)
	if id, ok := it.data["observable"]; ok {
		if err := declare(it.path, id, caption); err != nil {
			return err
		}
	}
	attrs := object(it.data["attributes"])
	for _, attr := range slices.Sorted(maps.Keys(attrs)) {
		if id, ok := object(attrs[attr])["observable"]; ok {
			if err := declare(it.path, id, caption+" "+kind+": "+attr); err != nil {
				return err
			}
		}
	}
	paths := object(it.data["observables"])
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if err := declare(it.path, paths[p], caption+" "+kind+": "+p); err != nil {
			return err
		}
	}
	return nil
}

// captionOf is an item's caption, or the nearest one it inherits.
func captionOf(items map[string]item, name string) string {
	for at, seen := name, 0; at != "" && seen <= len(items); seen++ {
		it, ok := items[at]
		if !ok {
			break
		}
		if c, ok := it.data["caption"].(string); ok {
			return c
		}
		at, _ = it.data["extends"].(string)
	}
	return name
}

// addType records a dictionary type and the types it derives from.
func (g *generator) addType(f *facts.File, name string) error {
	if _, done := f.Types[name]; done {
		return nil
	}
	raw := object(g.s.types[name])
	if raw == nil {
		return fmt.Errorf("type %q is not in the dictionary", name)
	}
	var t facts.Type
	t.Type, _ = raw["type"].(string)
	t.Regex, _ = raw["regex"].(string)
	if n, ok := raw["max_len"]; ok {
		maxLen, err := intOf(n)
		if err != nil {
			return fmt.Errorf("type %s: max_len: %w", name, err)
		}
		t.MaxLen = maxLen
	}
	if r, ok := raw["range"].([]any); ok {
		for _, n := range r {
			v, err := intOf(n)
			if err != nil {
				return fmt.Errorf("type %s: range: %w", name, err)
			}
			t.Range = append(t.Range, int64(v))
		}
	}
	f.Types[name] = t
	if t.Type != "" {
		return g.addType(f, t.Type)
	}
	return nil
}

// checkConstraints warns of constraint names no attribute of the class
// or object (or of what it extends) defines.
func (g *generator) checkConstraints(f *facts.File) {
	for _, name := range slices.Sorted(maps.Keys(f.Classes)) {
		c := f.Classes[name]
		g.checkConstraintNames("class "+name, c.Constraints, func(attr string) bool {
			for at := name; at != ""; at = f.Classes[at].Extends {
				if _, ok := f.Classes[at].Attributes[attr]; ok {
					return true
				}
			}
			return false
		})
	}
	for _, name := range slices.Sorted(maps.Keys(f.Objects)) {
		o := f.Objects[name]
		g.checkConstraintNames("object "+name, o.Constraints, func(attr string) bool {
			for at := name; at != ""; at = f.Objects[at].Extends {
				if _, ok := f.Objects[at].Attributes[attr]; ok {
					return true
				}
			}
			return false
		})
	}
}

func (g *generator) checkConstraintNames(what string, cs *facts.Constraints, defined func(string) bool) {
	if cs == nil {
		return
	}
	for _, kind := range slices.Sorted(maps.Keys(*cs)) {
		for _, attr := range (*cs)[kind] {
			if !defined(attr) {
				g.warnings = append(g.warnings,
					fmt.Sprintf("%s: constraint %s names %s, which none of its attributes is", what, kind, attr))
			}
		}
	}
}

// constraintsOf reads an item's constraints; an empty "constraints" is
// kept, as it drops the inherited ones.
func constraintsOf(it item) (*facts.Constraints, error) {
	raw, ok := it.data["constraints"]
	if !ok {
		return nil, nil
	}
	cs := facts.Constraints{}
	for kind, names := range object(raw) {
		if kind != facts.AtLeastOne && kind != facts.JustOne {
			return nil, fmt.Errorf("%s: unknown constraint %q", it.path, kind)
		}
		cs[kind] = stringList(names)
	}
	return &cs, nil
}

// includeList reads the value of an attributes-level "$include": a path
// or a list of paths.
func includeList(v any) ([]string, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return []string{v}, nil
	case []any:
		list := stringList(v)
		if len(list) != len(v) {
			return nil, errors.New("not a list of paths")
		}
		return list, nil
	default:
		return nil, fmt.Errorf("unexpected %T", v)
	}
}

// enumOf reads an "enum": each value's caption.
func enumOf(v any) map[string]string {
	raw := object(v)
	if len(raw) == 0 {
		return nil
	}
	enum := make(map[string]string, len(raw))
	for k, e := range raw {
		enum[k], _ = object(e)["caption"].(string)
	}
	return enum
}

func object(v any) jsonObject {
	o, _ := v.(jsonObject)
	return o
}

func stringList(v any) []string {
	raw, _ := v.([]any)
	var list []string
	for _, e := range raw {
		if s, ok := e.(string); ok {
			list = append(list, s)
		}
	}
	return list
}

func intOf(v any) (int, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v is not a number", v)
	}
	i, err := strconv.Atoi(n.String())
	if err != nil {
		return 0, fmt.Errorf("%v is not an integer: %w", v, err)
	}
	return i, nil
}
