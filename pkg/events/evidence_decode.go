package events

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// ReadEvidence is Read[EvidenceCollected] for a consumer that goes on to
// use the snapshot: it also returns the snapshot, parsed once. It accepts
// and rejects exactly what Read accepts and rejects, with the same errors,
// but checks the data with a typed decoder that mirrors the payload's JSON
// Schema (schemas/evidence.collected.v1.schema.json) instead of running
// the schema: one JSON parse serves the schema rules, the payload, the
// snapshot and its digest. The returned payload's Snapshot holds the
// snapshot's canonical JSON (the bytes its digest covers), not the bytes
// as received. The strings of the payload and the snapshot may share one
// copy of the data (they are cut from it rather than copied one by one).
//
// When the typed decoder refuses the data, ReadEvidence runs Read for the
// error, so a rejected event is reported exactly as before.
func ReadEvidence(m Msg) (event.Event, EvidenceCollected, *snapshot.Snapshot, error) {
	e, err := FromNATS(m.Headers(), m.Data())
	if err != nil {
		return event.Event{}, EvidenceCollected{}, nil, err
	}
	if e.Type() == TypeEvidenceCollected {
		p, s, err := decodeEvidence(e.Data())
		if err == nil && isTargetSubject(e.Subject(), p.Target) && isEvidenceSubject(m.Subject(), p.Host, p.Target.Kind) {
			return e, p, s, nil
		}
	}
	// Rejected (or the typed decoder refused what the schema path takes,
	// which the equivalence tests rule out): the schema path decides.
	e, p, err := Read[EvidenceCollected](m)
	if err != nil {
		return event.Event{}, EvidenceCollected{}, nil, err
	}
	s, err := p.ParseSnapshot()
	if err != nil {
		return event.Event{}, EvidenceCollected{}, nil, payloadError(fieldErr("snapshot", "%v", err))
	}
	if p.Snapshot, err = s.Canonical(); err != nil { // the snapshot as ReadEvidence returns it
		return event.Event{}, EvidenceCollected{}, nil, payloadError(fieldErr("snapshot", "%v", err))
	}
	return e, p, s, nil
}

// decodeEvidence decodes the data of an evidence.collected event as
// decodeInto does (jsontree, schema, encoding/json, Validate): by
// fastEvidence when it can, else over one parsed tree: checkEvidenceSchema stands for the JSON Schema, the rest for
// encoding/json and Validate. Errors carry the Reason the schema path
// would give.
func decodeEvidence(data []byte) (EvidenceCollected, *snapshot.Snapshot, error) {
	if len(data) <= MaxDataSize {
		if p, s, ok := fastEvidence(data); ok {
			return p, s, nil
		}
	}
	return decodeEvidenceTree(data)
}

// decodeEvidenceTree is decodeEvidence over a parsed JSON tree, for any
// document (fastEvidence takes the common ones).
func decodeEvidenceTree(data []byte) (EvidenceCollected, *snapshot.Snapshot, error) {
	var p EvidenceCollected
	if len(data) > MaxDataSize {
		return p, nil, invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	tree, err := jsontree.Parse(data)
	if err != nil {
		reason := ReasonMalformedJSON
		if se, ok := errors.AsType[*jsontree.SyntaxError](err); ok && strings.HasPrefix(se.Msg, "duplicate object key") {
			reason = ReasonDuplicateKey
		}
		return p, nil, &Error{Reason: reason, Field: "data", Err: err}
	}
	if err := checkEvidenceSchema(tree); err != nil {
		return p, nil, err
	}
	// What encoding/json reads into the struct: the schema holds every
	// member to its type, except that an integer may be written 6e1 or
	// 60.0, which int64 refuses.
	var snap jsontree.Value
	for _, m := range tree.Members {
		switch m.Key {
		case "host":
			p.Host = m.Value.Text
		case "target":
			p.Target = targetOf(m.Value)
		case "digest":
			p.Digest = m.Value.Text
		case "interval_seconds":
			n, err := m.Value.Int64()
			if err != nil {
				return p, nil, &Error{Reason: ReasonInvalidPayload, Field: "data",
					Err: fmt.Errorf("json: cannot unmarshal number %s into Go struct field EvidenceCollected.interval_seconds of type int64", m.Value.Text)}
			}
			p.IntervalSeconds = n
		case "snapshot":
			snap = m.Value
		case "baseline":
			t := targetOf(m.Value)
			p.Baseline = &t
		}
	}
	// Validate, with the snapshot parsed from the tree already built.
	if err := p.checkFields(); err != nil {
		return p, nil, payloadError(err)
	}
	s, ok := buildSnapshot(snap)
	if !ok {
		// snapshot.FromTree has the error (or, should buildSnapshot
		// refuse what it takes, the snapshot).
		if s, err = snapshot.FromTree(snap); err != nil {
			return p, nil, payloadError(fieldErr("snapshot", "%v", err))
		}
	}
	if got := (Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}); got != p.Target {
		return p, nil, payloadError(fieldErr("target", "%s, but the snapshot's target is %s", p.Target, got))
	}
	if err := s.Validate(); err != nil {
		return p, nil, payloadError(fieldErr("snapshot", "%v", err))
	}
	// The canonical JSON of the document as received is the snapshot's:
	// the snapshot keeps captured_at as written, and RFC 8785 takes care
	// of the rest (key order, escapes, integers).
	canon, err := canonjson.Marshal(snap)
	if err != nil {
		return p, nil, payloadError(fieldErr("snapshot", "%v", err))
	}
	sum := sha256.Sum256(canon)
	if digest := "sha256:" + hex.EncodeToString(sum[:]); digest != p.Digest {
		return p, nil, payloadError(fieldErr("digest", "%s, but the snapshot's digest is %s", p.Digest, digest))
	}
	p.Snapshot = canon
	return p, s, nil
}

