package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"sync"
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
	a, src, data, err := newAttributes(source, p, nil, nil, opts...)
	if err != nil {
		return event.Event{}, err
	}
	return a.event(src, data), nil
}

// NewMsg builds the event carrying p (New) and its message to
// p.NATSSubject() (ToNATS).
func NewMsg(source string, p Payload, opts ...Option) (*nats.Msg, event.Event, error) {
	return newMsg(source, p, nil, nil, opts...)
}

// checkSchema checks encoded data against its type's JSON Schema.
func checkSchema(s *Spec, _ Payload, data []byte) error { return validateData(s, data) }

// newMsg is NewMsg with the encoding and the check of the data given, or
// the payload type's (see prepareEvent).
func newMsg(source string, p Payload, enc func(Payload) ([]byte, error), check func(s *Spec, p Payload, data []byte) error, opts ...Option) (*nats.Msg, event.Event, error) {
	a, src, data, err := newAttributes(source, p, enc, check, opts...)
	if err != nil {
		return nil, event.Event{}, err
	}
	m, err := a.msg(p.NATSSubject(), data)
	if err != nil {
		return nil, event.Event{}, err
	}
	return m, a.event(src, data), nil
}

// newAttributes does New's work up to the event: the attributes of the
// event carrying p, checked as FromNATS checks them (and signed), the
// parsed source and the data.
func newAttributes(source string, p Payload, enc func(Payload) ([]byte, error), check func(s *Spec, p Payload, data []byte) error, opts ...Option) (Attributes, url.URL, []byte, error) {
	o, s, data, err := prepareEvent(p, enc, check, opts...)
	if err != nil {
		return Attributes{}, url.URL{}, nil, err
	}
	a := Attributes{
		ID: o.id, Source: source, Type: s.Type, Subject: p.Subject(), Time: o.time.UTC(),
		DataContentType: ContentType, DataSchema: s.SchemaURI, Traceparent: o.traceparent, Tracestate: o.tracestate,
	}
	var ext uint
	if a.Traceparent != "" {
		ext |= hasTraceparent
	}
	if a.Tracestate != "" {
		ext |= hasTracestate
	}
	if o.signer != nil {
		if err := o.signer.sign(&a, data, p); err != nil {
			return Attributes{}, url.URL{}, nil, err
		}
		ext |= hasSignature
	}
	src, err := a.check(s, ext, nil, data)
	if err != nil {
		return Attributes{}, url.URL{}, nil, err
	}
	return a, src, data, nil
}

// prepareEvent does New's work up to the data: the options with their
// defaults, the payload's type and Validate, the data encoded (by enc, or
// the type's encoder when nil) and checked (by check, or the type's check
// when nil: its JSON Schema, or what stands for it).
func prepareEvent(p Payload, enc func(Payload) ([]byte, error), check func(s *Spec, p Payload, data []byte) error, opts ...Option) (options, *Spec, []byte, error) {
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
	if enc == nil {
		enc = s.encode
	}
	if check == nil {
		check = s.check
	}
	data, err := enc(p)
	if err != nil {
		return o, nil, nil, fmt.Errorf("encode %s: %w", s.Type, err)
	}
	if err := check(s, p, data); err != nil {
		return o, nil, nil, err
	}
	return o, s, data, nil
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
		return nil, errNotPublishable(subject)
	}
	if err := checkEvent(e); err != nil {
		return nil, err
	}
	a := attributesOf(e)
	return a.msg(subject, e.Data())
}

func errNotPublishable(subject string) error {
	return fmt.Errorf("%w: %q is not a NATS subject to publish to", ErrInvalid, subject)
}

// msg is the message of the event of these attributes and data, to
// subject.
func (a *Attributes) msg(subject string, data []byte) (*nats.Msg, error) {
	if !ValidSubject(subject) {
		return nil, errNotPublishable(subject)
	}
	h := a.header()
	if n := headerSize(h); n > MaxHeaderSize {
		return nil, invalid(ReasonTooLarge, "headers", "%d bytes, over the %d-byte limit", n, MaxHeaderSize)
	}
	return &nats.Msg{Subject: subject, Header: h, Data: data}, nil
}

