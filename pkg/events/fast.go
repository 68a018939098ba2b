package events

import (
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/nats-io/nats.go"
)

// The direct paths of the codec. FromNATS, ParseAttributes and NewMsg read
// and write the headers of a well-formed event directly, without the
// sdk-go setters (URI parsing, trimming, maps) and without checking the
// same attribute twice; anything they do not accept on the spot goes
// through the general code, which gives the error. The tests hold both to
// the same results.

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

// ParseAttributes checks a message as FromNATS does and returns the
// attributes of the event FromNATS would return: it accepts exactly what
// FromNATS accepts, with the same error otherwise. The data is checked
// for presence and size only, as FromNATS does.
func ParseAttributes(h nats.Header, data []byte) (Attributes, error) {
	if a, _, ok := parseFast(h, data); ok {
		return a, nil
	}
	e, err := fromNATS(h, data)
	if err != nil {
		return Attributes{}, err
	}
	return attributesOf(e), nil
}

// attributesOf returns the attributes of an event fromNATS accepted.
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

// The attribute headers parseFast reads, as bits of a set.
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

	hasRequired = hasSpecVersion | hasID | hasSource | hasType | hasSubject | hasTime | hasContentType | hasSchema
)

// parseFast reads the headers of a well-formed event: each attribute once,
// no other ce- header, no Content-Type header, every check fromNATS makes.
// It returns the attributes and the parsed source, or false for anything
// else (fromNATS then decides, and gives the error if there is one).
func parseFast(h nats.Header, data []byte) (a Attributes, src url.URL, ok bool) {
	if len(data) == 0 || len(data) > MaxDataSize {
		return a, src, false
	}
	var seen uint
	var specVersion, timeText, msgID string
	hasMsgID := false
	size := len("NATS/1.0\r\n") + 2 // headerSize(h), summed on the way
	for k, vs := range h {
		for _, v := range vs {
			size += len(k) + 2 + len(v) + 2
		}
		lk := "nats-msg-id"
		if k != HeaderMsgID {
			lk = strings.ToLower(k) // no copy when already lower case
		}
		switch {
		case lk == headerContentType:
			return a, src, false
		case lk == "nats-msg-id":
			if hasMsgID || len(vs) != 1 {
				return a, src, false
			}
			hasMsgID, msgID = true, vs[0]
			continue
		case !strings.HasPrefix(lk, HeaderPrefix):
			continue
		}
		if len(vs) != 1 {
			return a, src, false
		}
		var bit uint
		var dst *string
		switch lk[len(HeaderPrefix):] {
		case "specversion":
			bit, dst = hasSpecVersion, &specVersion
		case "id":
			bit, dst = hasID, &a.ID
		case "source":
			bit, dst = hasSource, &a.Source
		case "type":
			bit, dst = hasType, &a.Type
		case "subject":
			bit, dst = hasSubject, &a.Subject
		case "time":
			bit, dst = hasTime, &timeText
		case "datacontenttype":
			bit, dst = hasContentType, &a.DataContentType
		case "dataschema":
			bit, dst = hasSchema, &a.DataSchema
		case ExtTraceparent:
			bit, dst = hasTraceparent, &a.Traceparent
		case ExtTracestate:
			bit, dst = hasTracestate, &a.Tracestate
		case ExtSignature:
			bit, dst = hasSignature, &a.Signature
		default:
			return a, src, false
		}
		if seen&bit != 0 {
			return a, src, false
		}
		seen |= bit
		v, err := decodeValue(vs[0])
		if err != nil {
			return a, src, false
		}
		*dst = v
	}
	if size > MaxHeaderSize || seen&hasRequired != hasRequired || specVersion != SpecVersion {
		return a, src, false
	}
	s, known := byType[a.Type]
	if !known || a.DataContentType != ContentType || a.DataSchema != s.SchemaURI {
		return a, src, false
	}
	t, err := time.Parse(time.RFC3339Nano, timeText) // as types.ParseTime
	if err != nil || t.IsZero() {
		return a, src, false
	}
	a.Time = t
	if hasMsgID && msgID != a.ID {
		return a, src, false
	}
	if seen&hasTraceparent != 0 && !traceparentOK(a.Traceparent) {
		return a, src, false
	}
	if seen&hasTracestate != 0 && (seen&hasTraceparent == 0 || validTracestate(a.Tracestate) != nil) {
		return a, src, false
	}
	if seen&hasSignature != 0 && validSignature(a.Signature) != nil {
		return a, src, false
	}
	if src, ok = sourceURL(a.Source); !ok || !plainAttributes(a.ID, a.Source, a.Subject) {
		return a, src, false
	}
	if _, ok := schemaURLs()[a.DataSchema]; !ok {
		return a, src, false
	}
	return a, src, true
}

