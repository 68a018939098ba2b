// Package strictjson decodes JSON the one strict way runtimetruth reads
// what someone else wrote (an event's data, a signature's envelope and
// claim, a stored record, a request): exactly one JSON value into the Go
// type, valid UTF-8 only, no name given twice, no member the type does not
// name (names match exactly), and nothing after the value (white space
// aside), so that two readers of the same bytes can never disagree on what
// they hold. Options ask more of a document whose type cannot say it: the
// members it requires, no null, no empty string. What the type and the
// options cannot say (lengths, patterns, consistency) the type's Validate
// checks next.
//
// It is github.com/go-json-experiment/json (encoding/json/v2) with its
// strict options, and one hook that sees every value before it is decoded.
package strictjson

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Option asks more of a document than its type does.
type Option func(*state)

// Required refuses a document whose top-level object lacks one of names
// (a member whose zero value is valid cannot tell absence otherwise).
func Required(names ...string) Option { return func(s *state) { s.required = names } }

// NoNull refuses null wherever a Go value is decoded (encoding/json would
// leave the zero value); a json.RawMessage's contents are not looked into.
func NoNull() Option { return func(s *state) { s.noNull = true } }

// NoEmptyStrings refuses "" for a Go string (a document whose optional
// strings are left out rather than empty).
func NoEmptyStrings() Option { return func(s *state) { s.noEmpty = true } }

// Intercept decodes the values fn takes (handled) in place of their type;
// fn sees every value first, with the decoder before it.
func Intercept(fn func(dec *jsontext.Decoder, v any) (handled bool, err error)) Option {
	return func(s *state) { s.intercept = fn }
}

// Errors of the options, wrapped with the member.
var (
	ErrNull    = errors.New("null is not a value of this member")
	ErrEmpty   = errors.New("an empty string is not a value of this member")
	ErrMissing = errors.New("a required member is missing")
)

// state is one Decode's: its json options, whose hook (value) sees every
// value, what the options ask and the top-level members seen.
type state struct {
	opts      json.Options
	required  []string
	noNull    bool
	noEmpty   bool
	intercept func(dec *jsontext.Decoder, v any) (bool, error)
	seen      []string
}

var states = sync.Pool{New: func() any {
	s := new(state)
	s.opts = json.JoinOptions(
		json.RejectUnknownMembers(true),
		json.WithUnmarshalers(json.UnmarshalFromFunc(s.value)),
	)
	return s
}}

// value is the hook: it notes each member of the top-level object and
// applies the options; the value is then decoded as its type does.
func (s *state) value(dec *jsontext.Decoder, v any) error {
	kind := dec.PeekKind()
	if s.required != nil && dec.StackDepth() == 1 {
		s.seen = append(s.seen, dec.StackPointer().LastToken())
	}
	if s.noNull && kind == 'n' {
		return ErrNull
	}
	if s.intercept != nil {
		if handled, err := s.intercept(dec, v); handled || err != nil {
			return err
		}
	}
	if s.noEmpty && kind == '"' {
		if str := reflect.ValueOf(v).Elem(); str.Kind() == reflect.String {
			tok, err := dec.ReadToken()
			if err != nil {
				return err
			}
			if tok.String() == "" {
				return ErrEmpty
			}
			str.SetString(tok.String())
			return nil
		}
	}
	return errors.ErrUnsupported // decode as the type does
}

// Decode decodes data into v, a pointer, strictly, as opts ask. When the
// data is malformed JSON as well as not of v's type, the malformed JSON is
// reported (a *jsontext.SyntacticError; a value not of the type is a
// *json.SemanticError).
func Decode(data []byte, v any, opts ...Option) error {
	s := states.Get().(*state)
	for _, o := range opts {
		o(s)
	}
	defer func() {
		*s = state{opts: s.opts, seen: s.seen[:0]}
		states.Put(s)
	}()
	err := json.Unmarshal(data, v, s.opts)
	if err == nil {
		for _, name := range s.required {
			if !slices.Contains(s.seen, name) {
				return fmt.Errorf("%w: %q", ErrMissing, name)
			}
		}
		return nil
	}
	if se, ok := errors.AsType[*json.SemanticError](err); ok {
		// Decoding stops at the first value not of the type: a syntax
		// error after it goes first.
		var raw jsontext.Value
		if serr := json.Unmarshal(data, &raw); serr != nil {
			return serr
		}
		return &SemanticError{se}
	}
	return err
}

// SemanticError is a value not of the Go type (or refused by an option):
// the json package's error, whose own message varies its wording from one
// process to the next on purpose, with a message that does not.
type SemanticError struct{ Err *json.SemanticError }

func (e *SemanticError) Error() string {
	se := e.Err
	b := []byte("json: cannot decode")
	if se.JSONKind != 0 {
		b = append(b, " JSON "...)
		b = append(b, se.JSONKind.String()...)
	}
	if se.GoType != nil {
		b = append(b, " into Go "...)
		b = append(b, se.GoType.String()...)
	}
	if se.JSONPointer != "" {
		b = append(b, " at "...)
		b = strconv.AppendQuote(b, string(se.JSONPointer))
	}
	if se.Err != nil {
		b = append(b, ": "...)
		b = append(b, se.Err.Error()...)
	}
	return string(b)
}

// Unwrap returns the json package's error.
func (e *SemanticError) Unwrap() error { return e.Err }