// header builds the headers of these attributes: each attribute's
// percent-encoded, and the id as Nats-Msg-Id.
func (a *Attributes) header() nats.Header {
	n := 9
	for _, v := range []string{a.Traceparent, a.Tracestate, a.Signature} {
		if v != "" {
			n++
		}
	}
	h := make(nats.Header, n)
	vals := make([]string, n) // one array for every header's value
	i := 0
	put := func(k, v string) {
		vals[i] = v
		h[k] = vals[i : i+1 : i+1]
		i++
	}
	put(HeaderPrefix+"specversion", SpecVersion)
	put(HeaderPrefix+"id", encodeValue(a.ID))
	put(HeaderPrefix+"source", encodeValue(a.Source))
	put(HeaderPrefix+"type", encodeValue(a.Type))
	put(HeaderPrefix+"subject", encodeValue(a.Subject))
	put(HeaderPrefix+"time", encodeValue(types.FormatTime(a.Time)))
	put(HeaderPrefix+"datacontenttype", encodeValue(a.DataContentType))
	put(HeaderPrefix+"dataschema", encodeValue(a.DataSchema))
	if a.Signature != "" {
		put(HeaderPrefix+ExtSignature, encodeValue(a.Signature))
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
// plain values: a consumer that needs the envelope but not an
// event.Event (the auditor records it) reads them with ParseAttributes.
// Traceparent and Tracestate are empty when absent.
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
	// Signature is the ExtSignature envelope, as carried (unchecked).
	Signature string
}

// attributesOf returns the attributes of an event checkEvent accepted.
func attributesOf(e event.Event) Attributes {
	a := Attributes{
		ID: e.ID(), Source: e.Source(), Type: e.Type(), Subject: e.Subject(), Time: e.Time(),
		DataContentType: e.DataContentType(), DataSchema: e.DataSchema(),
	}
	ext := e.Extensions()
	a.Traceparent, _ = ext[ExtTraceparent].(string)
	a.Tracestate, _ = ext[ExtTracestate].(string)
	a.Signature, _ = ext[ExtSignature].(string)
	return a
}

// FromNATS decodes a message's headers and data as a binary-mode event and
// checks it strictly: specversion 1.0; id, source, type, subject, time,
// datacontenttype and dataschema present and well-formed; a catalog type
// with its dataschema; no extension but traceparent, tracestate and
// rtsignature; header values properly percent-encoded, each attribute
// given once; a Nats-Msg-Id, if any, equal to the id; data present and
// within MaxDataSize, headers within MaxHeaderSize. Headers without the
// "ce-" prefix are otherwise ignored. The event keeps data (not a copy).
//
// The payload is not read: Decode does that. Every error
// is an *Error (errors.Is(err, ErrInvalid)), for the first problem in the
// order of the checks above, headers taken in sorted order.
//
// ParseAttributes checks the same and returns the attributes alone.
func FromNATS(h nats.Header, data []byte) (event.Event, error) {
	a, src, err := readAttributes(h, data)
	if err != nil {
		return event.Event{}, err
	}
	return a.event(src, data), nil
}

// ParseAttributes checks a message as FromNATS does and returns the
// attributes of the event FromNATS would return, without building the
// event. The data is checked for presence and size only, as FromNATS
// does.
func ParseAttributes(h nats.Header, data []byte) (Attributes, error) {
	a, _, err := readAttributes(h, data)
	return a, err
}

// The attribute headers, as bits of a set.
const (
	hasSpecVersion = 1 << iota
	hasID
	hasSource
	hasType
	hasSubject
	hasTime
	hasContentType
	hasSchema
	hasTraceparent
	hasTracestate
	hasSignature
)

// headerRead is the headers of a message as read: the attributes' values
// (decoded), which were given (seen), the Nats-Msg-Id, and any other
// attribute, which is refused.
type headerRead struct {
	a                     Attributes
	specVersion, timeText string
	seen                  uint
	msgID                 string
	hasMsgID              bool
	other                 map[string]struct{}
	otherFirst            string
}

// readAttributes reads and checks the headers of a message (FromNATS).
// The headers are read in map order; on a problem, again in sorted order,
// so that the error is the first problem in that order.
func readAttributes(h nats.Header, data []byte) (Attributes, url.URL, error) {
	var r headerRead
	size := len("NATS/1.0\r\n") + 2 // headerSize(h), summed on the way
	var err error
	for k, vs := range h {
		for _, v := range vs {
			size += len(k) + 2 + len(v) + 2
		}
		if err = r.header(k, vs); err != nil {
			break
		}
	}
	if err != nil {
		size = headerSize(h)
	}
	if size > MaxHeaderSize {
		return Attributes{}, url.URL{}, invalid(ReasonTooLarge, "headers", "%d bytes, over the %d-byte limit", size, MaxHeaderSize)
	}
	if len(data) > MaxDataSize {
		return Attributes{}, url.URL{}, invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	if err != nil {
		r = headerRead{}
		for _, k := range sortedKeys(h) {
			if err := r.header(k, h[k]); err != nil {
				return Attributes{}, url.URL{}, err
			}
		}
	}
	s, err := r.check()
	if err != nil {
		return Attributes{}, url.URL{}, err
	}
	var msgID *string
	if r.hasMsgID {
		msgID = &r.msgID
	}
	src, err := r.a.check(s, r.seen, msgID, data)
	if err != nil {
		return Attributes{}, url.URL{}, err
	}
	return r.a, src, nil
}

// header reads one header: a Content-Type of structured or batched mode
// is refused, a Nats-Msg-Id kept, an attribute decoded (each once).
func (r *headerRead) header(k string, vs []string) error {
	lk := "nats-msg-id"
	if k != HeaderMsgID {
		lk = strings.ToLower(k) // no copy when already lower case
	}
	switch {
	case lk == headerContentType:
		for _, v := range vs {
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(v)), "application/cloudevents") {
				return invalid(ReasonContentMode, k, "%q is structured or batched content mode; only binary mode is accepted", v)
			}
		}
		return nil
	case lk == "nats-msg-id":
		if r.hasMsgID || len(vs) != 1 {
			return invalid(ReasonInvalidAttribute, HeaderMsgID, "given more than once")
		}
		r.hasMsgID, r.msgID = true, vs[0]
		return nil
	case !strings.HasPrefix(lk, HeaderPrefix):
		return nil
	}
	name := lk[len(HeaderPrefix):]
	var bit uint
	var dst *string
	switch name {
	case "specversion":
		bit, dst = hasSpecVersion, &r.specVersion
	case "id":
		bit, dst = hasID, &r.a.ID
	case "source":
		bit, dst = hasSource, &r.a.Source
	case "type":
		bit, dst = hasType, &r.a.Type
	case "subject":
		bit, dst = hasSubject, &r.a.Subject
	case "time":
		bit, dst = hasTime, &r.timeText
	case "datacontenttype":
		bit, dst = hasContentType, &r.a.DataContentType
	case "dataschema":
		bit, dst = hasSchema, &r.a.DataSchema
	case ExtTraceparent:
		bit, dst = hasTraceparent, &r.a.Traceparent
	case ExtTracestate:
		bit, dst = hasTracestate, &r.a.Tracestate
	case ExtSignature:
		bit, dst = hasSignature, &r.a.Signature
	}
	dup := r.seen&bit != 0
	if bit == 0 {
		_, dup = r.other[name]
	}
	if dup || len(vs) != 1 {
		return invalid(ReasonInvalidAttribute, k, "attribute %q given more than once", name)
	}
	v, err := decodeValue(vs[0])
	if err != nil {
		return &Error{Reason: ReasonInvalidAttribute, Field: k, Err: err}
	}
	if bit == 0 { // refused by check, the first by name
		if r.other == nil {
			r.other = map[string]struct{}{}
		}
		r.other[name] = struct{}{}
		if len(r.other) == 1 || name < r.otherFirst {
			r.otherFirst = name
		}
		return nil
	}
	r.seen |= bit
	*dst = v
	return nil
}

