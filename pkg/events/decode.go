package events

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
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

// decodeInto decodes an event's data into p (decodeData), then checks it
// (p's Validate).
func decodeInto[T Payload](s *Spec, data []byte, p *T) error {
	if err := decodeData(s, data, p); err != nil {
		return err
	}
	if err := (*p).Validate(); err != nil {
		return payloadError(err)
	}
	return nil
}

// payloadError is the *Error of a payload's Validate error.
func payloadError(err error) error {
	if fe, ok := errors.AsType[*fieldError](err); ok {
		reason := ReasonInvalidPayload
		if fe.schema {
			reason = ReasonSchema
		}
		return &Error{Reason: reason, Field: "/" + fe.field, Err: fe.err}
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

// requiredMembers reads the members a payload schema requires of the
// top-level object (its "required"), which decodeStrict checks are
// present.
func requiredMembers(schema string) []string {
	raw, err := fs.ReadFile(SchemaFS(), schema)
	if err != nil {
		panic(fmt.Sprintf("events: schema %s: %v", schema, err)) // embedded; the tests read every one
	}
	var doc struct {
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		panic(fmt.Sprintf("events: schema %s: %v", schema, err))
	}
	return doc.Required
}
