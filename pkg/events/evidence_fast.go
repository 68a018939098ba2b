package events

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"time"
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
	d := &fastDec{b: data}
	d.fields = d.buf[:0]
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
			if !ok || !digestRE.MatchString(v) {
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
			if !d.snapshot(s) {
				return false
			}
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
	if p.checkFields() != nil || s.Validate() != nil ||
		(Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}) != p.Target {
		return p, nil, false
	}
	canon := appendCanonicalSnapshot(make([]byte, 0, len(data)), s)
	sum := sha256.Sum256(canon)
	if "sha256:"+hex.EncodeToString(sum[:]) != p.Digest {
		return p, nil, false
	}
	p.Snapshot = canon
	return p, s, true
}

func strValue(s string) jsontree.Value { return jsontree.Value{Kind: jsontree.String, Text: s} }

// fastDec reads JSON from b, strictly, giving up on what it does not read.
type fastDec struct {
	b      []byte
	i      int
	fields []dataField // scratch for one record's data
	buf    [32]dataField
}

type dataField struct {
	key string
	v   snapshot.Value
}

func (d *fastDec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
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
// characters.
func (d *fastDec) str() (string, bool) {
	if !d.byte('"') {
		return "", false
	}
	start := d.i
	var buf []byte
	plain := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			raw := d.b[start:d.i]
			d.i++
			if plain {
				if !utf8.Valid(raw) {
					return "", false
				}
				return string(raw), true
			}
			buf = append(buf, raw...)
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
			plain = false
			buf = append(buf, d.b[start:d.i]...)
			var r byte
			switch d.b[d.i+1] {
			case '"', '\\', '/':
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

// integer reads a plain integer literal (-?(0|[1-9][0-9]*)) of at most 16
// digits and no fraction or exponent.
func (d *fastDec) integer() (int64, bool) {
	d.ws()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
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
	v, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	return v, err == nil
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
		default:
			return false
		}
		return true
	})
	return t, ok && seen == 3
}

func (d *fastDec) snapshot(s *snapshot.Snapshot) bool {
	seen := 0
	ok := d.object(func(key string) bool {
		var bit int
		switch key {
		case "schema_version":
			bit = 1
			n, ok := d.integer()
			if !ok || n != 1 {
				return false
			}
			s.SchemaVersion = snapshot.SchemaVersion
		case "captured_at":
			bit = 2
			v, ok := d.str()
			if !ok || formatDateTime(v) != nil {
				return false
			}
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil || snapshot.FormatTime(t) != v {
				return false // the canonical form would differ: the tree path
			}
			s.CapturedAt = t.Truncate(time.Microsecond)
		case "target":
			bit = 4
			t, ok := d.target(false)
			if !ok {
				return false
			}
			s.Target = snapshot.Target{Kind: t.Kind, Identifier: t.Identifier}
		case "evidence":
			bit = 8
			if !d.byte('[') {
				return false
			}
			if d.byte(']') {
				s.Evidence = []snapshot.Record{}
				break
			}
			for {
				r, ok := d.record()
				if !ok || slices.ContainsFunc(s.Evidence, func(x snapshot.Record) bool { return x.Kind == r.Kind }) {
					return false
				}
				s.Evidence = append(s.Evidence, r)
				if d.byte(']') {
					break
				}
				if !d.byte(',') {
					return false
				}
			}
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	return ok && seen == 15
}

func (d *fastDec) record() (snapshot.Record, bool) {
	var r snapshot.Record
	seen := 0
	ok := d.object(func(key string) bool {
		var bit int
		switch key {
		case "plane":
			bit = 1
			v, ok := d.str()
			if !ok || !snapshot.Plane(v).Valid() {
				return false
			}
			r.Plane = snapshot.Plane(v)
		case "kind":
			bit = 2
			v, ok := d.str()
			if !ok || v == "" {
				return false
			}
			r.Kind = v
		case "source":
			bit = 4
			src := 0
			ok := d.object(func(key string) bool {
				v, ok := d.str()
				if !ok || v == "" {
					return false
				}
				switch {
				case key == "collector" && src&1 == 0:
					r.Source.Collector, src = v, src|1
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
			// Gathered first, so that the map is made at its size.
			fields := d.fields[:0]
			ok := d.object(func(key string) bool {
				v, ok := d.scalar()
				fields = append(fields, dataField{key, v})
				return ok
			})
			d.fields = fields
			if !ok {
				return false
			}
			r.Data = make(snapshot.Data, len(fields))
			for _, f := range fields {
				if _, dup := r.Data[f.key]; dup {
					return false
				}
				r.Data[f.key] = f.v
			}
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
	switch c := d.b[d.i]; {
	case c == '"':
		v, ok := d.str()
		return snapshot.String(v), ok
	case c == 't':
		return snapshot.Bool(true), d.word("true")
	case c == 'f':
		return snapshot.Bool(false), d.word("false")
	case c == 'n':
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

// appendCanonicalSnapshot appends the RFC 8785 form of s, as
// canonjson.Marshal(s.Tree()) writes it: members ordered by the UTF-16
// code units of their keys.
func appendCanonicalSnapshot(dst []byte, s *snapshot.Snapshot) []byte {
	dst = append(dst, `{"captured_at":`...)
	dst = canonjson.AppendString(dst, snapshot.FormatTime(s.CapturedAt))
	dst = append(dst, `,"evidence":[`...)
	var keys []string
	for i, r := range s.Evidence {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"data":{`...)
		keys = keys[:0]
		for k := range r.Data {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, canonjson.CompareKeys)
		for j, k := range keys {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = canonjson.AppendString(dst, k)
			dst = append(dst, ':')
			v := r.Data[k]
			switch v.Type() {
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