// check checks what the headers gave: the specversion, the required
// attributes, a catalog type, the time, no other attribute.
func (r *headerRead) check() (*Spec, error) {
	if r.seen&hasSpecVersion == 0 {
		return nil, invalid(ReasonMissingAttribute, "specversion", "no %sspecversion header", HeaderPrefix)
	}
	if r.specVersion != SpecVersion {
		return nil, invalid(ReasonSpecVersion, "specversion", "%q, want %q", r.specVersion, SpecVersion)
	}
	required := func(names ...string) error {
		for _, name := range names {
			if r.seen&attributeBits[name] == 0 {
				return invalid(ReasonMissingAttribute, name, "no %s%s header", HeaderPrefix, name)
			}
		}
		return nil
	}
	if err := required("id", "source", "type"); err != nil {
		return nil, err
	}
	s, ok := byType[r.a.Type]
	if !ok {
		return nil, invalid(ReasonUnknownType, "type", "%q is not in the catalog", r.a.Type)
	}
	if err := required("subject", "time", "datacontenttype", "dataschema"); err != nil {
		return nil, err
	}
	t, err := types.ParseTime(r.timeText)
	if err != nil {
		return nil, invalid(ReasonInvalidAttribute, "time", "%q is not an RFC 3339 timestamp", r.timeText)
	}
	r.a.Time = t
	if r.other != nil {
		return nil, errUnknownExtension(r.otherFirst)
	}
	return s, nil
}

