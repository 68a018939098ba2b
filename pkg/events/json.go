package events

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// Strict JSON, read and written directly for the payloads a pipeline
// moves most of: jsonReader, and AppendJSONString.

// AppendJSONString appends s as encoding/json writes a string with HTML
// escaping off (json.Encoder.SetEscapeHTML(false)), as every string of an
// event's data is written: '"', '\\' and control characters escaped,
// invalid UTF-8 replaced by \ufffd, U+2028 and U+2029 escaped. Passing the
// result through json.HTMLEscape gives what json.Marshal writes.
func AppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = jsontree.AppendEscape(append(dst, s[start:i]...), c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// jsonReader reads JSON from b in one pass, strictly, straight into the
// types of a payload (the evidence decoder, the signature envelope and
// claim). Its methods return false on the first problem: malformed JSON
// (err nil: jsontree.Parse names it), or a rule of the caller's, recorded
// in err. The strings it returns are cut from s, one copy of b,
// rather than copied one by one.
type jsonReader struct {
	b []byte
	s string // b as a string
	i int
	// err is why the reader stopped, when a rule did (nil: malformed
	// JSON).
	err error
	// path is where the reader is, for an error's JSON pointer.
	path []pathToken
	// inSnapshot is set while the snapshot is read; notCanonical records
	// that it is not written in its canonical form (RFC 8785, as
	// appendCanonical writes it): white space, members out of order, an
	// escape or a number written otherwise.
	inSnapshot, notCanonical bool
	// Scratch space, kept between uses (jsonReaders): the data fields of
	// every record read so far, in document order, record i's ending at
	// ends[i]; and the records.
	fields []dataField
	ends   []int
	recs   []snapshot.Record
}

// pathToken is one step of a JSON pointer: a member's key, or an item's
// index when key is empty and index is not negative.
type pathToken struct {
	key   string
	index int
}

type dataField struct {
	key string
	v   snapshot.Value
}

// jsonReaders holds readers between uses, with their scratch space.
var jsonReaders = sync.Pool{New: func() any { return new(jsonReader) }}

// maxScratch bounds the data fields a pooled reader keeps room for; the
// scratch space of a larger document is let go.
const maxScratch = 4096

func newJSONReader(b []byte) *jsonReader {
	d := jsonReaders.Get().(*jsonReader)
	d.b, d.s = b, string(b)
	return d
}

// release lets go of the document and puts d back in jsonReaders.
func (d *jsonReader) release() {
	if cap(d.fields) > maxScratch || cap(d.recs) > maxScratch {
		*d = jsonReader{}
		jsonReaders.Put(d)
		return
	}
	clear(d.fields)
	clear(d.recs)
	clear(d.path)
	d.b, d.s, d.i, d.err = nil, "", 0, nil
	d.inSnapshot, d.notCanonical = false, false
	d.fields, d.ends, d.recs, d.path = d.fields[:0], d.ends[:0], d.recs[:0], d.path[:0]
	jsonReaders.Put(d)
}

// fail records err as why the reader stopped (the first one only) and
// returns false.
func (d *jsonReader) fail(err error) bool {
	if d.err == nil {
		d.err = err
	}
	return false
}

// pointer is the JSON pointer of where the reader is.
func (d *jsonReader) pointer() string {
	if len(d.path) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, t := range d.path {
		b.WriteByte('/')
		if t.key == "" && t.index >= 0 {
			b.WriteString(strconv.Itoa(t.index))
			continue
		}
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t.key, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

func (d *jsonReader) push(key string) { d.path = append(d.path, pathToken{key: key, index: -1}) }
func (d *jsonReader) pushIndex(i int) { d.path = append(d.path, pathToken{index: i}) }
func (d *jsonReader) pop()            { d.path = d.path[:len(d.path)-1] }

// unknownMember refuses member key of the object being read (the schema's
// additionalProperties false), the error pointing at the object; the path
// stays as the caller pushed it.
func (d *jsonReader) unknownMember(key string) bool {
	d.pop()
	ok := d.schemaErr("additional property %q not allowed", key)
	d.push(key)
	return ok
}

func (d *jsonReader) ws() {
	if d.i < len(d.b) && d.b[d.i] > ' ' { // no white space: the common case
		return
	}
	d.skipWS()
}

func (d *jsonReader) skipWS() {
	start := d.i
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
			continue
		}
		break
	}
	if d.i != start && d.inSnapshot {
		d.notCanonical = true
	}
}

// order notes a member of rank rank (its place in canonical order) after
// one of rank *last.
func (d *jsonReader) order(last *int, rank int) {
	if rank <= *last {
		d.notCanonical = true
	}
	*last = rank
}

func (d *jsonReader) end() bool {
	d.ws()
	return d.i == len(d.b)
}

func (d *jsonReader) byte(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// kind is the JSON type of the value next, by its first byte; false when
// no value can start there.
func (d *jsonReader) kind() (jsontree.Kind, bool) {
	d.ws()
	if d.i >= len(d.b) {
		return 0, false
	}
	switch c := d.b[d.i]; {
	case c == '{':
		return jsontree.Object, true
	case c == '[':
		return jsontree.Array, true
	case c == '"':
		return jsontree.String, true
	case c == 't' || c == 'f':
		return jsontree.Bool, true
	case c == 'n':
		return jsontree.Null, true
	case c == '-' || '0' <= c && c <= '9':
		return jsontree.Number, true
	}
	return 0, false
}

// members reads an object, calling member with each key once the value
// is next: member reads the value and returns the key's bit (1, 2, 4, …;
// 0 for a key that may come again), or refuses the key. A key whose bit
// was read before is refused ("given twice"; the evidence decoder reports
// jsontree.Parse's duplicate key first). seen is the bits of the keys
// read.
func (d *jsonReader) members(member func(key string) (bit int, ok bool)) (seen int, ok bool) {
	if !d.byte('{') {
		return 0, false
	}
	if d.byte('}') {
		return 0, true
	}
	for {
		key, ok := d.str()
		if !ok || !d.byte(':') {
			return seen, false
		}
		bit, ok := member(key)
		if !ok {
			return seen, false
		}
		if seen&bit != 0 {
			return seen, d.fail(fmt.Errorf("member %q given twice", key))
		}
		seen |= bit
		if d.byte('}') {
			return seen, true
		}
		if !d.byte(',') {
			return seen, false
		}
	}
}

// array reads an array, calling item with each index once the item is
// next; item reads the item.
func (d *jsonReader) array(item func(i int) bool) bool {
	if !d.byte('[') {
		return false
	}
	if d.byte(']') {
		return true
	}
	for i := 0; ; i++ {
		if !item(i) {
			return false
		}
		if d.byte(']') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

// str reads a string of valid UTF-8, with any JSON escape (a lone UTF-16
// surrogate is malformed, as jsontree.Parse has it). A string without
// escapes is cut from d.s.
func (d *jsonReader) str() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start, i := d.i, d.i
	for i < len(d.b) && plainStringByte[d.b[i]] {
		i++
	}
	if i < len(d.b) && d.b[i] == '"' { // no escape
		d.i = i + 1
		v := d.s[start:i]
		return v, utf8.ValidString(v)
	}
	d.i = i
	var buf []byte
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			buf = append(buf, d.b[start:d.i]...)
			d.i++
			if !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case c < 0x20:
			return "", false
		case c == '\\':
			buf = append(buf, d.b[start:d.i]...)
			if d.i+1 < len(d.b) && d.b[d.i+1] != '"' && d.b[d.i+1] != '\\' && d.inSnapshot {
				// Canonical JSON writes '/' and any other character as
				// itself, a control character as \b, \f, \n, \r, \t or
				// \u00xx: the snapshot is written anew.
				d.notCanonical = true
			}
			r, next, err := jsontree.DecodeEscape(d.b, d.i)
			if err != nil {
				return "", false
			}
			buf = utf8.AppendRune(buf, r)
			d.i = next
			start = d.i
			continue
		}
		d.i++
	}
	return "", false
}

// plainStringByte marks the bytes a JSON string holds as themselves: all
// but '"', '\\' and the control characters.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// number reads a JSON number literal. plain reports a plain integer
// literal (-?(0|[1-9][0-9]*)) of at most 16 digits, whose value is n.
func (d *jsonReader) number() (lit string, n int64, plain, ok bool) {
	d.ws()
	start := d.i
	neg := d.i < len(d.b) && d.b[d.i] == '-'
	if neg {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		n = n*10 + int64(d.b[d.i]-'0')
		d.i++
	}
	count := d.i - digits
	if count == 0 || count > 1 && d.b[digits] == '0' {
		return "", 0, false, false
	}
	plain = count <= 16
	if d.i < len(d.b) && d.b[d.i] == '.' {
		d.i++
		if !d.digits() {
			return "", 0, false, false
		}
		plain = false
	}
	if d.i < len(d.b) && (d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		d.i++
		if d.i < len(d.b) && (d.b[d.i] == '+' || d.b[d.i] == '-') {
			d.i++
		}
		if !d.digits() {
			return "", 0, false, false
		}
		plain = false
	}
	if neg {
		n = -n
	}
	if !plain {
		n = 0
	}
	return d.s[start:d.i], n, plain, true
}

// digits reads one or more decimal digits.
func (d *jsonReader) digits() bool {
	start := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// uint64 reads a plain unsigned integer literal (0|[1-9][0-9]*) that
// fits in a uint64, without a fraction or exponent.
func (d *jsonReader) uint64() (uint64, bool) {
	d.ws()
	start := d.i
	var v uint64
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		c := uint64(d.b[d.i] - '0')
		if v > (1<<64-1-c)/10 {
			return 0, false
		}
		v = v*10 + c
		d.i++
	}
	n := d.i - start
	if n == 0 || (n > 1 && d.b[start] == '0') {
		return 0, false
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return v, true
}

func (d *jsonReader) word(w string) bool {
	d.ws()
	if len(d.b)-d.i >= len(w) && d.s[d.i:d.i+len(w)] == w {
		d.i += len(w)
		return true
	}
	return false
}
