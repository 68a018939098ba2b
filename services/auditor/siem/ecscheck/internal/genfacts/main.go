// Command genfacts writes the facts file that package ecscheck embeds: the
// name, type and constraints of every field of one release of the Elastic
// Common Schema, read from generated/ecs/ecs_flat.yml at a tag of a local
// clone or mirror of github.com/elastic/ecs.
//
// It records facts only (names, types, allowed values, the event types each
// event category expects); no descriptions and no examples. The output is
// sorted and holds one field per line, so a regeneration diffs cleanly.
//
// Run it from the ecscheck directory (it is committed, not run in CI):
//
//	go run ./internal/genfacts -repo /work/.mirror/elastic+ecs/repo -tag v9.4.0
//
// which writes facts/ecs-9.4.0.json.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// source is the file of the ECS repository the facts are read from.
const source = "generated/ecs/ecs_flat.yml"

// flatField is the part of one ecs_flat.yml entry that genfacts reads.
// Everything else (description, short, example, otel, ...) is ignored.
type flatField struct {
	FlatName      string         `yaml:"flat_name"`
	Type          string         `yaml:"type"`
	Normalize     []string       `yaml:"normalize"`
	Required      bool           `yaml:"required"`
	ObjectType    string         `yaml:"object_type"`
	Pattern       string         `yaml:"pattern"`
	AllowedValues []allowedValue `yaml:"allowed_values"`
	// ExpectedValues are values ECS suggests, not a closed list.
	ExpectedValues []string     `yaml:"expected_values"`
	MultiFields    []multiField `yaml:"multi_fields"`
}

type allowedValue struct {
	Name               string   `yaml:"name"`
	ExpectedEventTypes []string `yaml:"expected_event_types"`
}

type multiField struct {
	Name string `yaml:"name"`
}

// fieldFacts is one field of the output; its JSON form is one line.
type fieldFacts struct {
	Type       string   `json:"type"`
	Array      bool     `json:"array,omitempty"`
	Required   bool     `json:"required,omitempty"`
	ObjectType string   `json:"object_type,omitempty"`
	Pattern    string   `json:"pattern,omitempty"`
	Allowed    []string `json:"allowed,omitempty"`
	Expected   []string `json:"expected,omitempty"`
	Multi      []string `json:"multi_fields,omitempty"`
}

func main() {
	repo := flag.String("repo", "/work/.mirror/elastic+ecs/repo", "git directory (bare mirror or clone) of github.com/elastic/ecs")
	tag := flag.String("tag", "v9.4.0", "ECS release tag to read "+source+" from")
	out := flag.String("out", "", "output file (default facts/ecs-<version>.json)")
	flag.Parse()

	if err := run(*repo, *tag, *out); err != nil {
		fmt.Fprintf(os.Stderr, "genfacts: %v\n", err)
		os.Exit(1)
	}
}

func run(repo, tag, out string) error {
	version := strings.TrimPrefix(tag, "v")
	if out == "" {
		out = filepath.Join("facts", "ecs-"+version+".json")
	}
	raw, err := gitShow(repo, tag, source)
	if err != nil {
		return err
	}
	var flat map[string]flatField
	if err := yaml.Unmarshal(raw, &flat); err != nil {
		return fmt.Errorf("parse %s at %s: %w", source, tag, err)
	}
	data, n, err := render(flat, version, tag)
	if err != nil {
		return fmt.Errorf("%s at %s: %w", source, tag, err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		return fmt.Errorf("write facts: %w", err)
	}
	fmt.Fprintf(os.Stderr, "genfacts: wrote %s: %d fields, %d bytes\n", out, n, len(data))
	return nil
}

// gitShow returns the content of path at tag in the git directory repo.
func gitShow(repo, tag, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "show", tag+":"+path)
	cmd.Stderr = &stderr
	data, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git show %s:%s in %s: %w: %s", tag, path, repo, err, strings.TrimSpace(stderr.String()))
	}
	return data, nil
}

