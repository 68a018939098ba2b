package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
	"io/fs"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
)

// The JSON Schemas (schemas/, SchemaFS) are the published specification
// of each payload. The decoder does not run them; the tests hold it to
// them (validateData), over the golden examples, mutations and fuzzing.

// validateData checks that data is one well-formed JSON value without
// duplicate keys that matches the type's schema.
func validateData(s *Spec, data []byte) error {
	if len(data) > MaxDataSize {
		return Invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	if err := strictjson.Decode(data, new(jsontext.Value)); err != nil {
		return dataError(err) // malformed JSON or a name given twice
	}
	tree, err := jsontree.Parse(data)
	if err != nil {
		return &Error{Reason: ReasonMalformedJSON, Field: "data", Err: err}
	}
	schemas, err := compiledSchemas()
	if err != nil {
		return err
	}
	sch := schemas[s.SchemaURI]
	if sch == nil {
		return fmt.Errorf("events: no schema %s for %s", s.SchemaURI, s.Type)
	}
	if err := sch.Validate(instance(tree)); err != nil {
		field := "data"
		if ve, ok := errors.AsType[*jsonschema.ValidationError](err); ok {
			err = schemaError(ve)
			if loc := firstLocation(ve); loc != "" {
				field = loc
			}
		}
		return &Error{Reason: ReasonSchema, Field: field, Err: err}
	}
	return nil
}

var printer = message.NewPrinter(language.English)

// schemaError shortens a validation error to its innermost causes.
func schemaError(ve *jsonschema.ValidationError) error {
	var msgs []string
	var walk func(*jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			loc := "/" + strings.Join(v.InstanceLocation, "/")
			msgs = append(msgs, fmt.Sprintf("at %s: %s", loc, v.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range v.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(msgs) > 8 {
		msgs = append(msgs[:8], fmt.Sprintf("and %d more", len(msgs)-8))
	}
	return fmt.Errorf("does not match %s: %s", ve.SchemaURL, strings.Join(msgs, "; "))
}

func firstLocation(ve *jsonschema.ValidationError) string {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return "/" + strings.Join(ve.InstanceLocation, "/")
}

// instance converts a parsed document to the form jsonschema validates
// (numbers as json.Number, objects as maps).
func instance(v jsontree.Value) any {
	switch v.Kind {
	case jsontree.Object:
		m := make(map[string]any, len(v.Members))
		for _, mem := range v.Members {
			m[mem.Key] = instance(mem.Value)
		}
		return m
	case jsontree.Array:
		a := make([]any, len(v.Items))
		for i, it := range v.Items {
			a[i] = instance(it)
		}
		return a
	case jsontree.String:
		return v.Text
	case jsontree.Number:
		return json.Number(v.Text)
	case jsontree.Bool:
		return v.Bool
	}
	return nil
}

// ReportSchemaURI is the $id of pkg/evidence/report's schema.
const ReportSchemaURI = "https://runtimetruth.dev/schemas/report/v1.json"

func newCompiler() (*jsonschema.Compiler, []string, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if _, err := addSchema(c, "report schema", report.Schema); err != nil {
		return nil, nil, err
	}
	ids, err := addSchemaFiles(c)
	if err != nil {
		return nil, nil, err
	}
	return c, ids, nil
}

func addSchemaFiles(c *jsonschema.Compiler) ([]string, error) {
	entries, err := fs.ReadDir(SchemaFS(), ".")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, ent := range entries {
		raw, err := fs.ReadFile(SchemaFS(), ent.Name())
		if err != nil {
			return nil, err
		}
		id, err := addSchema(c, ent.Name(), raw)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// addSchema adds a schema document under its $id.
func addSchema(c *jsonschema.Compiler, name string, raw []byte) (string, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return "", fmt.Errorf("schema %s: %w", name, err)
	}
	obj, _ := doc.(map[string]any)
	id, _ := obj["$id"].(string)
	if id == "" {
		return "", fmt.Errorf("schema %s: no $id", name)
	}
	if err := c.AddResource(id, doc); err != nil {
		return "", fmt.Errorf("schema %s: %w", name, err)
	}
	return id, nil
}

// compiledSchemas compiles every payload schema once, keyed by $id.
var compiledSchemas = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c, ids, err := newCompiler()
	if err != nil {
		return nil, err
	}
	out := make(map[string]*jsonschema.Schema, len(ids))
	for _, id := range ids {
		sch, err := c.Compile(id)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", id, err)
		}
		out[id] = sch
	}
	return out, nil
})