// plainAttributes reports whether id, source and subject pass the checks
// of attributes and read back as given from an event (sameAttributes); a
// source must also be one sourceURL accepts.
func plainAttributes(id, source, subject string) bool {
	return validID(id) == nil &&
		strings.TrimSpace(source) != "" && controlIndex(source) < 0 &&
		subject != "" && strings.TrimSpace(subject) == subject && controlIndex(subject) < 0
}

// event builds the event fromNATS builds for these attributes (the
// sdk-go setters' results, field by field), with src the parsed source.
// The context and the values it points to are one allocation.
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

// header builds the headers ToNATS writes for these attributes.
func (a *Attributes) header() nats.Header {
	n := 9
	if a.Traceparent != "" {
		n++
	}
	if a.Tracestate != "" {
		n++
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
	if a.Traceparent != "" {
		put(HeaderPrefix+ExtTraceparent, encodeValue(a.Traceparent))
	}
	if a.Tracestate != "" {
		put(HeaderPrefix+ExtTracestate, encodeValue(a.Tracestate))
	}
	put(HeaderMsgID, a.ID)
	return h
}

// fastMsg builds the message and event that New and ToNATS build from
// prepareEvent's results, when every check of theirs passes on the spot;
// false otherwise (they then run, and give the error if there is one).
func fastMsg(natsSubject, source, subject string, s *Spec, o options, data []byte) (*nats.Msg, event.Event, bool) {
	if !ValidSubject(natsSubject) || len(data) == 0 || len(data) > MaxDataSize || !plainAttributes(o.id, source, subject) {
		return nil, event.Event{}, false
	}
	src, ok := sourceURL(source)
	if !ok {
		return nil, event.Event{}, false
	}
	if _, ok := schemaURLs()[s.SchemaURI]; !ok {
		return nil, event.Event{}, false
	}
	if o.traceparent != "" && !traceparentOK(o.traceparent) ||
		o.tracestate != "" && (o.traceparent == "" || validTracestate(o.tracestate) != nil) {
		return nil, event.Event{}, false
	}
	a := Attributes{
		ID: o.id, Source: source, Type: s.Type, Subject: subject, Time: o.time.UTC(),
		DataContentType: ContentType, DataSchema: s.SchemaURI, Traceparent: o.traceparent, Tracestate: o.tracestate,
	}
	if a.Time.IsZero() {
		return nil, event.Event{}, false
	}
	h := a.header()
	if headerSize(h) > MaxHeaderSize {
		return nil, event.Event{}, false
	}
	return &nats.Msg{Subject: natsSubject, Header: h, Data: data}, a.event(src, data), true
}

// traceparentOK is validTraceparent without the regular expression:
// "00-", 32 lower-case hex digits not all zero, "-", 16 not all zero,
// "-", 2.
func traceparentOK(v string) bool {
	if len(v) != 55 || v[0] != '0' || v[1] != '0' || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	hexRun := func(from, to int) (ok, zero bool) {
		zero = true
		for i := from; i < to; i++ {
			c := v[i]
			if !isLowerHexByte(c) {
				return false, false
			}
			zero = zero && c == '0'
		}
		return true, zero
	}
	okT, zeroT := hexRun(3, 35)
	okP, zeroP := hexRun(36, 52)
	okF, _ := hexRun(53, 55)
	return okT && okP && okF && !zeroT && !zeroP
}

// maxSourceURLs bounds the cache of parsed sources: a deployment has a
// source per producer instance, a few per host.
const maxSourceURLs = 4096

var sourceURLCache = struct {
	sync.RWMutex
	m map[string]url.URL
}{m: map[string]url.URL{}}

// sourceURL parses a source as the sdk-go setter does, once per distinct
// source; false when it does not parse or does not read back as given
// (the codec rejects it).
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
