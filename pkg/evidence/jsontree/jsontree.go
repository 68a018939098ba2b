package jsontree

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON types.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

func (k Kind) String() string {
	switch k {
	case Null:
		return "null"
	case Bool:
		return "boolean"
	case Number:
		return "number"
	case String:
		return "string"
	case Array:
		return "array"
	case Object:
		return "object"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one parsed JSON value.
type Value struct {
	Kind Kind
	// Bool holds a boolean's value.
	Bool bool
	// Text holds a string's decoded value, or a number's literal text.
	Text string
	// Items holds an array's elements.
	Items []Value
	// Members holds an object's members in document order; keys are unique.
	Members []Member
}

// Member is one key/value pair of an object.
type Member struct {
	Key   string
	Value Value
}

// IsInteger reports whether v is a number written without fraction or exponent.
func (v Value) IsInteger() bool {
	if v.Kind != Number {
		return false
	}
	for i := 0; i < len(v.Text); i++ {
		switch v.Text[i] {
		case '.', 'e', 'E':
			return false
		}
	}
	return true
}

// Int64 returns an integer number's value.
func (v Value) Int64() (int64, error) {
	if !v.IsInteger() {
		return 0, fmt.Errorf("%s is not an integer", v.Kind)
	}
	n, err := strconv.ParseInt(v.Text, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("integer %s out of range", v.Text)
	}
	return n, nil
}

// Float64 returns a number's value as an IEEE 754 double.
func (v Value) Float64() (float64, error) {
	if v.Kind != Number {
		return 0, fmt.Errorf("%s is not a number", v.Kind)
	}
	return strconv.ParseFloat(v.Text, 64)
}

// Get returns the member named key of an object.
func (v Value) Get(key string) (Value, bool) {
	for _, m := range v.Members {
		if m.Key == key {
			return m.Value, true
		}
	}
	return Value{}, false
}

// MaxDepth is the deepest nesting Parse accepts.
const MaxDepth = 128

// ErrSyntax is wrapped by every error Parse returns.
var ErrSyntax = errors.New("invalid JSON")

// SyntaxError describes where and why parsing failed.
type SyntaxError struct {
	Offset int // byte offset of the problem
	Line   int // 1-based
	Column int // 1-based, in bytes
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d column %d: %s", e.Line, e.Column, e.Msg)
}

// Unwrap lets errors.Is match ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

// Parse parses exactly one JSON value (surrounded by optional whitespace).
// The JSON text is read by encoding/json/v2's jsontext, whose defaults are
// the strictness the package promises (duplicate names, invalid UTF-8 and
// lone surrogates refused).
func Parse(data []byte) (Value, error) {
	p := parsers.Get().(*parser)
	p.dec.Reset(bytes.NewReader(data))
	// Every string and number of the document is written once into one
	// buffer, which the values' texts share (a strings.Builder never
	// changes what it has written): one allocation per document.
	p.text = strings.Builder{}
	p.text.Grow(len(data))
	defer func() {
		if len(data) <= maxPooledInput { // a decoder keeps its buffer
			p.dec.Reset(eof{})
			p.text = strings.Builder{}
			clear(p.items[:cap(p.items)])
			clear(p.members[:cap(p.members)])
			parsers.Put(p)
		}
	}()
	v, err := p.read(0)
	if err == nil {
		if _, err = p.dec.ReadToken(); err == nil {
			err = errAfterValue
		} else if errors.Is(err, io.EOF) {
			return v, nil
		}
	}
	offset, msg := int(p.dec.InputOffset()), err.Error()
	if se, ok := errors.AsType[*jsontext.SyntacticError](err); ok {
		offset = int(se.ByteOffset)
		msg, _, _ = strings.Cut(strings.TrimPrefix(se.Error(), "jsontext: "), " after offset ")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		msg = "unexpected end of JSON input"
	}
	return Value{}, syntaxErrorAt(data, offset, "%s", msg)
}

// parser is Parse's state: the decoder, the document's text, and the
// items and members of the arrays and objects being read, one stack each,
// from which each is copied at its size once complete.
type parser struct {
	dec     *jsontext.Decoder
	text    strings.Builder
	unquote []byte
	items   []Value
	members []Member
}

// parsers keeps parsers (their decoders' buffers and stacks) from one
// Parse to the next.
var parsers = sync.Pool{New: func() any { return &parser{dec: jsontext.NewDecoder(eof{})} }}

// maxPooledInput is the largest input after which a parser is kept, as
// bufpool keeps buffers up to 64 KiB.
const maxPooledInput = 64 << 10

// eof is an empty input, for a decoder at rest.
type eof struct{}

func (eof) Read([]byte) (int, error) { return 0, io.EOF }

var (
	errAfterValue = errors.New("unexpected data after the top-level value")
	errTooDeep    = fmt.Errorf("nesting deeper than %d", MaxDepth)
	// errNameNotString is not returned: jsontext refuses such a name.
	errNameNotString = errors.New("object member name must be a string")
)

// read reads the next value, at nesting depth.
func (p *parser) read(depth int) (Value, error) {
	switch k := p.dec.PeekKind(); k {
	case '"':
		s, err := p.string()
		return Value{Kind: String, Text: s}, err
	case '0':
		raw, err := p.dec.ReadValue()
		return Value{Kind: Number, Text: p.keep(raw)}, err
	case '[':
		if _, err := p.dec.ReadToken(); err != nil {
			return Value{}, err
		}
		if depth >= MaxDepth {
			return Value{}, errTooDeep
		}
		mark := len(p.items)
		for p.dec.PeekKind() != ']' {
			item, err := p.read(depth + 1)
			if err != nil {
				return Value{}, err
			}
			p.items = append(p.items, item)
		}
		v := Value{Kind: Array, Items: append(make([]Value, 0, len(p.items)-mark), p.items[mark:]...)}
		clear(p.items[mark:])
		p.items = p.items[:mark]
		_, err := p.dec.ReadToken()
		return v, err
	case '{':
		if _, err := p.dec.ReadToken(); err != nil {
			return Value{}, err
		}
		if depth >= MaxDepth {
			return Value{}, errTooDeep
		}
		mark := len(p.members)
		for k := p.dec.PeekKind(); k != '}'; k = p.dec.PeekKind() {
			if k != '"' { // ReadToken's error: jsontext's ReadValue would read on
				_, err := p.dec.ReadToken()
				return Value{}, cmp.Or(err, errNameNotString)
			}
			key, err := p.string()
			if err != nil {
				return Value{}, err
			}
			val, err := p.read(depth + 1)
			if err != nil {
				return Value{}, err
			}
			p.members = append(p.members, Member{Key: key, Value: val})
		}
		v := Value{Kind: Object, Members: append(make([]Member, 0, len(p.members)-mark), p.members[mark:]...)}
		clear(p.members[mark:])
		p.members = p.members[:mark]
		_, err := p.dec.ReadToken()
		return v, err
	}
	tok, err := p.dec.ReadToken()
	if err != nil {
		return Value{}, err
	}
	switch k := tok.Kind(); k {
	case 'n':
		return Value{Kind: Null}, nil
	case 't', 'f':
		return Value{Kind: Bool, Bool: k == 't'}, nil
	}
	return Value{}, fmt.Errorf("unexpected %v", tok)
}

// string reads a string (or an object member's name) and returns its
// decoded value.
func (p *parser) string() (string, error) {
	raw, err := p.dec.ReadValue()
	if err != nil {
		return "", err
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return p.keep(raw[1 : len(raw)-1]), nil
	}
	if p.unquote, err = jsontext.AppendUnquote(p.unquote[:0], raw); err != nil {
		return "", err
	}
	return p.keep(p.unquote), nil
}

// keep writes b to the document's text and returns it as a string.
func (p *parser) keep(b []byte) string {
	start := p.text.Len()
	p.text.Write(b)
	return p.text.String()[start:]
}

// syntaxErrorAt returns the syntax error at byte offset pos of data, with
// its line and column.
func syntaxErrorAt(data []byte, pos int, format string, args ...any) *SyntaxError {
	line, col := 1, 1
	end := min(pos, len(data))
	for i := 0; i < end; i++ {
		if data[i] == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return &SyntaxError{Offset: pos, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// AppendEscape appends the JSON escape of an ASCII byte as RFC 8785,
// encoding/json and Python's json write it: a two-character escape for
// '"', '\\', backspace, form feed, newline, carriage return and tab, else
// \u00xx (lower-case hex). It is the one encoder of escapes for the JSON
// writers whose bytes are the contract (canonjson, pyjson); which bytes
// and runes each escapes is its own.
func AppendEscape(dst []byte, c byte) []byte {
	if e := shortEscapes[c]; e != 0 {
		return append(dst, '\\', e)
	}
	const hex = "0123456789abcdef"
	return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
}

// shortEscapes maps the bytes with a two-character escape to its second
// character.
var shortEscapes = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}
