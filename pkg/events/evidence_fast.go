package events

import (
	"crypto/sha256"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// fastEvidence decodes the common evidence.collected document in one pass
// over the bytes, without building a JSON tree: it reads the payload and
// the snapshot straight into their types, applying the schema's rules
// (checkEvidenceSchema's) and Validate's as it goes, and writes the
// snapshot's canonical JSON from the snapshot. It accepts a subset of what
// decodeEvidenceTree accepts, with the same result, and gives up (ok false)
// on anything else — any error, a \u escape, a number that is not a plain
// integer, a key given twice — leaving the decision to decodeEvidenceTree.
func fastEvidence(data []byte) (EvidenceCollected, *snapshot.Snapshot, bool) {
	d := fastDecs.Get().(*fastDec)
	defer d.release()
	d.b, d.s = data, string(data)
	var p EvidenceCollected
	s := &snapshot.Snapshot{}
	const (
		fHost = 1 << iota
		fTarget
		fDigest
		fInterval
		fSnapshot
		fBaseline
	)
	seen := 0
	var raw []byte // the snapshot as written
	ok := d.object(func(key string) bool {
		var bit int
		switch key {
		case "host":
			bit = fHost
			v, ok := d.str()
			if !ok || schemaName(strValue(v), "", "") != nil {
				return false
			}
			p.Host = v
		case "target":
			bit = fTarget
			t, ok := d.target(true)
			if !ok {
				return false
			}
			p.Target = t
		case "digest":
			bit = fDigest
			v, ok := d.str()
			if !ok || !ValidDigest(v) {
				return false
			}
			p.Digest = v
		case "interval_seconds":
			bit = fInterval
			n, ok := d.integer()
			if !ok || n < 0 || n > canonjson.MaxSafeInteger {
				return false
			}
			p.IntervalSeconds = n
		case "snapshot":
			bit = fSnapshot
			r, ok := d.snapshot(s)
			if !ok {
				return false
			}
			raw = r
		case "baseline":
			bit = fBaseline
			t, ok := d.target(true)
			if !ok {
				return false
			}
			p.Baseline = &t
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	if !ok || !d.end() || seen|fBaseline != fHost|fTarget|fDigest|fInterval|fSnapshot|fBaseline {
		return p, nil, false
	}
	// snapshot.Validate, of which the reading above checked the rest:
	// the schema version, captured_at, the target's and every record's
	// strings, the planes, the kinds given once, valid UTF-8 and the
	// integers' range.
	if p.checkFields() != nil ||
		(Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}) != p.Target {
		return p, nil, false
	}
	// The snapshot as written, when that is its canonical form (as a
	// snapshot built by NewEvidenceCollected is sent), else written so.
	var canon []byte
	if d.notCanonical {
		canon = d.appendCanonical(make([]byte, 0, len(raw)), s)
	} else {
		canon = slices.Clone(raw)
	}
	if sum := sha256.Sum256(canon); !digestEquals(p.Digest, &sum) {
		return p, nil, false
	}
	p.Snapshot = canon
	return p, s, true
}

func strValue(s string) jsontree.Value { return jsontree.Value{Kind: jsontree.String, Text: s} }

// fastDec reads JSON from b, strictly, giving up on what it does not read.
// The strings it returns are cut from s, one copy of b, rather than copied
// one by one.
type fastDec struct {
	b []byte
	s string // b as a string
	i int
	// inSnapshot is set while the snapshot is read; notCanonical records
	// that it is not written in its canonical form (RFC 8785, as
	// appendCanonical writes it): white space, members out of order, an
	// escape or a number written otherwise.
	inSnapshot, notCanonical bool
	// Scratch space, kept between uses (fastDecs): the data fields of
	// every record read so far, in document order, record i's ending at
	// ends[i]; and the records.
	fields []dataField
	ends   []int
	recs   []snapshot.Record
}

type dataField struct {
	key string
	v   snapshot.Value
}

// fastDecs holds decoders between uses, with their scratch space.
var fastDecs = sync.Pool{New: func() any { return new(fastDec) }}

// maxScratch bounds the data fields a pooled decoder keeps room for; the
// scratch space of a larger document is let go.
const maxScratch = 4096

// release lets go of the document and puts d back in fastDecs.
func (d *fastDec) release() {
	if cap(d.fields) > maxScratch || cap(d.recs) > maxScratch {
		*d = fastDec{}
		fastDecs.Put(d)
		return
	}
	clear(d.fields)
	clear(d.recs)
	d.b, d.s, d.i = nil, "", 0
	d.inSnapshot, d.notCanonical = false, false
	d.fields, d.ends, d.recs = d.fields[:0], d.ends[:0], d.recs[:0]
	fastDecs.Put(d)
}

func (d *fastDec) ws() {
	if d.i < len(d.b) && d.b[d.i] > ' ' { // no white space: the common case
		return
	}
	d.skipWS()
}

func (d *fastDec) skipWS() {
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
func (d *fastDec) order(last *int, rank int) {
	if rank <= *last {
		d.notCanonical = true
	}
	*last = rank
}

func (d *fastDec) end() bool {
	d.ws()
	return d.i == len(d.b)
}

func (d *fastDec) byte(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object reads an object, calling member with each key once the value is
// next; member reads the value.
func (d *fastDec) object(member func(key string) bool) bool {
	if !d.byte('{') {
		return false
	}
	if d.byte('}') {
		return true
	}
	for {
		key, ok := d.str()
		if !ok || !d.byte(':') || !member(key) {
			return false
		}
		if d.byte('}') {
			return true
		}
		if !d.byte(',') {
			return false
		}
	}
}

// str reads a string without \u escapes, of valid UTF-8 without control
// characters. A string without escapes is cut from d.s.
func (d *fastDec) str() (string, bool) {
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
			if d.i+1 >= len(d.b) {
				return "", false
			}
			buf = append(buf, d.b[start:d.i]...)
			var r byte
			switch d.b[d.i+1] {
			case '/':
				r = '/'
				d.notCanonical = d.notCanonical || d.inSnapshot // canonical JSON writes '/'
			case '"', '\\':
				r = d.b[d.i+1]
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			default:
				return "", false // \u and anything else: the tree path
			}
			buf = append(buf, r)
			d.i += 2
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

// integer reads a plain integer literal (-?(0|[1-9][0-9]*)) of at most 16
// digits and no fraction or exponent.
func (d *fastDec) integer() (int64, bool) {
	d.ws()
	neg := d.i < len(d.b) && d.b[d.i] == '-'
	if neg {
		d.i++
	}
	digits := d.i
	var v int64
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		v = v*10 + int64(d.b[d.i]-'0')
		d.i++
	}
	n := d.i - digits
	if n == 0 || n > 16 || (n > 1 && d.b[digits] == '0') {
		return 0, false
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		v = -v
		if v == 0 && d.inSnapshot {
			d.notCanonical = true // canonical JSON writes 0
		}
	}
	return v, true
}

// target reads {kind, identifier}: names (schema $defs/name) when names,
// else non-empty strings.
func (d *fastDec) target(names bool) (Target, bool) {
	var t Target
	seen := 0
	ok := d.object(func(key string) bool {
		v, ok := d.str()
		if !ok {
			return false
		}
		if names {
			if schemaName(strValue(v), "", "") != nil {
				return false
			}
		} else if v == "" {
			return false
		}
		switch {
		case key == "kind" && seen&1 == 0:
			t.Kind, seen = v, seen|1
		case key == "identifier" && seen&2 == 0:
			t.Identifier, seen = v, seen|2
			if seen&1 != 0 {
				d.notCanonical = d.notCanonical || d.inSnapshot // identifier sorts first
			}
		default:
			return false
		}
		return true
	})
	return t, ok && seen == 3
}

// snapshot reads the snapshot into s, and returns it as written.
func (d *fastDec) snapshot(s *snapshot.Snapshot) ([]byte, bool) {
	d.ws()
	start := d.i
	d.inSnapshot = true
	seen, last := 0, -1
	ok := d.object(func(key string) bool {
		var bit int
		switch key {
		case "schema_version":
			bit = 1
			d.order(&last, 2)
			n, ok := d.integer()
			if !ok || n != 1 {
				return false
			}
			s.SchemaVersion = snapshot.SchemaVersion
		case "captured_at":
			bit = 2
			d.order(&last, 0)
			v, ok := d.str()
			if !ok || snapshot.CheckTime(v) != nil {
				return false
			}
			s.CapturedAt = v // as written
		case "target":
			bit = 4
			d.order(&last, 3)
			t, ok := d.target(false)
			if !ok {
				return false
			}
			s.Target = snapshot.Target{Kind: t.Kind, Identifier: t.Identifier}
		case "evidence":
			bit = 8
			d.order(&last, 1)
			if !d.byte('[') {
				return false
			}
			if d.byte(']') {
				s.Evidence = []snapshot.Record{}
				break
			}
			recs := d.recs[:0]
			for {
				r, ok := d.record()
				if !ok {
					return false
				}
				recs = append(recs, r)
				if d.byte(']') {
					break
				}
				if !d.byte(',') {
					return false
				}
			}
			d.recs = recs
			if repeatedKind(recs) {
				return false
			}
			s.Evidence = slices.Clone(recs)
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	d.inSnapshot = false
	return d.b[start:d.i], ok && seen == 15
}

func (d *fastDec) record() (snapshot.Record, bool) {
	var r snapshot.Record
	seen, last := 0, -1
	ok := d.object(func(key string) bool {
		var bit int
		switch key {
		case "plane":
			bit = 1
			d.order(&last, 2)
			v, ok := d.str()
			if !ok || !snapshot.Plane(v).Valid() {
				return false
			}
			r.Plane = snapshot.Plane(v)
		case "kind":
			bit = 2
			d.order(&last, 1)
			v, ok := d.str()
			if !ok || v == "" {
				return false
			}
			r.Kind = v
		case "source":
			bit = 4
			d.order(&last, 3)
			src := 0
			ok := d.object(func(key string) bool {
				v, ok := d.str()
				if !ok || v == "" {
					return false
				}
				switch {
				case key == "collector" && src&1 == 0:
					r.Source.Collector, src = v, src|1
					if src&2 != 0 {
						d.notCanonical = true // collector sorts first
					}
				case key == "method" && src&2 == 0:
					r.Source.Method, src = v, src|2
				default:
					return false
				}
				return true
			})
			if !ok || src != 3 {
				return false
			}
		case "data":
			bit = 8
			d.order(&last, 0)
			// Gathered first, so that the map is made at its size; kept
			// for appendCanonical.
			start := len(d.fields)
			fields := d.fields
			ok := d.object(func(key string) bool {
				if len(fields) > start && canonjson.CompareKeys(fields[len(fields)-1].key, key) >= 0 {
					d.notCanonical = true
				}
				v, ok := d.scalar()
				fields = append(fields, dataField{key, v})
				return ok
			})
			d.fields = fields
			if !ok {
				return false
			}
			r.Data = make(snapshot.Data, len(fields)-start)
			for _, f := range fields[start:] {
				r.Data[f.key] = f.v
			}
			if len(r.Data) != len(fields)-start {
				return false // a key given twice
			}
			d.ends = append(d.ends, len(fields))
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	return r, ok && seen == 15
}

// scalar reads a string, true, false, null or a plain integer within
// ±(2^53-1).
func (d *fastDec) scalar() (snapshot.Value, bool) {
	d.ws()
	if d.i >= len(d.b) {
		return snapshot.Value{}, false
	}
	switch d.b[d.i] {
	case '"':
		v, ok := d.str()
		return snapshot.String(v), ok
	case 't':
		return snapshot.Bool(true), d.word("true")
	case 'f':
		return snapshot.Bool(false), d.word("false")
	case 'n':
		return snapshot.Null(), d.word("null")
	}
	n, ok := d.integer()
	if !ok || n > canonjson.MaxSafeInteger || n < -canonjson.MaxSafeInteger {
		return snapshot.Value{}, false
	}
	return snapshot.Int(n), true
}

func (d *fastDec) word(w string) bool {
	if len(d.b)-d.i >= len(w) && string(d.b[d.i:d.i+len(w)]) == w {
		d.i += len(w)
		return true
	}
	return false
}

// appendCanonical appends the RFC 8785 form of s, the snapshot d read
// last, as canonjson.Marshal(s.Tree()) writes it: members ordered by the
// UTF-16 code units of their keys. The data members are those d gathered
// (the same as the records' maps), sorted unless they came in order.
func (d *fastDec) appendCanonical(dst []byte, s *snapshot.Snapshot) []byte {
	// An RFC 3339 time (snapshot.CheckTime's) needs no escape: quoting is
	// all canonjson.AppendString would do.
	dst = append(dst, `{"captured_at":"`...)
	dst = append(dst, s.CapturedAt...)
	dst = append(dst, `","evidence":[`...)
	start := 0
	for i, r := range s.Evidence {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"data":{`...)
		fields := d.fields[start:d.ends[i]]
		start = d.ends[i]
		if !slices.IsSortedFunc(fields, compareFields) {
			slices.SortFunc(fields, compareFields)
		}
		for j, f := range fields {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = canonjson.AppendString(dst, f.key)
			dst = append(dst, ':')
			switch v := f.v; v.Type() {
			case snapshot.TypeString:
				t, _ := v.Str()
				dst = canonjson.AppendString(dst, t)
			case snapshot.TypeInt:
				n, _ := v.IntValue()
				dst = strconv.AppendInt(dst, n, 10)
			case snapshot.TypeBool:
				b, _ := v.BoolValue()
				dst = strconv.AppendBool(dst, b)
			default:
				dst = append(dst, "null"...)
			}
		}
		dst = append(dst, `},"kind":`...)
		dst = canonjson.AppendString(dst, r.Kind)
		dst = append(dst, `,"plane":`...)
		dst = canonjson.AppendString(dst, string(r.Plane))
		dst = append(dst, `,"source":{"collector":`...)
		dst = canonjson.AppendString(dst, r.Source.Collector)
		dst = append(dst, `,"method":`...)
		dst = canonjson.AppendString(dst, r.Source.Method)
		dst = append(dst, "}}"...)
	}
	dst = append(dst, `],"schema_version":`...)
	dst = strconv.AppendInt(dst, int64(s.SchemaVersion), 10)
	dst = append(dst, `,"target":{"identifier":`...)
	dst = canonjson.AppendString(dst, s.Target.Identifier)
	dst = append(dst, `,"kind":`...)
	dst = canonjson.AppendString(dst, s.Target.Kind)
	return append(dst, "}}"...)
}

// repeatedKind reports whether two records share a kind: checked one
// against another for a few records, through a map for many.
func repeatedKind(recs []snapshot.Record) bool {
	if len(recs) <= 16 {
		for i := range recs {
			for j := range i {
				if recs[j].Kind == recs[i].Kind {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]struct{}, len(recs))
	for _, r := range recs {
		if _, ok := seen[r.Kind]; ok {
			return true
		}
		seen[r.Kind] = struct{}{}
	}
	return false
}

func compareFields(a, b dataField) int { return canonjson.CompareKeys(a.key, b.key) }
