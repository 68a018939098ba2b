package events

import (
	"errors"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

// An event's data is decoded the one strict way (strictjson.Decode) with
// what no payload type can say itself: no null, no empty string (a
// payload leaves an optional string out), every member its schema
// requires present (read from the schema, Spec.required), and a verdict's
// report in the shape of the verdict's version. Validate checks the rest
// (lengths, patterns, consistency). The JSON Schemas in schemas/ are the
// published specification of the same rules; the tests hold the two to
// each other.

// decodeData decodes an event's data of type s into p, a pointer to a
// payload: within MaxDataSize, strictly.
func decodeData(s *Spec, data []byte, p any) error {
	if len(data) > MaxDataSize {
		return Invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	if err := strictjson.Decode(data, p, s.dataOptions...); err != nil {
		return dataError(err)
	}
	return nil
}

// dataOptions are the options of a type's data, made once per type: no
// null, no empty string, the members required present, and a verdict's
// report read in shape (report.AnyShape: the type holds no report).
func dataOptions(required []string, shape report.Shape) []strictjson.Option {
	opts := []strictjson.Option{strictjson.NoNull(), strictjson.NoEmptyStrings(), strictjson.Required(required...)}
	if shape == report.AnyShape {
		return opts
	}
	return append(opts, strictjson.Intercept(func(dec *jsontext.Decoder, v any) (bool, error) {
		r, ok := v.(*report.Report)
		if !ok {
			return false, nil
		}
		raw, err := dec.ReadValue()
		if err == nil {
			*r, err = report.Parse(raw, shape)
		}
		return true, err
	}))
}

// dataError is the *Error of strictjson's error on an event's data:
// ReasonDuplicateKey or ReasonMalformedJSON for JSON that is not one
// well-formed value, ReasonSchema for one that is not of the payload's
// type (an unknown member, a value of another type, a null, an empty
// string, a required member left out).
func dataError(err error) *Error {
	reason := ReasonSchema
	if _, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		reason = ReasonMalformedJSON
		if errors.Is(err, jsontext.ErrDuplicateName) {
			reason = ReasonDuplicateKey
		}
	}
	field := "data"
	if se, ok := errors.AsType[*json.SemanticError](err); ok {
		field = "/" + strings.TrimPrefix(string(se.JSONPointer), "/")
	} else if errors.Is(err, strictjson.ErrMissing) {
		field = "/"
	}
	return &Error{Reason: reason, Field: field, Err: err}
}
