package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// The evidence.collected decoder. Its data is read in one pass over the
// bytes straight into the payload and the snapshot, applying the rules of
// schemas/evidence.collected.v1.schema.json (as the JSON Schema validator
// reads them: draft 2020-12, formats asserted; string lengths count code
// points, numbers compare by value) and then the payload's own (Validate:
// the snapshot parsed strictly, its target and digest the payload's). The
// schema stays the specification: the tests hold this decoder to the
// compiled schema, encoding/json and Validate over the golden example,
// thousands of mutations of it and fuzzed data (accepted iff they accept,
// the same payload, an error of the same reason). Keep the two in step
// when the schema changes.
//
// Errors come in the order the schema path gives them: malformed JSON or
// a duplicate key anywhere (jsontree.Parse names it), else the first
// schema rule broken in document order, else the payload's rules.

// ReadEvidence is Read[EvidenceCollected] for a consumer that goes on to
// use the snapshot: it also returns the snapshot, parsed once. It accepts
// and rejects exactly what Read accepts and rejects, with the same errors.
// The returned payload's Snapshot holds the snapshot's canonical JSON (the
// bytes its digest covers), not the bytes as received (Read's). The
// strings of the payload and the snapshot may share one copy of the data
// (they are cut from it rather than copied one by one).
func ReadEvidence(m Msg) (event.Event, EvidenceCollected, *snapshot.Snapshot, error) {
	e, err := FromNATS(m.Headers(), m.Data())
	if err != nil {
		return event.Event{}, EvidenceCollected{}, nil, err
	}
	s := byType[e.Type()]
	if want := reflect.TypeFor[EvidenceCollected](); s.goType != want {
		return event.Event{}, EvidenceCollected{}, nil, invalid(ReasonUnexpectedType, "type", "%s carries %s, not %s", s.Type, s.Payload, want.Name())
	}
	p, snap, _, err := decodeEvidence(e.Data())
	if err != nil {
		return event.Event{}, EvidenceCollected{}, nil, err
	}
	if !isTargetSubject(e.Subject(), p.Target) || !isEvidenceSubject(m.Subject(), p.Host, p.Target.Kind) {
		if err := checkDecoded(s, e, p); err != nil {
			return event.Event{}, EvidenceCollected{}, nil, err
		}
		if err := checkNATSSubject(p, m.Subject()); err != nil {
			return event.Event{}, EvidenceCollected{}, nil, err
		}
	}
	return e, p, snap, nil
}

// decodeEvidencePayload is the catalog's decoder of evidence.collected
// data (Decode): the payload's Snapshot as received, as encoding/json
// gives a json.RawMessage.
func decodeEvidencePayload(_ *Spec, data []byte) (Payload, error) {
	p, _, raw, err := decodeEvidence(data)
	if err != nil {
		return nil, err
	}
	p.Snapshot = bytes.Clone(raw)
	return p, nil
}

