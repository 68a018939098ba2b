package binding

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
)

// SpecVersion is the only CloudEvents version the codec reads and writes.
const SpecVersion = event.CloudEventsVersionV1

// Option configures New.
type Option func(*options)

type options struct {
	id                      string
	time                    time.Time
	traceparent, tracestate string
	signer                  *dsse.Signer
}

// WithID sets the id (default: a new UUIDv7). A producer that may publish
// the same occurrence twice (a retry after a crash) derives the id from the
// occurrence, so that JetStream drops the copy within the duplicate window.
func WithID(id string) Option { return func(o *options) { o.id = id } }

// WithTime sets the time attribute (default: now).
func WithTime(t time.Time) Option { return func(o *options) { o.time = t } }

// WithTraceContext sets the traceparent and (when not empty) tracestate
// extensions. TraceCarrier does the same through an OpenTelemetry
// propagator.
func WithTraceContext(traceparent, tracestate string) Option {
	return func(o *options) { o.traceparent, o.tracestate = traceparent, tracestate }
}

// New builds the event that carries p, produced by source (see events.Source):
// the type, subject and dataschema follow from p, the id is a UUIDv7 and the
// time is now, unless options say otherwise. The data is p as compact JSON
// (encodeData). New checks p (Validate) and the event as FromNATS will, so
// what it returns encodes and decodes.
func New(source string, p events.Payload, opts ...Option) (event.Event, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.id == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return event.Event{}, fmt.Errorf("new event id: %w", err)
		}
		o.id = id.String()
	}
	if o.time.IsZero() {
		o.time = time.Now()
	}
	if p == nil {
		return event.Event{}, events.Invalid(events.ReasonInvalidPayload, "data", "no payload")
	}
	s, ok := events.Lookup(p.Type())
	if !ok {
		return event.Event{}, events.Invalid(events.ReasonUnknownType, "type", "%T gives unknown type %q", p, p.Type())
	}
	if reflect.TypeOf(p) != s.GoType() {
		return event.Event{}, events.Invalid(events.ReasonUnexpectedType, "data", "%s carries %s, not %T", s.Type, s.Payload, p)
	}
	if err := events.Validate(p); err != nil {
		return event.Event{}, err
	}
	data, err := events.EncodeData(p)
	if err != nil {
		return event.Event{}, fmt.Errorf("encode %s: %w", s.Type, err)
	}
	e := event.New(SpecVersion)
	e.SetID(o.id)
	e.SetSource(source)
	e.SetType(s.Type)
	e.SetSubject(p.Subject())
	e.SetTime(o.time.UTC())
	e.SetDataContentType(events.ContentType)
	setDataSchema(&e, s.Type, s.SchemaURI)
	if o.traceparent != "" {
		e.SetExtension(ExtTraceparent, o.traceparent)
	}
	if o.tracestate != "" {
		e.SetExtension(ExtTracestate, o.tracestate)
	}
	e.DataEncoded = data
	if err := sameAttributes(e, map[string]string{"id": o.id, "source": source, "subject": p.Subject()}); err != nil {
		return event.Event{}, err
	}
	if o.signer != nil {
		sig, err := o.signer.Sign(&e, p)
		if err != nil {
			return event.Event{}, err
		}
		e.SetExtension(dsse.ExtSignature, sig)
	}
	if err := checkEvent(e); err != nil {
		return event.Event{}, err
	}
	return e, nil
}

// NewMsg builds the event carrying p (New) and its message to
// p.NATSSubject() (ToNATS).
func NewMsg(source string, p events.Payload, opts ...Option) (*nats.Msg, event.Event, error) {
	e, err := New(source, p, opts...)
	if err != nil {
		return nil, event.Event{}, err
	}
	m, err := ToNATS(p.NATSSubject(), e)
	if err != nil {
		return nil, event.Event{}, err
	}
	return m, e, nil
}

// sameAttributes checks that the event kept each value as given: the
// sdk-go setters trim spaces and normalize URIs, and the codec sends what
// it was given or nothing.
func sameAttributes(e event.Event, want map[string]string) error {
	// The attributes the setters may change, in name order.
	for _, name := range [...]string{"datacontenttype", "dataschema", "id", "source", "subject", "type"} {
		w, ok := want[name]
		if !ok {
			continue
		}
		var g string
		switch name {
		case "datacontenttype":
			g = e.DataContentType()
		case "dataschema":
			g = dataSchema(e)
		case "id":
			g = e.ID()
		case "source":
			g = e.Source()
		case "subject":
			g = e.Subject()
		case "type":
			g = e.Type()
		}
		if g != w {
			if _, fieldErr := e.FieldErrors[name]; fieldErr {
				continue // reported by checkEvent
			}
			return events.Invalid(attrReason(g), name, "%q is not in normal form (it reads back as %q)", w, g)
		}
	}
	return nil
}

