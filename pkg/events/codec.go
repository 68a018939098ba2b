package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
)

// SpecVersion is the only CloudEvents version the codec reads and writes.
const SpecVersion = event.CloudEventsVersionV1

// Option configures New.
type Option func(*options)

type options struct {
	id                      string
	time                    time.Time
	traceparent, tracestate string
	signer                  *Signer
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

// New builds the event that carries p, produced by source (see Source):
// the type, subject and dataschema follow from p, the id is a UUIDv7 and the
// time is now, unless options say otherwise. The data is p as compact JSON.
// New checks the event as FromNATS and Decode will, so what it returns
// encodes and decodes.
func New(source string, p Payload, opts ...Option) (event.Event, error) {
	return newEvent(source, p, func(s *Spec, _ Payload, data []byte) error { return validateData(s, data) }, opts...)
}

// newEvent is New with the check of the encoded data given: check runs
// after p's Validate, on the JSON New sends.
func newEvent(source string, p Payload, check func(s *Spec, p Payload, data []byte) error, opts ...Option) (event.Event, error) {
	o, s, data, err := prepareEvent(p, nil, check, opts...)
	if err != nil {
		return event.Event{}, err
	}
	return buildEvent(o, s, source, p, data)
}

// prepareEvent does New's work up to the data: the options with their
// defaults, the payload's type and Validate, the data (enc, or marshal
// when enc is nil or fails) and check.
func prepareEvent(p Payload, enc func() ([]byte, error), check func(s *Spec, p Payload, data []byte) error, opts ...Option) (options, *Spec, []byte, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.id == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return o, nil, nil, fmt.Errorf("new event id: %w", err)
		}
		o.id = id.String()
	}
	if o.time.IsZero() {
		o.time = time.Now()
	}
	if p == nil {
		return o, nil, nil, invalid(ReasonInvalidPayload, "data", "no payload")
	}
	s, ok := byType[p.Type()]
	if !ok {
		return o, nil, nil, invalid(ReasonUnknownType, "type", "%T gives unknown type %q", p, p.Type())
	}
	if reflect.TypeOf(p) != s.goType {
		return o, nil, nil, invalid(ReasonUnexpectedType, "data", "%s carries %s, not %T", s.Type, s.Payload, p)
	}
	if err := p.Validate(); err != nil {
		return o, nil, nil, payloadError(err)
	}
	var data []byte
	var err error
	if enc != nil {
		data, err = enc()
	}
	if enc == nil || err != nil {
		if data, err = marshal(p); err != nil {
			return o, nil, nil, fmt.Errorf("encode %s: %w", s.Type, err)
		}
	}
	if err := check(s, p, data); err != nil {
		return o, nil, nil, err
	}
	return o, s, data, nil
}

// buildEvent builds the event New returns from prepareEvent's results,
// and checks it.
func buildEvent(o options, s *Spec, source string, p Payload, data []byte) (event.Event, error) {
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
	if err := sameAttributes(e, map[string]string{"id": o.id, "source": source, "subject": p.Subject()}); err != nil {
		return event.Event{}, err
	}
	if o.signer != nil {
		if err := o.signer.sign(&e, p); err != nil {
			return event.Event{}, err
		}
	}
	if _, err := attributes(e); err != nil {
		return event.Event{}, err
	}
	return e, nil
}