var attributeBits = map[string]uint{
	"id": hasID, "source": hasSource, "type": hasType, "subject": hasSubject,
	"time": hasTime, "datacontenttype": hasContentType, "dataschema": hasSchema,
}

func errUnknownExtension(name string) error {
	return invalid(ReasonUnknownExtension, name, "extension %q is not accepted (only %s, %s, %s)", name, ExtTraceparent, ExtTracestate, ExtSignature)
}

// check checks the attributes of an event of type s, with the extensions
// ext present (hasTraceparent, hasTracestate, hasSignature), the
// Nats-Msg-Id if one was given, and its data; it returns the source
// parsed. Values are taken as given or not at all: each must read back as
// given from an event.Event (the sdk-go setters trim spaces and normalize
// URIs), which is checked first, by name.
func (a *Attributes) check(s *Spec, ext uint, msgID *string, data []byte) (url.URL, error) {
	// What the sdk-go setters refuse, reported after the values that do
	// not read back as given.
	var schemaErr, idErr, sourceErr error
	if got := strings.TrimSpace(a.DataContentType); got != a.DataContentType {
		return url.URL{}, notNormal("datacontenttype", a.DataContentType, got)
	}
	if _, ok := schemaURLs()[a.DataSchema]; !ok {
		got := strings.TrimSpace(a.DataSchema)
		if got != "" {
			u, err := url.Parse(got)
			if err != nil {
				schemaErr, got = err, a.DataSchema
			} else {
				got = u.String()
			}
		}
		if got != a.DataSchema {
			return url.URL{}, notNormal("dataschema", a.DataSchema, got)
		}
	}
	if got := strings.TrimSpace(a.ID); got == "" {
		idErr = errors.New("id is required to be a non-empty string")
	} else if got != a.ID {
		return url.URL{}, notNormal("id", a.ID, got)
	}
	src, ok := sourceURL(a.Source)
	if !ok {
		u, err := url.Parse(a.Source)
		if err != nil {
			sourceErr = err
		} else if got := u.String(); got != a.Source {
			return url.URL{}, notNormal("source", a.Source, got)
		}
	}
	if got := strings.TrimSpace(a.Subject); got != a.Subject {
		return url.URL{}, notNormal("subject", a.Subject, got)
	}
	if got := strings.TrimSpace(a.Type); got != a.Type {
		return url.URL{}, notNormal("type", a.Type, got)
	}
	if msgID != nil && *msgID != a.ID {
		return url.URL{}, invalid(ReasonInvalidAttribute, HeaderMsgID, "%q differs from the id %q", *msgID, a.ID)
	}
	for _, fe := range []struct {
		name string
		err  error
	}{{"dataschema", schemaErr}, {"id", idErr}, {"source", sourceErr}} {
		if fe.err != nil {
			return url.URL{}, &Error{Reason: ReasonInvalidAttribute, Field: fe.name, Err: fe.err}
		}
	}
	if err := validID(a.ID); err != nil {
		return url.URL{}, &Error{Reason: attrReason(a.ID), Field: "id", Err: err}
	}
	if err := checkText("source", a.Source); err != nil {
		return url.URL{}, err
	}
	if !ok { // a source sourceURL refuses that reads back as given
		return url.URL{}, invalid(ReasonInvalidAttribute, "source", "%q is not a URI reference in normal form", a.Source)
	}
	if err := checkText("subject", a.Subject); err != nil {
		return url.URL{}, err
	}
	if a.Time.IsZero() {
		return url.URL{}, invalid(ReasonMissingAttribute, "time", "empty")
	}
	if ct := a.DataContentType; ct != ContentType {
		return url.URL{}, invalid(attrReason(ct), "datacontenttype", "%q, want %q", ct, ContentType)
	}
	if ds := a.DataSchema; ds != s.SchemaURI {
		return url.URL{}, invalid(attrReason(ds), "dataschema", "%q, want %q for %s", ds, s.SchemaURI, s.Type)
	}
	if err := checkExtensions(ext, a.Traceparent, a.Tracestate, a.Signature); err != nil {
		return url.URL{}, err
	}
	if len(data) == 0 {
		return url.URL{}, invalid(ReasonMissingAttribute, "data", "no data")
	}
	if n := len(data); n > MaxDataSize {
		return url.URL{}, invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", n, MaxDataSize)
	}
	return src, nil
}