// ToNATS encodes e as a NATS message to subject in binary content mode:
// one "ce-<attribute>" header per attribute, its value percent-encoded, the
// data as the message body, and the id again as Nats-Msg-Id, so JetStream
// de-duplicates on it. No Content-Type header is set: on NATS it would mark
// structured mode. The event is checked as FromNATS checks it.
func ToNATS(subject string, e event.Event) (*nats.Msg, error) {
	if !events.ValidSubject(subject) {
		return nil, fmt.Errorf("%w: %q is not a NATS subject to publish to", events.ErrInvalid, subject)
	}
	if err := checkEvent(e); err != nil {
		return nil, err
	}
	a := AttributesOf(e)
	h := a.header()
	if n := headerSize(h); n > events.MaxHeaderSize {
		return nil, events.Invalid(events.ReasonTooLarge, "headers", "%d bytes, over the %d-byte limit", n, events.MaxHeaderSize)
	}
	return &nats.Msg{Subject: subject, Header: h, Data: e.Data()}, nil
}

// header builds the headers of these attributes: each attribute's
// percent-encoded, and the id as Nats-Msg-Id.
func (a *Attributes) header() nats.Header {
	h := make(nats.Header, 12)
	put := func(k, v string) { h[k] = []string{v} }
	put(HeaderPrefix+"specversion", SpecVersion)
	put(HeaderPrefix+"id", encodeValue(a.ID))
	put(HeaderPrefix+"source", encodeValue(a.Source))
	put(HeaderPrefix+"type", encodeValue(a.Type))
	put(HeaderPrefix+"subject", encodeValue(a.Subject))
	put(HeaderPrefix+"time", encodeValue(types.FormatTime(a.Time)))
	put(HeaderPrefix+"datacontenttype", encodeValue(a.DataContentType))
	put(HeaderPrefix+"dataschema", encodeValue(a.DataSchema))
	if a.Signature != "" {
		put(HeaderPrefix+dsse.ExtSignature, encodeValue(a.Signature))
	}
	if a.Traceparent != "" {
		put(HeaderPrefix+ExtTraceparent, encodeValue(a.Traceparent))
	}
	if a.Tracestate != "" {
		put(HeaderPrefix+ExtTracestate, encodeValue(a.Tracestate))
	}
	put(HeaderMsgID, a.ID)
	return h
}

// Attributes are the attributes of an event as FromNATS returns it, as
// plain values (AttributesOf), for a consumer that records the envelope
// (the auditor). Traceparent and Tracestate are empty when absent.
type Attributes struct {
	ID              string
	Source          string
	Type            string
	Subject         string
	Time            time.Time
	DataContentType string
	DataSchema      string
	Traceparent     string
	Tracestate      string
	// Signature is the dsse.ExtSignature envelope, as carried (unchecked).
	Signature string
}

// AttributesOf returns the attributes of an event FromNATS (or
// checkEvent) accepted, as plain values.
func AttributesOf(e event.Event) Attributes {
	a := Attributes{
		ID: e.ID(), Source: e.Source(), Type: e.Type(), Subject: e.Subject(), Time: e.Time(),
		DataContentType: e.DataContentType(), DataSchema: dataSchema(e),
	}
	ext := extensions(e)
	a.Traceparent, _ = ext[ExtTraceparent].(string)
	a.Tracestate, _ = ext[ExtTracestate].(string)
	a.Signature, _ = ext[dsse.ExtSignature].(string)
	return a
}