// buildSnapshot is snapshot.FromTree for a document that passed
// checkEvidenceSchema, whose rules cover FromTree's but for these, where
// it gives up (ok false) for FromTree to decide: an integer written
// otherwise than as a plain literal, an evidence kind given twice.
func buildSnapshot(v jsontree.Value) (*snapshot.Snapshot, bool) {
	s := &snapshot.Snapshot{}
	for _, m := range v.Members {
		switch m.Key {
		case "schema_version":
			if m.Value.Text != "1" {
				return nil, false
			}
			s.SchemaVersion = snapshot.SchemaVersion
		case "captured_at":
			s.CapturedAt = m.Value.Text // as written; the schema checked it
		case "target":
			t := targetOf(m.Value)
			s.Target = snapshot.Target{Kind: t.Kind, Identifier: t.Identifier}
		case "evidence":
			s.Evidence = make([]snapshot.Record, 0, len(m.Value.Items))
			for _, item := range m.Value.Items {
				r, ok := buildRecord(item)
				if !ok {
					return nil, false
				}
				s.Evidence = append(s.Evidence, r)
			}
			if repeatedKind(s.Evidence) {
				return nil, false
			}
		}
	}
	return s, true
}

func buildRecord(v jsontree.Value) (snapshot.Record, bool) {
	var r snapshot.Record
	for _, m := range v.Members {
		switch m.Key {
		case "plane":
			r.Plane = snapshot.Plane(m.Value.Text)
		case "kind":
			r.Kind = m.Value.Text
		case "source":
			for _, sm := range m.Value.Members {
				switch sm.Key {
				case "collector":
					r.Source.Collector = sm.Value.Text
				case "method":
					r.Source.Method = sm.Value.Text
				}
			}
		case "data":
			r.Data = make(snapshot.Data, len(m.Value.Members))
			for _, dm := range m.Value.Members {
				switch dv := dm.Value; dv.Kind {
				case jsontree.Null:
					r.Data[dm.Key] = snapshot.Null()
				case jsontree.String:
					r.Data[dm.Key] = snapshot.String(dv.Text)
				case jsontree.Bool:
					r.Data[dm.Key] = snapshot.Bool(dv.Bool)
				default:
					n, err := dv.Int64() // the schema holds it within ±(2^53-1)
					if err != nil {
						return r, false
					}
					r.Data[dm.Key] = snapshot.Int(n)
				}
			}
		}
	}
	return r, true
}

