package jsontree

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
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
func Parse(data []byte) (Value, error) {
	p := parser{data: data}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return Value{}, p.errorf("unexpected data after the top-level value")
	}
	return v, nil
}

type parser struct {
	data []byte
	pos  int
}

func (p *parser) errorf(format string, args ...any) error {
	return SyntaxErrorAt(p.data, p.pos, format, args...)
}

// SyntaxErrorAt returns the syntax error at byte offset pos of data, with
// its line and column: how Parse locates its errors, for the other
// scanners of JSON text (canonjson's transcoder) to locate theirs alike.
func SyntaxErrorAt(data []byte, pos int, format string, args ...any) *SyntaxError {
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

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (Value, error) {
	if p.pos >= len(p.data) {
		return Value{}, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.string()
		return Value{Kind: String, Text: s}, err
	case c == 't':
		return Value{Kind: Bool, Bool: true}, p.literal("true")
	case c == 'f':
		return Value{Kind: Bool}, p.literal("false")
	case c == 'n':
		return Value{Kind: Null}, p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return Value{}, p.errorf("unexpected character %q", rune(c))
	}
}

func (p *parser) literal(word string) error {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return p.errorf("invalid literal (expected %s)", word)
	}
	p.pos += len(word)
	return nil
}

func (p *parser) object(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.errorf("nesting deeper than %d", MaxDepth)
	}
	p.pos++ // {
	v := Value{Kind: Object}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	var seen map[string]struct{}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return Value{}, p.errorf("expected a string object key")
		}
		keyPos := p.pos
		key, err := p.string()
		if err != nil {
			return Value{}, err
		}
		if dup := hasKey(v.Members, &seen, key); dup {
			p.pos = keyPos
			return Value{}, p.errorf("duplicate object key %q", key)
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return Value{}, p.errorf("expected ':' after object key")
		}
		p.pos++
		p.skipSpace()
		m, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		v.Members = append(v.Members, Member{Key: key, Value: m})
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input in object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return Value{}, p.errorf("expected ',' or '}' in object")
		}
	}
}

// hasKey reports whether key is already a member, switching from a linear
// scan to a set once an object grows past a few members.
func hasKey(members []Member, seen *map[string]struct{}, key string) bool {
	const linear = 16
	if len(members) < linear {
		for i := range members {
			if members[i].Key == key {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*len(members))
		for i := range members {
			(*seen)[members[i].Key] = struct{}{}
		}
	}
	if _, ok := (*seen)[key]; ok {
		return true
	}
	(*seen)[key] = struct{}{}
	return false
}

func (p *parser) array(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, p.errorf("nesting deeper than %d", MaxDepth)
	}
	p.pos++ // [
	v := Value{Kind: Array}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		item, err := p.value(depth)
		if err != nil {
			return Value{}, err
		}
		v.Items = append(v.Items, item)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return Value{}, p.errorf("unexpected end of input in array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return Value{}, p.errorf("expected ',' or ']' in array")
		}
	}
}

func (p *parser) number() (Value, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	intStart := p.pos
	if n := digits(); n == 0 {
		return Value{}, p.errorf("invalid number")
	} else if n > 1 && p.data[intStart] == '0' {
		p.pos = intStart
		return Value{}, p.errorf("invalid number (leading zero)")
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return Value{}, p.errorf("invalid number (no digits after '.')")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return Value{}, p.errorf("invalid number (no digits in exponent)")
		}
	}
	return Value{Kind: Number, Text: string(p.data[start:p.pos])}, nil
}

// string parses a string literal starting at the opening quote.
func (p *parser) string() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	// Fast path: no escapes, all ASCII or valid UTF-8.
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		if c == '"' {
			s := p.data[start:p.pos]
			if !utf8.Valid(s) {
				return "", p.invalidUTF8(start)
			}
			p.pos++
			return string(s), nil
		}
		if c == '\\' || c < 0x20 {
			break
		}
		p.pos++
	}
	buf := make([]byte, 0, p.pos-start+16)
	buf = append(buf, p.data[start:p.pos]...)
	for {
		if p.pos >= len(p.data) {
			return "", p.errorf("unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			if !utf8.Valid(buf) {
				return "", p.invalidUTF8(start)
			}
			p.pos++
			return string(buf), nil
		case c < 0x20:
			return "", p.errorf("control character %#02x in string", c)
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			buf = utf8.AppendRune(buf, r)
		default:
			buf = append(buf, c)
			p.pos++
		}
	}
}

func (p *parser) invalidUTF8(start int) error {
	p.pos = start
	return p.errorf("invalid UTF-8 in string")
}

// escape decodes one backslash escape starting at the backslash.
func (p *parser) escape() (rune, error) {
	r, next, err := DecodeEscape(p.data, p.pos)
	p.pos = next
	return r, err
}

// AppendEscape appends the JSON escape of an ASCII byte as RFC 8785,
// encoding/json and Python's json write it: a two-character escape for
// '"', '\\', backspace, form feed, newline, carriage return and tab, else
// \u00xx (lower-case hex). It is the one encoder of escapes, the
// counterpart of DecodeEscape, for every JSON writer (canonjson, pyjson,
// the event encoders); which bytes and runes each escapes is its own.
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

// DecodeEscape decodes the backslash escape at data[pos] (the backslash):
// the JSON escapes, \uXXXX with UTF-16 surrogate pairs joined, a lone or
// invalid surrogate an error. It returns the rune and the offset after
// the escape, or a *SyntaxError located as Parse locates it. It is the one
// decoder of escapes for Parse and for canonjson's transcoder.
func DecodeEscape(data []byte, pos int) (rune, int, error) {
	if pos+1 >= len(data) {
		return 0, pos, SyntaxErrorAt(data, pos, "unterminated escape")
	}
	c := data[pos+1]
	switch c {
	case '"', '\\', '/':
		return rune(c), pos + 2, nil
	case 'b':
		return '\b', pos + 2, nil
	case 'f':
		return '\f', pos + 2, nil
	case 'n':
		return '\n', pos + 2, nil
	case 'r':
		return '\r', pos + 2, nil
	case 't':
		return '\t', pos + 2, nil
	case 'u':
		pos += 2
		r, err := hex4(data, pos)
		if err != nil {
			return 0, pos, err
		}
		pos += 4
		if !utf16.IsSurrogate(r) {
			return r, pos, nil
		}
		if r >= 0xDC00 || pos+1 >= len(data) || data[pos] != '\\' || data[pos+1] != 'u' {
			return 0, pos, SyntaxErrorAt(data, pos, "lone UTF-16 surrogate \\u%04X", r)
		}
		pos += 2
		lo, err := hex4(data, pos)
		if err != nil {
			return 0, pos, err
		}
		pos += 4
		pair := utf16.DecodeRune(r, lo)
		if pair == utf8.RuneError {
			return 0, pos, SyntaxErrorAt(data, pos, "invalid UTF-16 surrogate pair \\u%04X\\u%04X", r, lo)
		}
		return pair, pos, nil
	default:
		return 0, pos, SyntaxErrorAt(data, pos, "invalid escape '\\%c'", c)
	}
}

// hex4 decodes the four hex digits at data[pos].
func hex4(data []byte, pos int) (rune, error) {
	if pos+4 > len(data) {
		return 0, SyntaxErrorAt(data, pos, "truncated \\u escape")
	}
	var r rune
	for _, c := range data[pos : pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, SyntaxErrorAt(data, pos, "invalid hex digit in \\u escape")
		}
	}
	return r, nil
}