// FromNATS decodes a message's headers and data as a binary-mode event and
// checks it strictly: specversion 1.0; id, source, type, subject, time,
// datacontenttype and dataschema present and well-formed; a catalog type
// with its dataschema; no extension but traceparent, tracestate and
// rtsignature; header values properly percent-encoded, each attribute
// given once and in the normal form the sdk-go setters keep; a
// Nats-Msg-Id, if any, equal to the id; data present and within
// events.MaxDataSize, headers within events.MaxHeaderSize. Headers without the "ce-"
// prefix are otherwise ignored. The event keeps data (not a copy).
//
// The payload is not read: Decode does that. Every error is an *events.Error
// (errors.Is(err, events.ErrInvalid)), for the first problem in the order of the
// checks above, headers taken in sorted order.
func FromNATS(h nats.Header, data []byte) (event.Event, error) {
	// The sizes are checked first; the headers' is summed as they are
	// read.
	sizes := func(n int) error {
		if n > events.MaxHeaderSize {
			return events.Invalid(events.ReasonTooLarge, "headers", "%d bytes, over the %d-byte limit", n, events.MaxHeaderSize)
		}
		if len(data) > events.MaxDataSize {
			return events.Invalid(events.ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), events.MaxDataSize)
		}
		return nil
	}
	attrs := make(map[string]string, len(h))
	var msgID *string
	header := func(k string, vs []string) error {
		lk := strings.ToLower(k)
		switch {
		case lk == headerContentType:
			for _, v := range vs {
				if strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "application/cloudevents") {
					return events.Invalid(events.ReasonContentMode, k, "%q is structured or batched content mode; only binary mode is accepted", v)
				}
			}
		case lk == "nats-msg-id":
			if msgID != nil || len(vs) != 1 {
				return events.Invalid(events.ReasonInvalidAttribute, HeaderMsgID, "given more than once")
			}
			msgID = &vs[0]
		case strings.HasPrefix(lk, HeaderPrefix):
			name := lk[len(HeaderPrefix):]
			if _, dup := attrs[name]; dup || len(vs) != 1 {
				return events.Invalid(events.ReasonInvalidAttribute, k, "attribute %q given more than once", name)
			}
			v, err := decodeValue(vs[0])
			if err != nil {
				return &events.Error{Reason: events.ReasonInvalidAttribute, Field: k, Err: err}
			}
			attrs[name] = v
		}
		return nil
	}
	// The headers in map order; on a problem again in sorted order, so
	// that the error is the first problem in that order.
	size := headerBase
	for k, vs := range h {
		size += headerLineSize(k, vs)
		if err := header(k, vs); err != nil {
			if err := sizes(headerSize(h)); err != nil {
				return event.Event{}, err
			}
			clear(attrs)
			msgID = nil
			for _, k := range slices.Sorted(maps.Keys(h)) {
				if err := header(k, h[k]); err != nil {
					return event.Event{}, err
				}
			}
			return event.Event{}, err // not reached: the same headers fail in any order
		}
	}
	if err := sizes(size); err != nil {
		return event.Event{}, err
	}
	sv, ok := attrs["specversion"]
	if !ok {
		return event.Event{}, events.Invalid(events.ReasonMissingAttribute, "specversion", "no %sspecversion header", HeaderPrefix)
	}
	if sv != SpecVersion {
		return event.Event{}, events.Invalid(events.ReasonSpecVersion, "specversion", "%q, want %q", sv, SpecVersion)
	}
	if err := requireAttributes(attrs, "id", "source", "type"); err != nil {
		return event.Event{}, err
	}
	if _, ok := events.Lookup(attrs["type"]); !ok {
		return event.Event{}, events.Invalid(events.ReasonUnknownType, "type", "%q is not in the catalog", attrs["type"])
	}
	if err := requireAttributes(attrs, "subject", "time", "datacontenttype", "dataschema"); err != nil {
		return event.Event{}, err
	}
	t, err := types.ParseTime(attrs["time"])
	if err != nil {
		return event.Event{}, events.Invalid(events.ReasonInvalidAttribute, "time", "%q is not an RFC 3339 timestamp", attrs["time"])
	}
	e := event.New(SpecVersion)
	e.SetID(attrs["id"])
	e.SetSource(attrs["source"])
	e.SetType(attrs["type"])
	e.SetSubject(attrs["subject"])
	e.SetTime(t)
	e.SetDataContentType(attrs["datacontenttype"])
	setDataSchema(&e, attrs["type"], attrs["dataschema"])
	for name, v := range attrs {
		switch {
		case coreAttribute(name):
		case knownExtension(name):
			e.SetExtension(name, v)
		default: // the first unknown in name order
			name = slices.Sorted(func(yield func(string) bool) {
				for name := range attrs {
					if !coreAttribute(name) && !knownExtension(name) && !yield(name) {
						return
					}
				}
			})[0]
			return event.Event{}, errUnknownExtension(name)
		}
	}
	if err := sameAttributes(e, attrs); err != nil {
		return event.Event{}, err
	}
	if msgID != nil && *msgID != attrs["id"] {
		return event.Event{}, events.Invalid(events.ReasonInvalidAttribute, HeaderMsgID, "%q differs from the id %q", *msgID, attrs["id"])
	}
	e.DataEncoded = data
	if err := checkEvent(e); err != nil {
		return event.Event{}, err
	}
	return e, nil
}

