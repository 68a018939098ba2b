package events

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"sync"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

// Decode checks e (as FromNATS does) and decodes its data as T strictly:
// the data must be one JSON object without duplicate keys that matches the
// type's JSON Schema (so no unknown field), then pass T's Validate; the
// payload must imply e's type and subject attribute. An event of another
// type fails with ReasonUnexpectedType. Decode[Payload] decodes any
// catalog type: the payload is one of the payload types, by value
// (EvidenceCollected, Verdict, ...). Every error is an *Error.
func Decode[T Payload](e event.Event) (T, error) {
	if err := checkEvent(e); err != nil {
		var zero T
		return zero, err
	}
	return decodeAs[T](e)
}

// decodeAs is Decode of an event checkEvent (or FromNATS) accepted.
func decodeAs[T Payload](e event.Event) (T, error) {
	var zero T
	s := byType[e.Type()]
	if want := reflect.TypeFor[T](); want != anyPayload && s.goType != want {
		return zero, invalid(ReasonUnexpectedType, "type", "%s carries %s, not %s", s.Type, s.Payload, want.Name())
	}
	p, err := decodePayload(s, e)
	if err != nil {
		return zero, err
	}
	return p.(T), nil
}

// anyPayload is Decode[Payload]'s T.
var anyPayload = reflect.TypeFor[Payload]()

// Msg is a received message; jetstream.Msg has this method set.
type Msg interface {
	Subject() string
	Headers() nats.Header
	Data() []byte
}

// Read decodes a received message as an event carrying T (FromNATS, then
// Decode), and checks that it arrived on the subject the payload implies.
// Read[Payload] reads any catalog type.
func Read[T Payload](m Msg) (event.Event, T, error) {
	var zero T
	e, err := FromNATS(m.Headers(), m.Data())
	if err != nil {
		return event.Event{}, zero, err
	}
	p, err := decodeAs[T](e)
	if err != nil {
		return event.Event{}, zero, err
	}
	if err := checkNATSSubject(p, m.Subject()); err != nil {
		return event.Event{}, zero, err
	}
	return e, p, nil
}

func checkNATSSubject(p Payload, subject string) error {
	if want := p.NATSSubject(); subject != want {
		return invalid(ReasonSubjectMismatch, "nats subject", "arrived on %q, but the payload goes to %q", subject, want)
	}
	return nil
}

func decodePayload(s *Spec, e event.Event) (Payload, error) {
	p, err := s.decode(s, e.Data())
	if err != nil {
		return nil, err
	}
	if err := checkDecoded(s, e, p); err != nil {
		return nil, err
	}
	return p, nil
}

// checkDecoded checks that p, decoded from e's data, implies e's type and
// subject attribute.
func checkDecoded(s *Spec, e event.Event, p Payload) error {
	if p.Type() != s.Current() {
		return invalid(ReasonInvalidPayload, "type", "the payload is a %s event, not %s", p.Type(), e.Type())
	}
	if want := p.Subject(); e.Subject() != want {
		return invalid(ReasonSubjectMismatch, "subject", "%q, but the payload's subject is %q", e.Subject(), want)
	}
	return nil
}

// decodeInto decodes data into p: validateData, then encoding/json with
// DisallowUnknownFields, then p's Validate.
func decodeInto[T Payload](s *Spec, data []byte, p *T) error {
	if err := validateData(s, data); err != nil {
		return err
	}
	if err := strictjson.Decode(data, p); err != nil {
		return &Error{Reason: ReasonInvalidPayload, Field: "data", Err: err}
	}
	if err := (*p).Validate(); err != nil {
		return payloadError(err)
	}
	return nil
}

// validateData checks that data is one well-formed JSON value without
// duplicate keys that matches the type's schema.
func validateData(s *Spec, data []byte) error {
	if len(data) > MaxDataSize {
		return invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	tree, err := jsontree.Parse(data)
	if err != nil {
		return syntaxError(err)
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

func payloadError(err error) error {
	if fe, ok := errors.AsType[*fieldError](err); ok {
		return &Error{Reason: ReasonInvalidPayload, Field: "/" + fe.field, Err: fe.err}
	}
	return &Error{Reason: ReasonInvalidPayload, Field: "data", Err: err}
}

//go:embed schemas/*.schema.json
var schemaFiles embed.FS

// SchemaFS returns the JSON Schemas of the payloads (draft 2020-12), one
// file per Spec.Schema. The verdict schema refers to the report schema of
// pkg/evidence/report by its $id.
func SchemaFS() fs.FS {
	sub, err := fs.Sub(schemaFiles, "schemas")
	if err != nil {
		panic(err) // the embedded directory exists
	}
	return sub
}

// ReportSchemaURI is the $id of pkg/evidence/report's schema.
const ReportSchemaURI = "https://runtimetruth.dev/schemas/report/v1.json"

// Compiler returns a JSON Schema compiler that knows every payload schema
// and the report schema by their $id, and asserts formats.
func Compiler() (*jsonschema.Compiler, error) {
	c, _, err := newCompiler()
	return c, err
}

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
	entries, err := fs.ReadDir(schemaFiles, "schemas")
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, ent := range entries {
		raw, err := fs.ReadFile(schemaFiles, "schemas/"+ent.Name())
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
