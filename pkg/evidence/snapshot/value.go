package snapshot

import (
	"strconv"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// Type is the type of a scalar evidence Value.
type Type uint8

// The scalar types schema v1 allows in evidence data.
const (
	TypeNull Type = iota
	TypeString
	TypeInt
	TypeBool
)

func (t Type) String() string {
	switch t {
	case TypeNull:
		return "null"
	case TypeString:
		return "string"
	case TypeInt:
		return "integer"
	case TypeBool:
		return "boolean"
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Value is one scalar evidence value. Values are comparable with ==, and
// values of different types are never equal (true is not 1, null is not "").
type Value struct {
	s   string
	i   int64
	typ Type // after the words, so that a Value is 32 bytes, not 40
	b   bool
}

// Null returns the JSON null value.
func Null() Value { return Value{} }

// String returns a string value.
func String(s string) Value { return Value{typ: TypeString, s: s} }

// Int returns an integer value.
func Int(n int64) Value { return Value{typ: TypeInt, i: n} }

// Bool returns a boolean value.
func Bool(b bool) Value { return Value{typ: TypeBool, b: b} }

// OptString returns String(s), or Null when ok is false.
func OptString(s string, ok bool) Value {
	if !ok {
		return Null()
	}
	return String(s)
}

// Type returns the value's type.
func (v Value) Type() Type { return v.typ }

// Str returns a string value's text.
func (v Value) Str() (string, bool) { return v.s, v.typ == TypeString }

// IntValue returns an integer value.
func (v Value) IntValue() (int64, bool) { return v.i, v.typ == TypeInt }

// BoolValue returns a boolean value.
func (v Value) BoolValue() (bool, bool) { return v.b, v.typ == TypeBool }

// String renders the value as RuntimeTruth's diff does: null, true/false,
// decimal integers and strings verbatim.
func (v Value) String() string {
	switch v.typ {
	case TypeString:
		return v.s
	case TypeInt:
		return strconv.FormatInt(v.i, 10)
	case TypeBool:
		return strconv.FormatBool(v.b)
	}
	return "null"
}

// Tree returns the value as a JSON tree node.
func (v Value) Tree() jsontree.Value {
	switch v.typ {
	case TypeString:
		return jsontree.Value{Kind: jsontree.String, Text: v.s}
	case TypeInt:
		return jsontree.Value{Kind: jsontree.Number, Text: strconv.FormatInt(v.i, 10)}
	case TypeBool:
		return jsontree.Value{Kind: jsontree.Bool, Bool: v.b}
	}
	return jsontree.Value{Kind: jsontree.Null}
}

// Data is an evidence record's flat map of scalar values.
type Data map[string]Value

// MarshalJSON encodes the value as its JSON scalar.
func (v Value) MarshalJSON() ([]byte, error) { return v.AppendJSON(nil), nil }

// AppendJSON appends the value's JSON scalar, as MarshalJSON writes it
// (strings escaped as RFC 8785 does).
func (v Value) AppendJSON(dst []byte) []byte {
	switch v.typ {
	case TypeString:
		return canonjson.AppendString(dst, v.s)
	case TypeInt:
		return strconv.AppendInt(dst, v.i, 10)
	case TypeBool:
		return strconv.AppendBool(dst, v.b)
	}
	return append(dst, "null"...)
}

// UnmarshalJSON decodes a JSON scalar strictly.
func (v *Value) UnmarshalJSON(b []byte) error {
	t, err := jsontree.Parse(b)
	if err != nil {
		return err
	}
	*v, err = scalar(t, "value")
	return err
}

// ScalarOf returns the evidence value of a JSON scalar (string, integer
// within ±(2^53-1), boolean or null); anything else is an error.
func ScalarOf(v jsontree.Value) (Value, error) { return scalar(v, "value") }