// notNormal is the error of an attribute value that reads back as got
// from an event.
func notNormal(name, v, got string) error {
	return invalid(attrReason(got), name, "%q is not in normal form (it reads back as %q)", v, got)
}

// checkExtensions checks the extensions present (ext), by name.
func checkExtensions(ext uint, traceparent, tracestate, signature string) error {
	if ext&hasSignature != 0 {
		if err := validSignature(signature); err != nil {
			return &Error{Reason: ReasonInvalidAttribute, Field: ExtSignature, Err: err}
		}
	}
	if ext&hasTraceparent != 0 {
		if err := validTraceparent(traceparent); err != nil {
			return &Error{Reason: ReasonInvalidAttribute, Field: ExtTraceparent, Err: err}
		}
	}
	if ext&hasTracestate != 0 {
		if err := validTracestate(tracestate); err != nil {
			return &Error{Reason: ReasonInvalidAttribute, Field: ExtTracestate, Err: err}
		}
		if ext&hasTraceparent == 0 {
			return invalid(ReasonInvalidAttribute, ExtTracestate, "tracestate without traceparent")
		}
	}
	return nil
}

// checkEvent checks an event.Event as FromNATS checks what it returns:
// what Decode and ToNATS take.
func checkEvent(e event.Event) error {
	if e.Context == nil {
		return invalid(ReasonMissingAttribute, "specversion", "event has no context")
	}
	if sv := e.SpecVersion(); sv != SpecVersion {
		return invalid(ReasonSpecVersion, "specversion", "%q, want %q", sv, SpecVersion)
	}
	if names := sortedKeys(e.FieldErrors); len(names) > 0 {
		return &Error{Reason: ReasonInvalidAttribute, Field: strings.TrimPrefix(names[0], "extension:"), Err: e.FieldErrors[names[0]]}
	}
	if err := validID(e.ID()); err != nil {
		return &Error{Reason: attrReason(e.ID()), Field: "id", Err: err}
	}
	typ := e.Type()
	if typ == "" {
		return invalid(ReasonMissingAttribute, "type", "empty")
	}
	s, ok := byType[typ]
	if !ok {
		return invalid(ReasonUnknownType, "type", "%q is not in the catalog", typ)
	}
	source := e.Source()
	if err := checkText("source", source); err != nil {
		return err
	}
	if u := types.ParseURIRef(source); u == nil || u.String() != source {
		return invalid(ReasonInvalidAttribute, "source", "%q is not a URI reference in normal form", source)
	}
	if err := checkText("subject", e.Subject()); err != nil {
		return err
	}
	if e.Time().IsZero() {
		return invalid(ReasonMissingAttribute, "time", "empty")
	}
	if ct := e.DataContentType(); ct != ContentType {
		return invalid(attrReason(ct), "datacontenttype", "%q, want %q", ct, ContentType)
	}
	if ds := e.DataSchema(); ds != s.SchemaURI {
		return invalid(attrReason(ds), "dataschema", "%q, want %q for %s", ds, s.SchemaURI, typ)
	}
	exts := e.Extensions()
	var ext uint
	var values [3]string
	for _, name := range sortedKeys(exts) {
		v, ok := exts[name].(string)
		switch {
		case !knownExtension(name):
			return errUnknownExtension(name)
		case !ok:
			return invalid(ReasonInvalidAttribute, name, "a %T, want a string", exts[name])
		}
		switch name {
		case ExtTraceparent:
			ext, values[0] = ext|hasTraceparent, v
		case ExtTracestate:
			ext, values[1] = ext|hasTracestate, v
		case ExtSignature:
			ext, values[2] = ext|hasSignature, v
		}
	}
	if err := checkExtensions(ext, values[0], values[1], values[2]); err != nil {
		return err
	}
	if len(e.Data()) == 0 {
		return invalid(ReasonMissingAttribute, "data", "no data")
	}
	if n := len(e.Data()); n > MaxDataSize {
		return invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", n, MaxDataSize)
	}
	return nil
}

