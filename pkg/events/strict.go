package events

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
)

// Every JSON document this package reads (an event's data, the signature
// envelope and its claim) is decoded the one strict way, by decodeStrict:
// exactly one JSON value into the Go type, with no member the type does not
// name, no name given twice, valid UTF-8 only, no null where the type holds
// a value, and every required member of the top-level object present. What
// the type cannot say (lengths, patterns, ranges, consistency) its Validate
// checks next. The JSON Schemas in schemas/ are the published
// specification of the same rules (the required members are read from
// them); the tests hold the two to each other.

// strictDecoder is the state of one decodeStrict: its options, whose
// hook sees every value before it is decoded, and the top-level members
// it saw.
type strictDecoder struct {
	opts json.Options
	seen []string
	strictOptions
}

// strictOptions are what decodeStrict asks of a document beyond its type.
type strictOptions struct {
	// required members of the top-level object.
	required []string
	// nonEmpty refuses "" for a string: no payload has an empty string
	// (an optional one is left out), and every schema says so.
	nonEmpty bool
	// reports is the shape of a verdict's report.
	reports report.Shape
}

var strictDecoders = sync.Pool{New: func() any {
	d := new(strictDecoder)
	d.opts = json.JoinOptions(
		json.RejectUnknownMembers(true),
		json.WithUnmarshalers(json.UnmarshalFromFunc(d.value)),
	)
	return d
}}

// value refuses null (encoding/json would leave the zero value) and
// notes each member of the top-level object; the value is then decoded
// as its type does.
func (d *strictDecoder) value(dec *jsontext.Decoder, v any) error {
	if dec.PeekKind() == 'n' {
		return errNull
	}
	if dec.StackDepth() == 1 {
		d.seen = append(d.seen, dec.StackPointer().LastToken())
	}
	if d.nonEmpty && dec.PeekKind() == '"' {
		if s := reflect.ValueOf(v).Elem(); s.Kind() == reflect.String {
			tok, err := dec.ReadToken()
			if err != nil {
				return err
			}
			if tok.String() == "" {
				return errEmpty
			}
			s.SetString(tok.String())
			return nil
		}
	}
	if r, ok := v.(*report.Report); ok && d.reports != report.AnyShape {
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if *r, err = report.Parse(raw, d.reports); err != nil {
			return err
		}
		return nil
	}
	return errors.ErrUnsupported // decode as the type does
}

var (
	errNull  = errors.New("null is not a value of this member")
	errEmpty = errors.New("an empty string is not a value of this member")
)

// errMissing is the error of a required member left out.
type errMissing struct{ name string }

func (e errMissing) Error() string { return fmt.Sprintf("missing member %q", e.name) }

// decodeStrict decodes data into v, a pointer, strictly, as o asks. When
// the data is malformed JSON as well as not of v's type, the malformed
// JSON is reported.
func decodeStrict(data []byte, v any, o strictOptions) error {
	d := strictDecoders.Get().(*strictDecoder)
	d.strictOptions = o
	defer func() {
		d.seen = d.seen[:0]
		strictDecoders.Put(d)
	}()
	err := json.Unmarshal(data, v, d.opts)
	if err == nil {
		for _, name := range o.required {
			if !slices.Contains(d.seen, name) {
				return errMissing{name}
			}
		}
		return nil
	}
	if _, ok := errors.AsType[*json.SemanticError](err); ok {
		// Decoding stops at the first value not of the type: a syntax
		// error after it goes first.
		if serr := syntaxError(data); serr != nil {
			return serr
		}
	}
	return err
}

// syntaxError is why data is not exactly one well-formed JSON value, or
// nil.
func syntaxError(data []byte) error {
	var v jsontext.Value
	return json.Unmarshal(data, &v)
}

// dataError is the *Error of decodeStrict's error on an event's data:
// ReasonDuplicateKey or ReasonMalformedJSON for JSON that is not one
// well-formed value, ReasonSchema for one that is not of the payload's
// type (an unknown member, a value of another type, a null, a required
// member left out).
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
	} else if _, ok := errors.AsType[errMissing](err); ok {
		field = "/"
	}
	return &Error{Reason: reason, Field: field, Err: err}
}
