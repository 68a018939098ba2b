package canonjson

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// AppendJSON appends the canonical form of the JSON text src to dst: the
// bytes Append(dst, v) appends for v, jsontree.Parse(src), written in one
// pass without building the tree. It fails exactly where Parse or Append
// would: its errors are a *jsontree.SyntaxError (wrapping
// jsontree.ErrSyntax) for malformed text, else Append's number errors
// (ErrIntegerDomain), though for a text with several problems it may
// name another one, or another position, than Parse.
func AppendJSON(dst, src []byte) ([]byte, error) {
	return AppendJSONFunc(dst, src, nil)
}

// AppendJSONFunc is AppendJSON that, when src is an object, also calls
// member (unless nil) for each of the object's members in canonical order,
// with the member's key (decoded, as UTF-8) and its value's canonical
// form, so that a caller can pick top-level fields without parsing the
// output again. The slices are valid only during the call and must not be
// modified. member is called only when AppendJSONFunc succeeds.
func AppendJSONFunc(dst, src []byte, member func(key, value []byte)) ([]byte, error) {
	t := transcoders.Get().(*transcoder)
	out, err := t.append(dst, src, member)
	t.release()
	transcoders.Put(t)
	return out, err
}

// transcoders holds transcoders for reuse, so that their scratch space
// outlives one call.
var transcoders = sync.Pool{New: func() any { return new(transcoder) }}

// maxScratch bounds the scratch space a pooled transcoder keeps.
const maxScratch = 4 << 20

// transcoder writes canonical JSON while it reads the text, in one pass.
// Arrays, strings and numbers go straight to the output. An object's
// members cannot: its keys (decoded) and canonical values are written to
// scratch, and when the object closes its members are sorted there and
// written out in order. Members of objects nested in an object's value go
// to scratch too, above their parent's, and the nested object's canonical
// form then replaces them, so scratch holds only the open objects.
type transcoder struct {
	src []byte
	pos int
	// scratch holds the keys and values of the members of the open
	// objects; members holds their offsets, the innermost object's last.
	scratch []byte
	members []member
}

// member locates one object member: its key is scratch[key:val], its
// canonical value scratch[val:end]; at is the key's offset in the text,
// and escaped tells whether the key had escapes (without, its canonical
// form is its bytes in quotes).
type member struct {
	at, key, val, end int
	escaped           bool
}

func (t *transcoder) release() {
	t.src = nil
	if cap(t.scratch) > maxScratch {
		t.scratch = nil
	}
	if cap(t.members) > maxScratch/32 {
		t.members = nil
	}
}

func (t *transcoder) append(dst, src []byte, visit func(key, value []byte)) ([]byte, error) {
	t.src, t.pos = src, 0
	t.scratch, t.members = t.scratch[:0], t.members[:0]
	t.skipSpace()
	var err error
	if t.pos < len(src) && src[t.pos] == '{' {
		dst, err = t.object(dst, 1, false, visit)
	} else {
		dst, err = t.value(dst, 0, false)
	}
	if err != nil {
		return nil, err
	}
	t.skipSpace()
	if t.pos != len(src) {
		return nil, t.errorf("unexpected data after the top-level value")
	}
	return dst, nil
}

// errorf returns a syntax error at the current position, located as
// jsontree.Parse locates its errors.
func (t *transcoder) errorf(format string, args ...any) error {
	return jsontree.SyntaxErrorAt(t.src, t.pos, format, args...)
}

func (t *transcoder) skipSpace() {
	if t.pos < len(t.src) && t.src[t.pos] > ' ' {
		return
	}
	for t.pos < len(t.src) {
		switch t.src[t.pos] {
		case ' ', '\t', '\n', '\r':
			t.pos++
		default:
			return
		}
	}
}