func targetOf(v jsontree.Value) Target {
	var t Target
	for _, m := range v.Members {
		switch m.Key {
		case "kind":
			t.Kind = m.Value.Text
		case "identifier":
			t.Identifier = m.Value.Text
		}
	}
	return t
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

// checkEvidenceSchema checks a parsed document against the rules of
// schemas/evidence.collected.v1.schema.json, as the JSON Schema validator
// reads them (draft 2020-12, formats asserted): string lengths count code
// points, numbers compare by value (1.0 is the integer 1), enum and const
// compare JSON values. The tests hold the two to the same verdict on the
// golden example and its mutations; keep them in step when the schema
// changes.
func checkEvidenceSchema(v jsontree.Value) error {
	return schemaObject(v, "", evidenceRules.props, evidenceRules.required...)
}

// objectRules is "type": "object", "additionalProperties": false, the
// properties' rules, and "required".
type objectRules struct {
	props    map[string]schemaRule
	required []string
}

func (o *objectRules) check(v jsontree.Value, parent, key string) error {
	at := parent
	if key != "" || parent != "" {
		at = pointer(parent, key)
	}
	return schemaObject(v, at, o.props, o.required...)
}

// The schema's objects, built once.
var (
	evidenceRules, targetRules, snapshotRules, snapshotTargetRules, recordRules, sourceRules *objectRules
)

func init() {
	targetRules = &objectRules{map[string]schemaRule{"kind": schemaName, "identifier": schemaName}, []string{"kind", "identifier"}}
	snapshotTargetRules = &objectRules{map[string]schemaRule{"kind": nonEmptyString, "identifier": nonEmptyString}, []string{"kind", "identifier"}}
	sourceRules = &objectRules{map[string]schemaRule{"collector": nonEmptyString, "method": nonEmptyString}, []string{"collector", "method"}}
	recordRules = &objectRules{map[string]schemaRule{
		"plane": schemaPlane, "kind": nonEmptyString, "source": sourceRules.check, "data": schemaData,
	}, []string{"plane", "kind", "source", "data"}}
	snapshotRules = &objectRules{map[string]schemaRule{
		"schema_version": schemaVersion, "captured_at": schemaCapturedAt, "target": snapshotTargetRules.check, "evidence": schemaEvidence,
	}, []string{"schema_version", "captured_at", "target", "evidence"}}
	evidenceRules = &objectRules{map[string]schemaRule{
		"host": schemaName, "target": targetRules.check, "digest": schemaDigest,
		"interval_seconds": schemaInterval, "snapshot": snapshotRules.check, "baseline": targetRules.check,
	}, []string{"host", "target", "digest", "interval_seconds", "snapshot"}}
}

// schemaRule checks the value of member key (or item index, in decimal)
// of the value at parent (a JSON pointer); the pointer of the value itself
// is built only for an error, or to descend.
type schemaRule func(v jsontree.Value, parent, key string) error

func pointer(parent, key string) string { return parent + "/" + pointerToken(key) }

func schemaErr(at, format string, args ...any) error { // at: a JSON pointer
	if at == "" {
		at = "/"
	}
	return &Error{Reason: ReasonSchema, Field: at, Err: fmt.Errorf(format, args...)}
}

// schemaObject: "type": "object", "additionalProperties": false, the
// properties' rules, and "required".
func schemaObject(v jsontree.Value, at string, props map[string]schemaRule, required ...string) error {
	if v.Kind != jsontree.Object {
		return schemaErr(at, "got %s, want object", v.Kind)
	}
	for _, m := range v.Members {
		rule, ok := props[m.Key]
		if !ok {
			return schemaErr(at, "additional property %q not allowed", m.Key)
		}
		if err := rule(m.Value, at, m.Key); err != nil {
			return err
		}
	}
	for _, k := range required {
		if _, ok := v.Get(k); !ok {
			return schemaErr(at, "missing property %q", k)
		}
	}
	return nil
}

func pointerToken(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// schemaString: "type": "string", "minLength": min, "maxLength": max (0:
// none), counted in code points.
func schemaString(v jsontree.Value, parent, key string, minLen, maxLen int) error {
	if v.Kind != jsontree.String {
		return schemaErr(pointer(parent, key), "got %s, want string", v.Kind)
	}
	if minLen > 0 || maxLen > 0 {
		n := utf8.RuneCountInString(v.Text)
		if n < minLen {
			return schemaErr(pointer(parent, key), "length must be >= %d, but got %d", minLen, n)
		}
		if maxLen > 0 && n > maxLen {
			return schemaErr(pointer(parent, key), "length must be <= %d, but got %d", maxLen, n)
		}
	}
	return nil
}

// schemaName is $defs/name: 1 to 1024 code points, none in U+0000-U+001F
// or U+007F-U+009F.
func schemaName(v jsontree.Value, parent, key string) error {
	if err := schemaString(v, parent, key, 1, MaxNameLength); err != nil {
		return err
	}
	for _, r := range v.Text {
		if r < 0x20 || 0x7F <= r && r <= 0x9F {
			return schemaErr(pointer(parent, key), "%q does not match pattern", v.Text)
		}
	}
	return nil
}

// schemaDigest is $defs/digest.
func schemaDigest(v jsontree.Value, parent, key string) error {
	if v.Kind != jsontree.String {
		return schemaErr(pointer(parent, key), "got %s, want string", v.Kind)
	}
	if !ValidDigest(v.Text) {
		return schemaErr(pointer(parent, key), "%q does not match pattern", v.Text)
	}
	return nil
}

// schemaInterval: an integer from 0 to 2^53-1.
func schemaInterval(v jsontree.Value, parent, key string) error {
	return schemaInteger(v, parent, key, 0, canonjson.MaxSafeInteger)
}

// schemaInteger: "type": "integer" (any number whose value is whole) from
// lo to hi.
func schemaInteger(v jsontree.Value, parent, key string, lo, hi int64) error {
	if v.Kind != jsontree.Number {
		return schemaErr(pointer(parent, key), "got %s, want integer", v.Kind)
	}
	n, ok := wholeNumber(v.Text)
	switch {
	case !ok:
		return schemaErr(pointer(parent, key), "got number, want integer")
	case !n.within(lo, hi):
		return schemaErr(pointer(parent, key), "%s is outside %d to %d", v.Text, lo, hi)
	}
	return nil
}

// schemaVersion is "schema_version": {"const": 1}.
func schemaVersion(v jsontree.Value, parent, key string) error {
	if n, ok := wholeNumber(v.Text); v.Kind != jsontree.Number || !ok || !n.within(1, 1) {
		return schemaErr(pointer(parent, key), "value must be 1")
	}
	return nil
}

// schemaCapturedAt is a string of format date-time matching the pattern:
// together they spell snapshot.CheckTime's rule (the date-time format
// alone also takes a leap second and signed hour, minute and second
// fields, which the pattern refuses).
func schemaCapturedAt(v jsontree.Value, parent, key string) error {
	if v.Kind != jsontree.String {
		return schemaErr(pointer(parent, key), "got %s, want string", v.Kind)
	}
	if err := snapshot.CheckTime(v.Text); err != nil {
		return schemaErr(pointer(parent, key), "%v", err)
	}
	return nil
}

// schemaEvidence is an array of $defs/record.
func schemaEvidence(v jsontree.Value, parent, key string) error {
	if v.Kind != jsontree.Array {
		return schemaErr(pointer(parent, key), "got %s, want array", v.Kind)
	}
	at := pointer(parent, key)
	for i, item := range v.Items {
		if err := recordRules.check(item, at, strconv.Itoa(i)); err != nil {
			return err
		}
	}
	return nil
}

func nonEmptyString(v jsontree.Value, parent, key string) error {
	return schemaString(v, parent, key, 1, 0)
}

// schemaPlane is the enum of planes.
func schemaPlane(v jsontree.Value, parent, key string) error {
	if v.Kind != jsontree.String || !snapshot.Plane(v.Text).Valid() {
		return schemaErr(pointer(parent, key), "value must be one of declared, resolved, live")
	}
	return nil
}

// schemaData is an object of $defs/scalar.
func schemaData(v jsontree.Value, parent, key string) error {
	if v.Kind != jsontree.Object {
		return schemaErr(pointer(parent, key), "got %s, want object", v.Kind)
	}
	at := pointer(parent, key)
	for _, m := range v.Members {
		if err := schemaScalar(m.Value, at, m.Key); err != nil {
			return err
		}
	}
	return nil
}

// schemaScalar is $defs/scalar: a string, boolean or null, or an integer
// within ±(2^53-1).
func schemaScalar(v jsontree.Value, parent, key string) error {
	switch v.Kind {
	case jsontree.String, jsontree.Bool, jsontree.Null:
		return nil
	case jsontree.Number:
		return schemaInteger(v, parent, key, -canonjson.MaxSafeInteger, canonjson.MaxSafeInteger)
	}
	return schemaErr(pointer(parent, key), "anyOf failed: got %s", v.Kind)
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