// requireAttributes is the error of the first of names not in attrs.
func requireAttributes(attrs map[string]string, names ...string) error {
	for _, name := range names {
		if _, ok := attrs[name]; !ok {
			return events.Invalid(events.ReasonMissingAttribute, name, "no %s%s header", HeaderPrefix, name)
		}
	}
	return nil
}

func errUnknownExtension(name string) error {
	return events.Invalid(events.ReasonUnknownExtension, name, "extension %q is not accepted (only %s, %s, %s)", name, ExtTraceparent, ExtTracestate, dsse.ExtSignature)
}

// The extensions an event carries, as bits of a set.
const (
	hasTraceparent = 1 << iota
	hasTracestate
	hasSignature
)

// checkExtensions checks the extensions present (ext), by name.
func checkExtensions(ext uint, traceparent, tracestate, signature string) error {
	if ext&hasSignature != 0 {
		if err := dsse.ValidExtension(signature); err != nil {
			return &events.Error{Reason: events.ReasonInvalidAttribute, Field: dsse.ExtSignature, Err: err}
		}
	}
	if ext&hasTraceparent != 0 {
		if err := validTraceparent(traceparent); err != nil {
			return &events.Error{Reason: events.ReasonInvalidAttribute, Field: ExtTraceparent, Err: err}
		}
	}
	if ext&hasTracestate != 0 {
		if err := validTracestate(tracestate); err != nil {
			return &events.Error{Reason: events.ReasonInvalidAttribute, Field: ExtTracestate, Err: err}
		}
		if ext&hasTraceparent == 0 {
			return events.Invalid(events.ReasonInvalidAttribute, ExtTracestate, "tracestate without traceparent")
		}
	}
	return nil
}