// decodeEvidence decodes the data of an evidence.collected event: the
// payload, whose Snapshot is the canonical snapshot, the snapshot, and
// the snapshot as written in data.
func decodeEvidence(data []byte) (EvidenceCollected, *snapshot.Snapshot, []byte, error) {
	if len(data) > MaxDataSize {
		return EvidenceCollected{}, nil, nil, invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	d := newJSONReader(data)
	defer d.release()
	var r evidenceRead
	if !r.read(d) {
		// A rule of the schema's broken, or malformed JSON: malformed
		// JSON anywhere, or a key given twice, comes first.
		if _, err := jsontree.Parse(data); err != nil {
			return EvidenceCollected{}, nil, nil, syntaxError(err)
		}
		if d.err == nil {
			// The reader found malformed what jsontree.Parse takes (the
			// tests rule it out).
			return EvidenceCollected{}, nil, nil, invalid(ReasonMalformedJSON, "data", "malformed JSON at byte %d", d.i)
		}
		return EvidenceCollected{}, nil, nil, d.err
	}
	canon, err := r.finish(d)
	if err != nil {
		return EvidenceCollected{}, nil, nil, err
	}
	r.p.Snapshot = canon
	return r.p, r.s, r.raw, nil
}

// syntaxError is the error of jsontree.Parse's error err: malformed JSON,
// or a key given twice.
func syntaxError(err error) error {
	reason := ReasonMalformedJSON
	if se, ok := errors.AsType[*jsontree.SyntaxError](err); ok && strings.HasPrefix(se.Msg, "duplicate object key") {
		reason = ReasonDuplicateKey
	}
	return &Error{Reason: reason, Field: "data", Err: err}
}

// evidenceRead is an evidence.collected document as read: the payload,
// the snapshot, the snapshot as written, and the payload's problems the
// schema does not see, for after the schema's rules.
type evidenceRead struct {
	p   EvidenceCollected
	s   *snapshot.Snapshot
	raw []byte
	// intervalErr: interval_seconds is whole but not written as an
	// integer, which encoding/json refuses for an int64.
	intervalErr error
	// versionErr, recordErr: the snapshot's schema_version or a record
	// snapshot.Parse refuses (a whole number not written as an integer,
	// a kind given twice), the first.
	versionErr, recordErr error
}

// The members of each object, as bits of a set.
const (
	evHost = 1 << iota
	evTarget
	evDigest
	evInterval
	evSnapshot
	evBaseline
)

// read reads the document; false at the first schema rule broken (d.err)
// or malformed JSON (d.err nil).
func (r *evidenceRead) read(d *jsonReader) bool {
	r.s = &snapshot.Snapshot{}
	if !d.want(jsontree.Object) {
		return false
	}
	seen, ok := d.members(func(key string) (int, bool) {
		d.push(key)
		defer d.pop()
		switch key {
		case "host":
			v, ok := d.name()
			r.p.Host = v
			return evHost, ok
		case "target":
			t, ok := d.target(true)
			r.p.Target = t
			return evTarget, ok
		case "digest":
			v, ok := d.string()
			if ok && !ValidDigest(v) {
				return 0, d.schemaErr("%q does not match pattern", v)
			}
			r.p.Digest = v
			return evDigest, ok
		case "interval_seconds":
			lit, n, plain, ok := d.integer(0, canonjson.MaxSafeInteger)
			if ok && !plain {
				if n, plain = plainInteger(lit); !plain && r.intervalErr == nil {
					r.intervalErr = fmt.Errorf("json: cannot unmarshal number %s into Go struct field EvidenceCollected.interval_seconds of type int64", lit)
				}
			}
			r.p.IntervalSeconds = n
			return evInterval, ok
		case "snapshot":
			raw, ok := r.snapshot(d)
			r.raw = raw
			return evSnapshot, ok
		case "baseline":
			t, ok := d.target(true)
			r.p.Baseline = &t
			return evBaseline, ok
		}
		return 0, d.unknownMember(key)
	})
	if !ok {
		return false
	}
	if !d.required(seen, "host", "target", "digest", "interval_seconds", "snapshot") {
		return false
	}
	return d.end()
}

// finish checks the payload's rules (Validate's, the snapshot's as
// snapshot.Parse has them) on what read read, and returns the snapshot's
// canonical JSON.
func (r *evidenceRead) finish(d *jsonReader) ([]byte, error) {
	if r.intervalErr != nil {
		return nil, &Error{Reason: ReasonInvalidPayload, Field: "data", Err: r.intervalErr}
	}
	if err := r.p.checkFields(); err != nil {
		return nil, payloadError(err)
	}
	for _, err := range []error{r.versionErr, r.recordErr} {
		if err != nil {
			return nil, payloadError(fieldErr("snapshot", "%v", err))
		}
	}
	// The reading checked the rest of snapshot.Validate: the schema
	// version, captured_at, the target's and every record's strings, the
	// planes, the kinds given once, valid UTF-8 and the integers' range.
	if got := (Target{Kind: r.s.Target.Kind, Identifier: r.s.Target.Identifier}); got != r.p.Target {
		return nil, payloadError(fieldErr("target", "%s, but the snapshot's target is %s", r.p.Target, got))
	}
	// The snapshot as written, when that is its canonical form (as a
	// snapshot built by NewEvidenceCollected is sent), else written so.
	var canon []byte
	if d.notCanonical {
		canon = d.appendCanonical(make([]byte, 0, len(r.raw)), r.s)
	} else {
		canon = slices.Clone(r.raw)
	}
	if sum := sha256.Sum256(canon); !digestEquals(r.p.Digest, &sum) {
		digest := "sha256:" + hex.EncodeToString(sum[:])
		return nil, payloadError(fieldErr("digest", "%s, but the snapshot's digest is %s", r.p.Digest, digest))
	}
	return canon, nil
}

// snapshot reads the snapshot into r.s, and returns it as written.
func (r *evidenceRead) snapshot(d *jsonReader) ([]byte, bool) {
	if !d.want(jsontree.Object) {
		return nil, false
	}
	start := d.i
	d.inSnapshot = true
	defer func() { d.inSnapshot = false }()
	s := r.s
	last := -1
	seen, ok := d.members(func(key string) (int, bool) {
		d.push(key)
		defer d.pop()
		switch key {
		case "schema_version":
			d.order(&last, 2)
			if k, ok := d.kind(); !ok || k != jsontree.Number {
				return 0, ok && d.schemaErr("value must be 1")
			}
			lit, _, plain, ok := d.number()
			if !ok {
				return 0, false
			}
			if n, whole := wholeNumber(lit); !whole || !n.within(1, 1) {
				return 0, d.schemaErr("value must be 1")
			}
			if !plain && r.versionErr == nil {
				r.versionErr = fmt.Errorf("%w: schema_version: must be an integer, got non-integer number", snapshot.ErrFormat)
			}
			s.SchemaVersion = snapshot.SchemaVersion
			return 1, true
		case "captured_at":
			d.order(&last, 0)
			v, ok := d.string()
			if !ok {
				return 0, false
			}
			if err := snapshot.CheckTime(v); err != nil {
				return 0, d.schemaErr("%v", err)
			}
			s.CapturedAt = v // as written
			return 2, true
		case "target":
			d.order(&last, 3)
			t, ok := d.target(false)
			s.Target = snapshot.Target{Kind: t.Kind, Identifier: t.Identifier}
			return 4, ok
		case "evidence":
			d.order(&last, 1)
			recs, ok := r.records(d)
			s.Evidence = recs
			return 8, ok
		}
		return 0, d.unknownMember(key)
	})
	if !ok || !d.required(seen, "schema_version", "captured_at", "target", "evidence") {
		return nil, false
	}
	return d.b[start:d.i], true
}

// records reads the snapshot's evidence, an array of records.
func (r *evidenceRead) records(d *jsonReader) ([]snapshot.Record, bool) {
	if !d.want(jsontree.Array) {
		return nil, false
	}
	recs := d.recs[:0]
	var kinds map[string]int // for many records
	ok := d.array(func(i int) bool {
		d.pushIndex(i)
		rec, ok := r.record(d, i)
		d.pop()
		if !ok {
			return false
		}
		recs = append(recs, rec)
		if r.recordErr == nil {
			if j := repeatedKind(recs, &kinds); j >= 0 {
				r.recordErr = fmt.Errorf("%w: evidence[%d].kind: duplicate evidence kind %q (also evidence[%d])", snapshot.ErrFormat, i, rec.Kind, j)
			}
		}
		return true
	})
	switch {
	case !ok:
		return nil, false
	case len(recs) == 0:
		return []snapshot.Record{}, true
	}
	d.recs = recs
	return slices.Clone(recs), true
}

// record reads record i.
func (r *evidenceRead) record(d *jsonReader, i int) (snapshot.Record, bool) {
	var rec snapshot.Record
	if !d.want(jsontree.Object) {
		return rec, false
	}
	last := -1
	seen, ok := d.members(func(key string) (int, bool) {
		d.push(key)
		defer d.pop()
		switch key {
		case "plane":
			d.order(&last, 2)
			if k, ok := d.kind(); !ok || k != jsontree.String {
				return 0, ok && d.schemaErr("value must be one of declared, resolved, live")
			}
			v, ok := d.str()
			if !ok {
				return 0, false
			}
			if !snapshot.Plane(v).Valid() {
				return 0, d.schemaErr("value must be one of declared, resolved, live")
			}
			rec.Plane = snapshot.Plane(v)
			return 1, true
		case "kind":
			d.order(&last, 1)
			v, ok := d.nonEmpty()
			rec.Kind = v
			return 2, ok
		case "source":
			d.order(&last, 3)
			return 4, r.source(d, &rec.Source)
		case "data":
			d.order(&last, 0)
			data, ok := r.data(d, i)
			rec.Data = data
			return 8, ok
		}
		return 0, d.unknownMember(key)
	})
	return rec, ok && d.required(seen, "plane", "kind", "source", "data")
}

// source reads a record's {collector, method}.
func (r *evidenceRead) source(d *jsonReader, src *snapshot.Source) bool {
	if !d.want(jsontree.Object) {
		return false
	}
	methodRead := false
	seen, ok := d.members(func(key string) (int, bool) {
		var bit int
		var dst *string
		switch key {
		case "collector":
			bit, dst = 1, &src.Collector
			if methodRead {
				d.notCanonical = true // collector sorts first
			}
		case "method":
			bit, dst = 2, &src.Method
			methodRead = true
		default:
			return 0, d.schemaErr("additional property %q not allowed", key)
		}
		d.push(key)
		v, ok := d.nonEmpty()
		d.pop()
		*dst = v
		return bit, ok
	})
	return ok && d.required(seen, "collector", "method")
}

// data reads the data of record i: an object of scalars. The fields are
// gathered first, so that the map is made at its size, and kept for
// appendCanonical.
func (r *evidenceRead) data(d *jsonReader, i int) (snapshot.Data, bool) {
	if !d.want(jsontree.Object) {
		return nil, false
	}
	start := len(d.fields)
	_, ok := d.members(func(key string) (int, bool) {
		if len(d.fields) > start && canonjson.CompareKeys(d.fields[len(d.fields)-1].key, key) >= 0 {
			d.notCanonical = true
		}
		d.push(key)
		v, ok := r.scalar(d, i, key)
		d.pop()
		d.fields = append(d.fields, dataField{key, v})
		return 0, ok // a key given twice: below
	})
	if !ok {
		return nil, false
	}
	fields := d.fields[start:]
	data := make(snapshot.Data, len(fields))
	for _, f := range fields {
		data[f.key] = f.v
	}
	if len(data) != len(fields) {
		return nil, false // a key given twice
	}
	d.ends = append(d.ends, len(d.fields))
	return data, true
}

// scalar reads a data value of record i: a string, boolean or null, or
// an integer within ±(2^53-1) ($defs/scalar).
func (r *evidenceRead) scalar(d *jsonReader, i int, key string) (snapshot.Value, bool) {
	k, ok := d.kind()
	if !ok {
		return snapshot.Value{}, false
	}
	switch k {
	case jsontree.String:
		v, ok := d.str()
		return snapshot.String(v), ok
	case jsontree.Bool:
		if d.b[d.i] == 't' {
			return snapshot.Bool(true), d.word("true")
		}
		return snapshot.Bool(false), d.word("false")
	case jsontree.Null:
		return snapshot.Null(), d.word("null")
	case jsontree.Number:
		lit, n, plain, ok := d.integer(-canonjson.MaxSafeInteger, canonjson.MaxSafeInteger)
		if !ok {
			return snapshot.Value{}, false
		}
		if !plain {
			if n, plain = plainInteger(lit); !plain {
				if r.recordErr == nil {
					r.recordErr = fmt.Errorf("%w: evidence[%d].data.%s: non-integer number %s (schema v1 data is string, integer, boolean or null)", snapshot.ErrFormat, i, key, lit)
				}
				return snapshot.Value{}, true
			}
		}
		if lit == "-0" {
			d.notCanonical = true // canonical JSON writes 0
		}
		return snapshot.Int(n), true
	}
	return snapshot.Value{}, d.schemaErr("anyOf failed: got %s", k)
}

// plainInteger is the value of an integer literal without a fraction or
// exponent (as jsontree.Value.IsInteger and Int64 read it).
func plainInteger(lit string) (int64, bool) {
	if strings.ContainsAny(lit, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	return n, err == nil
}

// schemaErr records a schema error at the reader's place.
func (d *jsonReader) schemaErr(format string, args ...any) bool {
	return d.fail(&Error{Reason: ReasonSchema, Field: d.pointer(), Err: fmt.Errorf(format, args...)})
}

// want checks that the value next is of kind k ("type").
func (d *jsonReader) want(k jsontree.Kind) bool {
	got, ok := d.kind()
	if !ok {
		return false
	}
	if got != k {
		return d.schemaErr("got %s, want %s", got, k)
	}
	return true
}

// required checks that an object had the members named (bits 1, 2, 4, …
// of seen), in that order ("required").
func (d *jsonReader) required(seen int, names ...string) bool {
	for i, name := range names {
		if seen&(1<<i) == 0 {
			return d.schemaErr("missing property %q", name)
		}
	}
	return true
}

// string reads a string ("type": "string").
func (d *jsonReader) string() (string, bool) {
	if !d.want(jsontree.String) {
		return "", false
	}
	return d.str()
}

// nonEmpty reads a string of at least one code point ("minLength": 1).
func (d *jsonReader) nonEmpty() (string, bool) {
	v, ok := d.string()
	if ok && v == "" {
		return "", d.schemaErr("length must be >= 1, but got 0")
	}
	return v, ok
}

// name reads a $defs/name: 1 to MaxNameLength code points, none in
// U+0000-U+001F or U+007F-U+009F.
func (d *jsonReader) name() (string, bool) {
	v, ok := d.nonEmpty()
	if !ok {
		return "", false
	}
	if len(v) > MaxNameLength {
		if n := utf8.RuneCountInString(v); n > MaxNameLength {
			return "", d.schemaErr("length must be <= %d, but got %d", MaxNameLength, n)
		}
	}
	for _, c := range v {
		if c < 0x20 || 0x7F <= c && c <= 0x9F {
			return "", d.schemaErr("%q does not match pattern", v)
		}
	}
	return v, true
}

// integer reads an integer ("type": "integer": any number whose value is
// whole) from lo to hi; n is its value when plain.
func (d *jsonReader) integer(lo, hi int64) (lit string, n int64, plain, ok bool) {
	if !d.want(jsontree.Number) {
		return "", 0, false, false
	}
	lit, n, plain, ok = d.number()
	switch {
	case !ok:
		return "", 0, false, false
	case plain:
		if n < lo || n > hi {
			return "", 0, false, d.schemaErr("%s is outside %d to %d", lit, lo, hi)
		}
		return lit, n, true, true
	}
	w, whole := wholeNumber(lit)
	switch {
	case !whole:
		return "", 0, false, d.schemaErr("got number, want integer")
	case !w.within(lo, hi):
		return "", 0, false, d.schemaErr("%s is outside %d to %d", lit, lo, hi)
	}
	return lit, 0, false, true
}

// target reads {kind, identifier}: names ($defs/name) when names, else
// non-empty strings.
func (d *jsonReader) target(names bool) (Target, bool) {
	var t Target
	if !d.want(jsontree.Object) {
		return t, false
	}
	kindRead := false
	seen, ok := d.members(func(key string) (int, bool) {
		var bit int
		var dst *string
		switch key {
		case "kind":
			bit, dst = 1, &t.Kind
			kindRead = true
		case "identifier":
			bit, dst = 2, &t.Identifier
			if kindRead {
				d.notCanonical = d.notCanonical || d.inSnapshot // identifier sorts first
			}
		default:
			return 0, d.schemaErr("additional property %q not allowed", key)
		}
		d.push(key)
		var v string
		var ok bool
		if names {
			v, ok = d.name()
		} else {
			v, ok = d.nonEmpty()
		}
		d.pop()
		*dst = v
		return bit, ok
	})
	return t, ok && d.required(seen, "kind", "identifier")
}

// checkFields checks the payload's own fields: Validate up to the
// snapshot.
func (p EvidenceCollected) checkFields() error {
	if err := checkName("host", p.Host); err != nil {
		return err
	}
	if err := p.Target.validate("target"); err != nil {
		return err
	}
	if err := checkDigest("digest", p.Digest); err != nil {
		return err
	}
	if p.IntervalSeconds < 0 {
		return fieldErr("interval_seconds", "negative")
	}
	if p.Baseline != nil {
		return p.Baseline.validate("baseline")
	}
	return nil
}

// appendCanonical appends the RFC 8785 form of s, the snapshot d read
// last, as canonjson.Marshal(s.Tree()) writes it: members ordered by the
// UTF-16 code units of their keys. The data members are those d gathered
// (the same as the records' maps), sorted unless they came in order.
func (d *jsonReader) appendCanonical(dst []byte, s *snapshot.Snapshot) []byte {
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

func compareFields(a, b dataField) int { return canonjson.CompareKeys(a.key, b.key) }

// repeatedKind returns the index of an earlier record of the last one's
// kind, or -1: checked one against another for a few records, through
// kinds (made on need) for many.
func repeatedKind(recs []snapshot.Record, kinds *map[string]int) int {
	last := len(recs) - 1
	kind := recs[last].Kind
	if len(recs) <= 16 {
		for j := range last {
			if recs[j].Kind == kind {
				return j
			}
		}
		return -1
	}
	if *kinds == nil {
		*kinds = make(map[string]int, 2*len(recs))
		for j, r := range recs[:last] {
			if _, ok := (*kinds)[r.Kind]; !ok {
				(*kinds)[r.Kind] = j
			}
		}
	}
	if j, ok := (*kinds)[kind]; ok {
		return j
	}
	(*kinds)[kind] = last
	return -1
}

// whole is a whole number: sign, decimal digits without leading zeros
// ("" for zero) and a power of ten.
type whole struct {
	neg    bool
	digits string
	exp    int64
}

// within reports whether lo <= n <= hi (both within ±(2^63-1)).
func (n whole) within(lo, hi int64) bool {
	if n.digits == "" {
		return lo <= 0 && 0 <= hi
	}
	if int64(len(n.digits))+n.exp > 19 {
		return false // at least 10^19
	}
	u, err := strconv.ParseUint(n.digits+strings.Repeat("0", int(n.exp)), 10, 64)
	if err != nil || u > 1<<63-1 {
		return false
	}
	v := int64(u)
	if n.neg {
		v = -v
	}
	return lo <= v && v <= hi
}

// wholeNumber reads a JSON number literal and reports whether its value is
// whole (1, 1.0, 1e2 and 100e-2 are; 1.5 and 1e-1 are not), exactly, as
// the schema validator's rational arithmetic does.
func wholeNumber(lit string) (whole, bool) {
	var n whole
	s := lit
	if strings.HasPrefix(s, "-") {
		n.neg, s = true, s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	var exp int64
	if hasExp {
		e, err := strconv.ParseInt(strings.TrimPrefix(expPart, "+"), 10, 64)
		if err != nil {
			// An exponent beyond int64: the value is huge (whole) or
			// tiny (not whole, unless zero).
			if strings.Trim(intPart+frac, "0") == "" {
				return whole{}, true
			}
			if strings.HasPrefix(expPart, "-") {
				return whole{}, false
			}
			return whole{neg: n.neg, digits: "1", exp: 1 << 62}, true
		}
		exp = e
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	if trimmed == "" {
		return whole{}, true // zero, -0 included
	}
	if exp < 0 {
		return whole{}, false
	}
	n.digits, n.exp = trimmed, exp
	return n, true
}