// sameAttributes checks that the event kept each value as given: the
// sdk-go setters trim spaces and normalize URIs, and the codec sends what
// it was given or nothing.
func sameAttributes(e event.Event, want map[string]string) error {
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

// NewMsg builds the event carrying p (New) and its message to
// p.NATSSubject() (ToNATS).
func NewMsg(source string, p Payload, opts ...Option) (*nats.Msg, event.Event, error) {
	return newMsg(source, p, nil, func(s *Spec, _ Payload, data []byte) error { return validateData(s, data) }, opts...)
}

// newMsg is NewMsg with the encoding and the check of the data given (see
// prepareEvent). The message and event are built directly (fastMsg) when
// they pass its checks, else by New and ToNATS, which give the error.
func newMsg(source string, p Payload, enc func() ([]byte, error), check func(s *Spec, p Payload, data []byte) error, opts ...Option) (*nats.Msg, event.Event, error) {
	o, s, data, err := prepareEvent(p, enc, check, opts...)
	if err != nil {
		return nil, event.Event{}, err
	}
	if o.signer == nil { // fastMsg builds unsigned events only
		if m, e, ok := fastMsg(p.NATSSubject(), source, p.Subject(), s, o, data); ok {
			return m, e, nil
		}
	}
	e, err := buildEvent(o, s, source, p, data)
	if err != nil {
		return nil, event.Event{}, err
	}
	m, err := ToNATS(p.NATSSubject(), e)
	if err != nil {
		return nil, event.Event{}, err
	}
	return m, e, nil
}

// marshal encodes a payload as compact JSON without HTML escaping.
func marshal(p Payload) ([]byte, error) { return marshalJSON(p) }

func marshalJSON(p any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// ToNATS encodes e as a NATS message to subject in binary content mode:
// one "ce-<attribute>" header per attribute, its value percent-encoded, the
// data as the message body, and the id again as Nats-Msg-Id, so JetStream
// de-duplicates on it. No Content-Type header is set: on NATS it would mark
// structured mode. The event is checked as FromNATS checks it.
func ToNATS(subject string, e event.Event) (*nats.Msg, error) {
	if !ValidSubject(subject) {
		return nil, fmt.Errorf("%w: %q is not a NATS subject to publish to", ErrInvalid, subject)
	}
	attrs, err := attributes(e)
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

// FromNATS decodes a message's headers and data as a binary-mode event and
// checks it strictly: specversion 1.0; id, source, type, subject, time,
// datacontenttype and dataschema present and well-formed; a catalog type
// with its dataschema; no extension but traceparent and tracestate; header
// values properly percent-encoded, each attribute given once; a
// Nats-Msg-Id, if any, equal to the id; data present and within
// MaxDataSize, headers within MaxHeaderSize. Headers without the "ce-"
// prefix are otherwise ignored. The event keeps data (not a copy).
//
// The payload is not read: Decode or DecodePayload does that. Every error
// is an *Error (errors.Is(err, ErrInvalid)).
//
// ParseAttributes checks the same and returns the attributes alone.
func FromNATS(h nats.Header, data []byte) (event.Event, error) {
	if a, src, ok := parseFast(h, data); ok {
		return a.event(src, data), nil
	}
	return fromNATS(h, data)
}

// fromNATS is FromNATS built on the sdk-go setters, for every message:
// FromNATS runs it for what parseFast declines, so that a rejected
// message gets its error from here, the first problem in header order.
func fromNATS(h nats.Header, data []byte) (event.Event, error) {
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
	if err := sameAttributes(e, attrs); err != nil {
		return event.Event{}, err
	}
	if msgID != nil && *msgID != attrs["id"] {
		return event.Event{}, invalid(ReasonInvalidAttribute, HeaderMsgID, "%q differs from the id %q", *msgID, attrs["id"])
	}
	e.DataEncoded = data
	if _, err := attributes(e); err != nil {
		return event.Event{}, err
	}
	return e, nil
}

// knownExtension reports whether the codec carries the extension name.
func knownExtension(name string) bool {
	return name == ExtTraceparent || name == ExtTracestate || name == ExtSignature
}

var coreAttributes = map[string]struct{}{
	"specversion": {}, "id": {}, "source": {}, "type": {}, "subject": {},
	"time": {}, "datacontenttype": {}, "dataschema": {},
}

type attribute struct{ name, value string }

// attributes checks e and returns its attributes in their canonical string
// form, in a fixed order: the core attributes, then the extensions by name.
func attributes(e event.Event) ([]attribute, error) {
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
	attrs := []attribute{
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
		attrs = append(attrs, attribute{name, v})
	}
	if len(e.Data()) == 0 {
		return nil, invalid(ReasonMissingAttribute, "data", "no data")
	}
	if n := len(e.Data()); n > MaxDataSize {
		return nil, invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", n, MaxDataSize)
	}
	return attrs, nil
}

// attrReason is ReasonMissingAttribute for an empty value, else
// ReasonInvalidAttribute.
func attrReason(v string) Reason {
	if v == "" {
		return ReasonMissingAttribute
	}
	return ReasonInvalidAttribute
}

// checkText accepts a non-empty attribute value without control characters.
func checkText(name, v string) error {
	if strings.TrimSpace(v) == "" {
		return invalid(ReasonMissingAttribute, name, "empty")
	}
	if i := controlIndex(v); i >= 0 {
		return invalid(ReasonInvalidAttribute, name, "invalid UTF-8 or a control character at byte %d", i)
	}
	return nil
}

// validID accepts 1 to MaxIDLength printable ASCII characters without
// space, so that the id is also a valid Nats-Msg-Id header value as is.
func validID(id string) error {
	if id == "" {
		return fmt.Errorf("empty")
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("longer than %d bytes", MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7E {
			return fmt.Errorf("byte %d is not printable ASCII (space excluded)", i)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