// render builds the facts file from the parsed ecs_flat.yml and returns it
// with the number of fields.
func render(flat map[string]flatField, version, tag string) ([]byte, int, error) {
	if len(flat) == 0 {
		return nil, 0, errors.New("no fields")
	}
	names := make([]string, 0, len(flat))
	for name := range flat {
		names = append(names, name)
	}
	slices.Sort(names)

	var buf bytes.Buffer
	if err := writeHeader(&buf, version, tag); err != nil {
		return nil, 0, err
	}
	expected, err := expectedEventTypes(flat)
	if err != nil {
		return nil, 0, err
	}
	if err := writeExpected(&buf, expected); err != nil {
		return nil, 0, err
	}
	buf.WriteString("\"fields\":{\n")
	for i, name := range names {
		f, err := toFacts(name, flat[name])
		if err != nil {
			return nil, 0, err
		}
		if err := writeEntry(&buf, name, f, i == len(names)-1); err != nil {
			return nil, 0, err
		}
	}
	buf.WriteString("}}\n")
	return buf.Bytes(), len(names), nil
}

func writeHeader(buf *bytes.Buffer, version, tag string) error {
	buf.WriteString("{")
	for _, kv := range [][2]string{{"version", version}, {"tag", tag}, {"source", source}} {
		if err := writeEntry(buf, kv[0], kv[1], false); err != nil {
			return err
		}
	}
	return nil
}

func writeExpected(buf *bytes.Buffer, expected map[string][]string) error {
	cats := make([]string, 0, len(expected))
	for c := range expected {
		cats = append(cats, c)
	}
	slices.Sort(cats)
	buf.WriteString("\"expected_event_types\":{\n")
	for i, c := range cats {
		if err := writeEntry(buf, c, expected[c], i == len(cats)-1); err != nil {
			return err
		}
	}
	buf.WriteString("},\n")
	return nil
}

// writeEntry writes `"name":<json of v>` and a comma unless last, on a line.
func writeEntry(buf *bytes.Buffer, name string, v any, last bool) error {
	k, err := json.Marshal(name)
	if err != nil {
		return fmt.Errorf("encode name %q: %w", name, err)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", name, err)
	}
	buf.Write(k)
	buf.WriteByte(':')
	buf.Write(data)
	if !last {
		buf.WriteByte(',')
	}
	buf.WriteByte('\n')
	return nil
}

// toFacts keeps the facts of one field and checks the entry is coherent.
func toFacts(name string, f flatField) (fieldFacts, error) {
	if f.FlatName != name {
		return fieldFacts{}, fmt.Errorf("field %q: flat_name is %q", name, f.FlatName)
	}
	if f.Type == "" {
		return fieldFacts{}, fmt.Errorf("field %q: no type", name)
	}
	out := fieldFacts{
		Type:       f.Type,
		Array:      slices.Contains(f.Normalize, "array"),
		Required:   f.Required,
		ObjectType: f.ObjectType,
		Pattern:    f.Pattern,
		Expected:   slices.Sorted(slices.Values(f.ExpectedValues)),
	}
	for _, a := range f.AllowedValues {
		if a.Name == "" {
			return fieldFacts{}, fmt.Errorf("field %q: allowed value without a name", name)
		}
		out.Allowed = append(out.Allowed, a.Name)
	}
	slices.Sort(out.Allowed)
	for _, m := range f.MultiFields {
		out.Multi = append(out.Multi, m.Name)
	}
	slices.Sort(out.Multi)
	return out, nil
}

// expectedEventTypes maps each event.category value to the event.type values
// it expects, sorted.
func expectedEventTypes(flat map[string]flatField) (map[string][]string, error) {
	cat, ok := flat["event.category"]
	if !ok {
		return nil, errors.New("no field event.category")
	}
	out := make(map[string][]string, len(cat.AllowedValues))
	for _, a := range cat.AllowedValues {
		if len(a.ExpectedEventTypes) == 0 {
			return nil, fmt.Errorf("event.category %q: no expected_event_types", a.Name)
		}
		types := slices.Clone(a.ExpectedEventTypes)
		slices.Sort(types)
		out[a.Name] = types
	}
	return out, nil
}
