package events

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
)

// DecodeData decodes data as the payload of event type typ: strictly
// (decodeData), then its Validate. The payload is one of the payload
// types, by value. Every error is an *Error.
func DecodeData(typ string, data []byte) (Payload, error) {
	s, ok := byType[typ]
	if !ok {
		return nil, Invalid(ReasonUnknownType, "type", "%q is not in the catalog", typ)
	}
	return s.decode(s, data)
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

// Validate checks p (its Validate) and returns the *Error of what it
// breaks: ReasonSchema for a rule its JSON Schema states, else
// ReasonInvalidPayload.
func Validate(p Payload) error {
	if err := p.Validate(); err != nil {
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
