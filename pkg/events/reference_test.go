package events

import (
	"fmt"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// The reference codec: the envelope decoded and encoded through the
// sdk-go event.Event setters and checks, as the codec did before it read
// and wrote the headers directly. It is the specification of the codec's
// acceptance and errors, in test code only: the tests hold FromNATS,
// ParseAttributes, New, NewMsg and ToNATS to it (the same event, message
// and error), differentially (FuzzFromNATSIsReference).

// newMsgReference is NewMsg through the reference: the data by
// encoding/json and checked by the JSON Schema, New on the sdk-go
// setters, then toNATSReference.
func newMsgReference(source string, p Payload, opts ...Option) (*nats.Msg, event.Event, error) {
	o, s, data, err := prepareEvent(p, marshal, checkSchema, opts...)
	if err != nil {
		return nil, event.Event{}, err
	}
	e, err := buildEventReference(o, s, source, p, data)
	if err != nil {
		return nil, event.Event{}, err
	}
	m, err := toNATSReference(p.NATSSubject(), e)
	if err != nil {
		return nil, event.Event{}, err
	}
	return m, e, nil
}

// buildEvent builds the event New returns from prepareEvent's results,
// and checks it.
func buildEventReference(o options, s *Spec, source string, p Payload, data []byte) (event.Event, error) {
	e := event.New(SpecVersion)
	e.SetID(o.id)
	e.SetSource(source)
	e.SetType(s.Type)
	e.SetSubject(p.Subject())
	e.SetTime(o.time.UTC())
	e.SetDataContentType(ContentType)
	e.SetDataSchema(s.SchemaURI)
	if o.traceparent != "" {
		e.SetExtension(ExtTraceparent, o.traceparent)
	}
	if o.tracestate != "" {
		e.SetExtension(ExtTracestate, o.tracestate)
	}
	e.DataEncoded = data
	if err := sameAttributesReference(e, map[string]string{"id": o.id, "source": source, "subject": p.Subject()}); err != nil {
		return event.Event{}, err
	}
	if o.signer != nil {
		a := attributesOf(e)
		if err := o.signer.sign(&a, e.Data(), p); err != nil {
			return event.Event{}, err
		}
		e.SetExtension(ExtSignature, a.Signature)
	}
	if _, err := attributesReference(e); err != nil {
		return event.Event{}, err
	}
	return e, nil
}

// sameAttributes checks that the event kept each value as given: the
// sdk-go setters trim spaces and normalize URIs, and the codec sends what
// it was given or nothing.
func sameAttributesReference(e event.Event, want map[string]string) error {
	got := map[string]string{
		"id": e.ID(), "source": e.Source(), "type": e.Type(), "subject": e.Subject(),
		"datacontenttype": e.DataContentType(), "dataschema": e.DataSchema(),
	}
	for _, name := range sortedKeys(want) {
		if g, ok := got[name]; ok && g != want[name] {
			if _, fieldErr := e.FieldErrors[name]; fieldErr {
				continue // reported by attributes
			}
			return invalid(attrReason(g), name, "%q is not in normal form (it reads back as %q)", want[name], g)
		}
	}
	return nil
}

// ToNATS encodes e as a NATS message to subject in binary content mode:
// one "ce-<attribute>" header per attribute, its value percent-encoded, the
// data as the message body, and the id again as Nats-Msg-Id, so JetStream
// de-duplicates on it. No Content-Type header is set: on NATS it would mark
// structured mode. The event is checked as FromNATS checks it.
func toNATSReference(subject string, e event.Event) (*nats.Msg, error) {
	if !ValidSubject(subject) {
		return nil, fmt.Errorf("%w: %q is not a NATS subject to publish to", ErrInvalid, subject)
	}
	attrs, err := attributesReference(e)
	if err != nil {
		return nil, err
	}
	h := make(nats.Header, len(attrs)+1)
	for _, a := range attrs {
		h[HeaderPrefix+a.name] = []string{encodeValue(a.value)}
	}
	h[HeaderMsgID] = []string{e.ID()}
	if n := headerSize(h); n > MaxHeaderSize {
		return nil, invalid(ReasonTooLarge, "headers", "%d bytes, over the %d-byte limit", n, MaxHeaderSize)
	}
	return &nats.Msg{Subject: subject, Header: h, Data: e.Data()}, nil
}

// fromNATS is FromNATS built on the sdk-go setters, for every message:
// FromNATS runs it for what parseFast declines, so that a rejected
// message gets its error from here, the first problem in header order.
func fromNATSReference(h nats.Header, data []byte) (event.Event, error) {
	if n := headerSize(h); n > MaxHeaderSize {
		return event.Event{}, invalid(ReasonTooLarge, "headers", "%d bytes, over the %d-byte limit", n, MaxHeaderSize)
	}
	if len(data) > MaxDataSize {
		return event.Event{}, invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	attrs := make(map[string]string, len(h))
	var msgID *string
	for _, k := range sortedKeys(h) {
		vs := h[k]
		lk := strings.ToLower(k)
		switch {
		case lk == headerContentType:
			for _, v := range vs {
				if strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "application/cloudevents") {
					return event.Event{}, invalid(ReasonContentMode, k, "%q is structured or batched content mode; only binary mode is accepted", v)
				}
			}
		case lk == strings.ToLower(HeaderMsgID):
			if msgID != nil || len(vs) != 1 {
				return event.Event{}, invalid(ReasonInvalidAttribute, HeaderMsgID, "given more than once")
			}
			msgID = &vs[0]
		case strings.HasPrefix(lk, HeaderPrefix):
			name := lk[len(HeaderPrefix):]
			if _, dup := attrs[name]; dup || len(vs) != 1 {
				return event.Event{}, invalid(ReasonInvalidAttribute, k, "attribute %q given more than once", name)
			}
			v, err := decodeValue(vs[0])
			if err != nil {
				return event.Event{}, &Error{Reason: ReasonInvalidAttribute, Field: k, Err: err}
			}
			attrs[name] = v
		}
	}
	sv, ok := attrs["specversion"]
	if !ok {
		return event.Event{}, invalid(ReasonMissingAttribute, "specversion", "no %sspecversion header", HeaderPrefix)
	}
	if sv != SpecVersion {
		return event.Event{}, invalid(ReasonSpecVersion, "specversion", "%q, want %q", sv, SpecVersion)
	}
	for _, name := range []string{"id", "source", "type"} {
		if _, ok := attrs[name]; !ok {
			return event.Event{}, invalid(ReasonMissingAttribute, name, "no %s%s header", HeaderPrefix, name)
		}
	}
	if _, ok := byType[attrs["type"]]; !ok {
		return event.Event{}, invalid(ReasonUnknownType, "type", "%q is not in the catalog", attrs["type"])
	}
	for _, name := range []string{"subject", "time", "datacontenttype", "dataschema"} {
		if _, ok := attrs[name]; !ok {
			return event.Event{}, invalid(ReasonMissingAttribute, name, "no %s%s header", HeaderPrefix, name)
		}
	}
	t, err := types.ParseTime(attrs["time"])
	if err != nil {
		return event.Event{}, invalid(ReasonInvalidAttribute, "time", "%q is not an RFC 3339 timestamp", attrs["time"])
	}
	e := event.New(SpecVersion)
	e.SetID(attrs["id"])
	e.SetSource(attrs["source"])
	e.SetType(attrs["type"])
	e.SetSubject(attrs["subject"])
	e.SetTime(t)
	e.SetDataContentType(attrs["datacontenttype"])
	e.SetDataSchema(attrs["dataschema"])
	for _, name := range sortedKeys(attrs) {
		if _, core := coreAttributes[name]; core {
			continue
		}
		if !knownExtension(name) {
			return event.Event{}, invalid(ReasonUnknownExtension, name, "extension %q is not accepted (only %s, %s, %s)", name, ExtTraceparent, ExtTracestate, ExtSignature)
		}
		e.SetExtension(name, attrs[name])
	}
	if err := sameAttributesReference(e, attrs); err != nil {
		return event.Event{}, err
	}
	if msgID != nil && *msgID != attrs["id"] {
		return event.Event{}, invalid(ReasonInvalidAttribute, HeaderMsgID, "%q differs from the id %q", *msgID, attrs["id"])
	}
	e.DataEncoded = data
	if _, err := attributesReference(e); err != nil {
		return event.Event{}, err
	}
	return e, nil
}

var coreAttributes = map[string]struct{}{
	"specversion": {}, "id": {}, "source": {}, "type": {}, "subject": {},
	"time": {}, "datacontenttype": {}, "dataschema": {},
}

type attributeReference struct{ name, value string }

// attributes checks e and returns its attributes in their canonical string
// form, in a fixed order: the core attributes, then the extensions by name.
func attributesReference(e event.Event) ([]attributeReference, error) {
	if e.Context == nil {
		return nil, invalid(ReasonMissingAttribute, "specversion", "event has no context")
	}
	if sv := e.SpecVersion(); sv != SpecVersion {
		return nil, invalid(ReasonSpecVersion, "specversion", "%q, want %q", sv, SpecVersion)
	}
	if names := sortedKeys(e.FieldErrors); len(names) > 0 {
		return nil, &Error{Reason: ReasonInvalidAttribute, Field: strings.TrimPrefix(names[0], "extension:"), Err: e.FieldErrors[names[0]]}
	}
	if err := validID(e.ID()); err != nil {
		return nil, &Error{Reason: attrReason(e.ID()), Field: "id", Err: err}
	}
	typ := e.Type()
	if typ == "" {
		return nil, invalid(ReasonMissingAttribute, "type", "empty")
	}
	s, ok := byType[typ]
	if !ok {
		return nil, invalid(ReasonUnknownType, "type", "%q is not in the catalog", typ)
	}
	source := e.Source()
	if err := checkText("source", source); err != nil {
		return nil, err
	}
	if u := types.ParseURIRef(source); u == nil || u.String() != source {
		return nil, invalid(ReasonInvalidAttribute, "source", "%q is not a URI reference in normal form", source)
	}
	if err := checkText("subject", e.Subject()); err != nil {
		return nil, err
	}
	if e.Time().IsZero() {
		return nil, invalid(ReasonMissingAttribute, "time", "empty")
	}
	if ct := e.DataContentType(); ct != ContentType {
		return nil, invalid(attrReason(ct), "datacontenttype", "%q, want %q", ct, ContentType)
	}
	if ds := e.DataSchema(); ds != s.SchemaURI {
		return nil, invalid(attrReason(ds), "dataschema", "%q, want %q for %s", ds, s.SchemaURI, typ)
	}
	attrs := []attributeReference{
		{"specversion", SpecVersion},
		{"id", e.ID()},
		{"source", source},
		{"type", typ},
		{"subject", e.Subject()},
		{"time", types.FormatTime(e.Time())},
		{"datacontenttype", ContentType},
		{"dataschema", s.SchemaURI},
	}
	ext := e.Extensions()
	for _, name := range sortedKeys(ext) {
		v, ok := ext[name].(string)
		switch {
		case !knownExtension(name):
			return nil, invalid(ReasonUnknownExtension, name, "extension %q is not accepted (only %s, %s, %s)", name, ExtTraceparent, ExtTracestate, ExtSignature)
		case !ok:
			return nil, invalid(ReasonInvalidAttribute, name, "a %T, want a string", ext[name])
		case name == ExtTraceparent:
			if err := validTraceparent(v); err != nil {
				return nil, &Error{Reason: ReasonInvalidAttribute, Field: name, Err: err}
			}
		case name == ExtTracestate:
			if err := validTracestate(v); err != nil {
				return nil, &Error{Reason: ReasonInvalidAttribute, Field: name, Err: err}
			}
			if _, ok := ext[ExtTraceparent]; !ok {
				return nil, invalid(ReasonInvalidAttribute, name, "tracestate without traceparent")
			}
		case name == ExtSignature:
			if err := validSignature(v); err != nil {
				return nil, &Error{Reason: ReasonInvalidAttribute, Field: name, Err: err}
			}
		}
		attrs = append(attrs, attributeReference{name, v})
	}
	if len(e.Data()) == 0 {
		return nil, invalid(ReasonMissingAttribute, "data", "no data")
	}
	if n := len(e.Data()); n > MaxDataSize {
		return nil, invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", n, MaxDataSize)
	}
	return attrs, nil
}