// knownExtension reports whether the codec carries the extension name.
func knownExtension(name string) bool {
	return name == ExtTraceparent || name == ExtTracestate || name == ExtSignature
}

// event builds the event of these attributes, as the sdk-go setters
// would build it (field by field), with src the parsed source. The
// context and the values it points to are one allocation.
func (a *Attributes) event(src url.URL, data []byte) event.Event {
	p := &eventParts{subject: a.Subject, contentType: a.DataContentType}
	p.time.Time = a.Time
	p.schema.URL = schemaURLs()[a.DataSchema]
	p.ec = event.EventContextV1{
		ID:              a.ID,
		Source:          types.URIRef{URL: src},
		Type:            a.Type,
		DataContentType: &p.contentType,
		Subject:         &p.subject,
		Time:            &p.time,
		DataSchema:      &p.schema,
	}
	if a.Traceparent != "" || a.Tracestate != "" || a.Signature != "" {
		p.ec.Extensions = make(map[string]any, 3)
		if a.Traceparent != "" {
			p.ec.Extensions[ExtTraceparent] = a.Traceparent
		}
		if a.Tracestate != "" {
			p.ec.Extensions[ExtTracestate] = a.Tracestate
		}
		if a.Signature != "" {
			p.ec.Extensions[ExtSignature] = a.Signature
		}
	}
	return event.Event{Context: &p.ec, DataEncoded: data}
}

// eventParts is an event context with the values its pointers point to.
type eventParts struct {
	ec                   event.EventContextV1
	subject, contentType string
	time                 types.Timestamp
	schema               types.URI
}

// maxSourceURLs bounds the cache of parsed sources: a deployment has a
// source per producer instance, a few per host.
const maxSourceURLs = 4096

var sourceURLCache = struct {
	sync.RWMutex
	m map[string]url.URL
}{m: map[string]url.URL{}}

// sourceURL parses a source as the sdk-go setter does, once per distinct
// source; false when it does not parse, is empty or does not read back as
// given (the codec refuses it).
func sourceURL(s string) (url.URL, bool) {
	sourceURLCache.RLock()
	u, ok := sourceURLCache.m[s]
	sourceURLCache.RUnlock()
	if ok {
		return u, true
	}
	p, err := url.Parse(s)
	if err != nil || s == "" || p.String() != s {
		return url.URL{}, false
	}
	sourceURLCache.Lock()
	if len(sourceURLCache.m) >= maxSourceURLs {
		clear(sourceURLCache.m)
	}
	sourceURLCache.m[s] = *p
	sourceURLCache.Unlock()
	return *p, true
}

// schemaURLs are the catalog's dataschema URIs parsed, those that read
// back as written (all of them; the tests check).
var schemaURLs = sync.OnceValue(func() map[string]url.URL {
	out := make(map[string]url.URL, len(byType))
	for _, s := range byType {
		if u, err := url.Parse(s.SchemaURI); err == nil && u.String() == s.SchemaURI {
			out[s.SchemaURI] = *u
		}
	}
	return out
})

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