// checkEvent checks an event.Event as FromNATS checks what it returns:
// what Decode and ToNATS take.
func checkEvent(e event.Event) error {
	if e.Context == nil {
		return events.Invalid(events.ReasonMissingAttribute, "specversion", "event has no context")
	}
	if sv := e.SpecVersion(); sv != SpecVersion {
		return events.Invalid(events.ReasonSpecVersion, "specversion", "%q, want %q", sv, SpecVersion)
	}
	if len(e.FieldErrors) > 0 {
		names := slices.Sorted(maps.Keys(e.FieldErrors))
		return &events.Error{Reason: events.ReasonInvalidAttribute, Field: strings.TrimPrefix(names[0], "extension:"), Err: e.FieldErrors[names[0]]}
	}
	if err := events.ValidID(e.ID()); err != nil {
		return &events.Error{Reason: attrReason(e.ID()), Field: "id", Err: err}
	}
	typ := e.Type()
	if typ == "" {
		return events.Invalid(events.ReasonMissingAttribute, "type", "empty")
	}
	s, ok := events.Lookup(typ)
	if !ok {
		return events.Invalid(events.ReasonUnknownType, "type", "%q is not in the catalog", typ)
	}
	source := e.Source()
	if err := checkText("source", source); err != nil {
		return err
	}
	if u := types.ParseURIRef(source); u == nil || u.String() != source {
		return events.Invalid(events.ReasonInvalidAttribute, "source", "%q is not a URI reference in normal form", source)
	}
	if err := checkText("subject", e.Subject()); err != nil {
		return err
	}
	if e.Time().IsZero() {
		return events.Invalid(events.ReasonMissingAttribute, "time", "empty")
	}
	if ct := e.DataContentType(); ct != events.ContentType {
		return events.Invalid(attrReason(ct), "datacontenttype", "%q, want %q", ct, events.ContentType)
	}
	if ds := dataSchema(e); ds != s.SchemaURI {
		return events.Invalid(attrReason(ds), "dataschema", "%q, want %q for %s", ds, s.SchemaURI, typ)
	}
	exts := extensions(e)
	var ext uint
	var values [3]string
	for name, x := range exts {
		v, ok := x.(string)
		if !ok || !knownExtension(name) {
			return extensionError(exts)
		}
		switch name {
		case ExtTraceparent:
			ext, values[0] = ext|hasTraceparent, v
		case ExtTracestate:
			ext, values[1] = ext|hasTracestate, v
		case dsse.ExtSignature:
			ext, values[2] = ext|hasSignature, v
		}
	}
	if err := checkExtensions(ext, values[0], values[1], values[2]); err != nil {
		return err
	}
	if len(e.Data()) == 0 {
		return events.Invalid(events.ReasonMissingAttribute, "data", "no data")
	}
	if n := len(e.Data()); n > events.MaxDataSize {
		return events.Invalid(events.ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", n, events.MaxDataSize)
	}
	return nil
}

// dataSchemas holds each catalog type's dataschema, parsed once: the
// events New builds and FromNATS reads share it (SetDataSchema would parse
// the same URI for each).
var dataSchemas = func() map[string]catalogURI {
	m := map[string]catalogURI{}
	for _, s := range events.Catalog() {
		u := types.ParseURI(s.SchemaURI)
		if u == nil || u.String() != s.SchemaURI {
			panic("binding: the catalog's dataschema " + s.SchemaURI + " is not a URI in normal form")
		}
		m[s.Type] = catalogURI{s.SchemaURI, u}
	}
	return m
}()

// catalogURI is a URI as written and parsed.
type catalogURI struct {
	text   string
	parsed *types.URI
}

// setDataSchema sets e's dataschema to v as e.SetDataSchema does, to the
// shared parsed URI when v is the catalog's for typ.
func setDataSchema(e *event.Event, typ, v string) {
	if u, ok := dataSchemas[typ]; ok && v == u.text {
		if ec, ok := e.Context.(*event.EventContextV1); ok {
			ec.DataSchema = u.parsed
			return
		}
	}
	e.SetDataSchema(v)
}

// dataSchema is e.DataSchema(), without writing the URI out again when it
// is the catalog's shared one.
func dataSchema(e event.Event) string {
	if ec, ok := e.Context.(*event.EventContextV1); ok && ec.DataSchema != nil {
		if u := dataSchemas[ec.Type]; ec.DataSchema == u.parsed {
			return u.text
		}
	}
	return e.DataSchema()
}

// extensions is e's extensions, read in place (event.Extensions returns
// a copy). The caller must not change the map.
func extensions(e event.Event) map[string]any {
	if ec, ok := e.Context.(*event.EventContextV1); ok {
		return ec.Extensions
	}
	return e.Extensions()
}

// extensionError is the error of the first extension in name order that
// is unknown or not a string.
func extensionError(exts map[string]any) error {
	for _, name := range slices.Sorted(maps.Keys(exts)) {
		if !knownExtension(name) {
			return errUnknownExtension(name)
		}
		if _, ok := exts[name].(string); !ok {
			return events.Invalid(events.ReasonInvalidAttribute, name, "a %T, want a string", exts[name])
		}
	}
	return nil
}

// coreAttribute reports whether name is one of the attributes every
// event of the catalog carries.
func coreAttribute(name string) bool {
	switch name {
	case "specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema":
		return true
	}
	return false
}

// knownExtension reports whether the codec carries the extension name.
func knownExtension(name string) bool {
	return name == ExtTraceparent || name == ExtTracestate || name == dsse.ExtSignature
}

// attrReason is events.ReasonMissingAttribute for an empty value, else
// events.ReasonInvalidAttribute.
func attrReason(v string) events.Reason {
	if v == "" {
		return events.ReasonMissingAttribute
	}
	return events.ReasonInvalidAttribute
}

// checkText accepts a non-empty attribute value without control characters.
func checkText(name, v string) error {
	if strings.TrimSpace(v) == "" {
		return events.Invalid(events.ReasonMissingAttribute, name, "empty")
	}
	if i := events.ControlIndex(v); i >= 0 {
		return events.Invalid(events.ReasonInvalidAttribute, name, "invalid UTF-8 or a control character at byte %d", i)
	}
	return nil
}

// WithSigner signs the event with s (dsse.ExtSignature).
func WithSigner(s *dsse.Signer) Option { return func(o *options) { o.signer = s } }