// value appends the canonical form of the value at the current position
// to out, which is scratch when nested (the value is inside an object's
// member) and the caller's output otherwise. depth counts the enclosing
// arrays and objects, as jsontree's parser counts them.
func (t *transcoder) value(out []byte, depth int, nested bool) ([]byte, error) {
	if t.pos >= len(t.src) {
		return nil, t.errorf("unexpected end of input")
	}
	switch c := t.src[t.pos]; {
	case c == '{':
		return t.object(out, depth+1, nested, nil)
	case c == '[':
		return t.array(out, depth+1, nested)
	case c == '"':
		return t.string(out, true)
	case c == 't':
		return t.literal(out, "true")
	case c == 'f':
		return t.literal(out, "false")
	case c == 'n':
		return t.literal(out, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return t.number(out)
	default:
		return nil, t.errorf("unexpected character %q", rune(c))
	}
}

func (t *transcoder) literal(out []byte, word string) ([]byte, error) {
	if len(t.src)-t.pos < len(word) || string(t.src[t.pos:t.pos+len(word)]) != word {
		return nil, t.errorf("invalid literal (expected %s)", word)
	}
	t.pos += len(word)
	return append(out, word...), nil
}

func (t *transcoder) array(out []byte, depth int, nested bool) ([]byte, error) {
	if depth > jsontree.MaxDepth {
		return nil, t.errorf("nesting deeper than %d", jsontree.MaxDepth)
	}
	t.pos++ // [
	out = append(out, '[')
	t.skipSpace()
	if t.pos < len(t.src) && t.src[t.pos] == ']' {
		t.pos++
		return append(out, ']'), nil
	}
	var err error
	for {
		t.skipSpace()
		if out, err = t.value(out, depth, nested); err != nil {
			return nil, err
		}
		t.skipSpace()
		if t.pos >= len(t.src) {
			return nil, t.errorf("unexpected end of input in array")
		}
		switch t.src[t.pos] {
		case ',':
			t.pos++
			out = append(out, ',')
		case ']':
			t.pos++
			return append(out, ']'), nil
		default:
			return nil, t.errorf("expected ',' or ']' in array")
		}
	}
}

// object appends the canonical form of the object at the current position
// to out (see value). The root object (depth 1) also checks that only
// whitespace follows it before it writes anything, and calls visit for
// each of its members as it writes them.
func (t *transcoder) object(out []byte, depth int, nested bool, visit func(key, value []byte)) ([]byte, error) {
	if depth > jsontree.MaxDepth {
		return nil, t.errorf("nesting deeper than %d", jsontree.MaxDepth)
	}
	t.pos++ // {
	t.skipSpace()
	if t.pos < len(t.src) && t.src[t.pos] == '}' {
		t.pos++
		return append(out, '{', '}'), nil
	}
	// The members go to scratch: above the parent's when nested (out is
	// scratch then), else to the empty scratch.
	buf := out
	if !nested {
		buf = t.scratch[:0]
	}
	mark, base := len(buf), len(t.members)
	var err error
	for {
		t.skipSpace()
		if t.pos >= len(t.src) || t.src[t.pos] != '"' {
			return nil, t.errorf("expected a string object key")
		}
		m := member{at: t.pos, key: len(buf)}
		if buf, err = t.string(buf, false); err != nil {
			return nil, err
		}
		m.val = len(buf)
		m.escaped = t.pos-m.at-2 != m.val-m.key // decoding shortened it
		t.skipSpace()
		if t.pos >= len(t.src) || t.src[t.pos] != ':' {
			return nil, t.errorf("expected ':' after object key")
		}
		t.pos++
		t.skipSpace()
		if buf, err = t.value(buf, depth, true); err != nil {
			return nil, err
		}
		m.end = len(buf)
		t.members = append(t.members, m)
		t.skipSpace()
		if t.pos >= len(t.src) {
			return nil, t.errorf("unexpected end of input in object")
		}
		c := t.src[t.pos]
		t.pos++
		if c == '}' {
			break
		}
		if c != ',' {
			t.pos--
			return nil, t.errorf("expected ',' or '}' in object")
		}
	}
	ms := t.members[base:]
	if err := t.sort(buf, ms); err != nil {
		return nil, err
	}
	if depth == 1 {
		t.skipSpace()
		if t.pos != len(t.src) {
			return nil, t.errorf("unexpected data after the top-level value")
		}
	}
	t.members = t.members[:base]
	if nested {
		// Write the object after its members, then move it down over them.
		end := len(buf)
		buf = writeObject(buf, buf[:end], ms, nil)
		return buf[:mark+copy(buf[mark:], buf[end:])], nil
	}
	out = writeObject(out, buf, ms, visit)
	t.scratch = buf[:0]
	return out, nil
}

// sort puts an object's members in canonical order, rejecting duplicate
// keys (adjacent once sorted).
func (t *transcoder) sort(buf []byte, ms []member) error {
	key := func(m member) []byte { return buf[m.key:m.val] }
	if len(ms) <= 12 {
		for i := 1; i < len(ms); i++ {
			for j := i; j > 0 && compareKeys(key(ms[j]), key(ms[j-1])) < 0; j-- {
				ms[j], ms[j-1] = ms[j-1], ms[j]
			}
		}
	} else {
		slices.SortFunc(ms, func(a, b member) int { return compareKeys(key(a), key(b)) })
	}
	for i := 1; i < len(ms); i++ {
		if bytes.Equal(key(ms[i-1]), key(ms[i])) {
			t.pos = max(ms[i-1].at, ms[i].at)
			return t.errorf("duplicate object key %q", key(ms[i]))
		}
	}
	return nil
}

// writeObject appends the object of the sorted members ms, whose keys and
// values are in buf.
func writeObject(out, buf []byte, ms []member, visit func(key, value []byte)) []byte {
	out = append(out, '{')
	for i, m := range ms {
		if i > 0 {
			out = append(out, ',')
		}
		if m.escaped {
			out = appendString(out, buf[m.key:m.val])
			out = append(out, ':')
		} else {
			out = append(out, '"')
			out = append(out, buf[m.key:m.val]...)
			out = append(out, '"', ':')
		}
		start := len(out)
		out = append(out, buf[m.val:m.end]...)
		if visit != nil {
			visit(buf[m.key:m.val:m.val], out[start:len(out):len(out)])
		}
	}
	return append(out, '}')
}

// plain marks the bytes a string holds as they are in both the text and
// the canonical form: printable ASCII but '"' and '\\'.
var plain = func() (p [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		p[c] = c != '"' && c != '\\'
	}
	return p
}()

// load64 returns the eight bytes of s from i on, little-endian.
func load64[S ~string | ~[]byte](s S, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plain8 reports whether the eight bytes of x are all plain.
func plain8(x uint64) bool {
	// (y - ones*n) & ^y & highs is not zero when some byte of y is below
	// n (n <= 0x80): a control character, or a zero byte of x^(ones*c),
	// which is c.
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, b := x^(ones*'"'), x^(ones*'\\')
	return (x|(x-ones*0x20)&^x|(q-ones)&^q|(b-ones)&^b)&highs == 0
}

// string appends the string at the current position (its opening quote)
// to out: in canonical form, quoted, when canonical, else decoded (a key).
func (t *transcoder) string(out []byte, canonical bool) ([]byte, error) {
	src := t.src
	i := t.pos + 1
	if canonical {
		out = append(out, '"')
	}
	start := i
	for {
		for i+8 <= len(src) && plain8(load64(src, i)) {
			i += 8
		}
		for i < len(src) && plain[src[i]] {
			i++
		}
		if i >= len(src) {
			t.pos = i
			return nil, t.errorf("unterminated string")
		}
		switch c := src[i]; {
		case c == '"':
			out = append(out, src[start:i]...)
			if canonical {
				out = append(out, '"')
			}
			t.pos = i + 1
			return out, nil
		case c == '\\':
			out = append(out, src[start:i]...)
			t.pos = i
			r, err := t.escape()
			if err != nil {
				return nil, err
			}
			if canonical && (r < 0x20 || r == '"' || r == '\\') {
				out = jsontree.AppendEscape(out, byte(r))
			} else {
				out = utf8.AppendRune(out, r)
			}
			i = t.pos
			start = i
		case c < 0x20:
			t.pos = i
			return nil, t.errorf("control character %#02x in string", c)
		default: // the lead byte of a multi-byte character
			r, n := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && n == 1 {
				t.pos = i
				return nil, t.errorf("invalid UTF-8 in string")
			}
			i += n
		}
	}
}

// escape decodes one backslash escape starting at the backslash, as
// jsontree's parser does (jsontree.DecodeEscape).
func (t *transcoder) escape() (rune, error) {
	r, next, err := jsontree.DecodeEscape(t.src, t.pos)
	t.pos = next
	return r, err
}

// number appends the canonical form of the number at the current
// position: integers (no fraction, no exponent) within ±MaxSafeInteger as
// they are, without sign for zero; other numbers as Append writes them.
func (t *transcoder) number(out []byte) ([]byte, error) {
	src := t.src
	start := t.pos
	neg := src[t.pos] == '-'
	if neg {
		t.pos++
	}
	intStart := t.pos
	var n uint64
	for t.pos < len(src) && src[t.pos] >= '0' && src[t.pos] <= '9' {
		if t.pos-intStart < 17 { // 17 digits cannot overflow
			n = n*10 + uint64(src[t.pos]-'0')
		}
		t.pos++
	}
	digits := t.pos - intStart
	if digits == 0 {
		return nil, t.errorf("invalid number")
	}
	if digits > 1 && src[intStart] == '0' {
		t.pos = intStart
		return nil, t.errorf("invalid number (leading zero)")
	}
	integer := true
	if t.pos < len(src) && src[t.pos] == '.' {
		integer = false
		t.pos++
		if !t.digits() {
			return nil, t.errorf("invalid number (no digits after '.')")
		}
	}
	if t.pos < len(src) && (src[t.pos] == 'e' || src[t.pos] == 'E') {
		integer = false
		t.pos++
		if t.pos < len(src) && (src[t.pos] == '+' || src[t.pos] == '-') {
			t.pos++
		}
		if !t.digits() {
			return nil, t.errorf("invalid number (no digits in exponent)")
		}
	}
	text := src[start:t.pos]
	if integer {
		if digits > 16 || n > MaxSafeInteger {
			return nil, fmt.Errorf("%w: %s", ErrIntegerDomain, text)
		}
		if neg && n != 0 {
			out = append(out, '-')
		}
		return strconv.AppendUint(out, n, 10), nil
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return nil, fmt.Errorf("canonjson: number %s: %w", text, err)
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return nil, fmt.Errorf("canonjson: number %s: %w", text, err)
	}
	return append(out, s...), nil
}

// digits skips a run of digits and reports whether there was one.
func (t *transcoder) digits() bool {
	start := t.pos
	for t.pos < len(t.src) && t.src[t.pos] >= '0' && t.src[t.pos] <= '9' {
		t.pos++
	}
	return t.pos > start
}
