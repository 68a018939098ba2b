package link

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// Message is a JetStream message as the auditor records it.
type Message struct {
	// Stream and Seq are the stream and the message's stream sequence.
	Stream string
	Seq    uint64
	// Subject, Header and Data are the message.
	Subject string
	Header  nats.Header
	Data    []byte
	// Stored is when the stream stored the message.
	Stored time.Time
	// Deliveries counts the deliveries so far (1 for the first); 0 when
	// read from the stream directly.
	Deliveries uint64
	// Consumer is the consumer the message came through.
	Consumer string
}

// msg adapts a Message to events.Msg.
type msg struct{ m *Message }

func (v msg) Subject() string      { return v.m.Subject }
func (v msg) Headers() nats.Header { return v.m.Header }
func (v msg) Data() []byte         { return v.m.Data }

// ChainName is the chain a stream's message belongs to. Host-scoped
// streams (EVIDENCE, VERDICTS) have one chain per host, "<stream>/<host>",
// the host taken from the NATS subject (rt.evidence.<host>.…,
// rt.integrity.<host>, rt.collect.failed.<host>, rt.verdict.<host>.…), so
// even a malformed message lands in its host's chain; every other stream
// is one chain named after it.
func ChainName(stream, subject string) string {
	switch stream {
	case "EVIDENCE", "VERDICTS":
		return stream + "/" + HostOf(subject)
	}
	return stream
}

// HostOf returns the host a subject of a host-scoped stream names: the
// decoded token, or the token as it is when it does not decode to a
// printable name (a shortened or malformed token); "=" when there is none.
func HostOf(subject string) string {
	i := 2
	if token(subject, 1) == "collect" {
		i = 3
	}
	tok := token(subject, i)
	if tok == "" {
		return "="
	}
	if !strings.Contains(tok, "=") {
		return tok // as it is, whether it decodes (to itself) or not
	}
	host, err := events.ParseToken(tok)
	if err != nil || host == "" || strings.IndexFunc(host, unicode.IsControl) >= 0 {
		return tok
	}
	return host
}

// token returns the i-th (0-based) dot-separated token of subject; "" when
// there are fewer.
func token(subject string, i int) string {
	for ; i > 0; i-- {
		dot := strings.IndexByte(subject, '.')
		if dot < 0 {
			return ""
		}
		subject = subject[dot+1:]
	}
	if dot := strings.IndexByte(subject, '.'); dot >= 0 {
		return subject[:dot]
	}
	return subject
}

// Entry builds the event of m's link, checking the envelope: a message
// that is not a CloudEvent of the catalog (events.FromNATS: attributes,
// encoding, type, sizes) or whose data is not one well-formed JSON value
// without duplicate keys becomes an auditor-made event.rejected from
// source, with "rejected": true. The payload is recorded as it came; its
// schema is the consumers' to check (EntryStrict checks it too). Entry
// never fails.
func Entry(m *Message, source string) jsontree.Value {
	// ParseAttributes accepts and rejects as FromNATS does, without
	// building the event.
	a, err := events.ParseAttributes(m.Header, m.Data)
	if err != nil {
		return rejected(m, source, err)
	}
	data, err := jsontree.Parse(m.Data)
	if err != nil {
		return rejected(m, source, err)
	}
	return jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
		{Key: "attributes", Value: attributesOf(a)},
		{Key: "data", Value: data},
		{Key: "nats", Value: position(m)},
	}}
}

// EntryStrict is Entry with the payload checked as its consumers check it
// (events.ReadAny: JSON Schema, payload rules, NATS subject); about twenty
// times the cost.
func EntryStrict(m *Message, source string) jsontree.Value {
	e, _, err := events.ReadAny(msg{m})
	return entry(m, source, e, err)
}

func entry(m *Message, source string, e event.Event, err error) jsontree.Value {
	var data jsontree.Value
	if err == nil {
		data, err = jsontree.Parse(e.Data())
	}
	if err != nil {
		return rejected(m, source, err)
	}
	attrs, err := attributes(e)
	if err != nil {
		return rejected(m, source, err)
	}
	return jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
		{Key: "attributes", Value: attrs},
		{Key: "data", Value: data},
		{Key: "nats", Value: position(m)},
	}}
}

func position(m *Message) jsontree.Value {
	return jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
		{Key: "seq", Value: jsontree.Value{Kind: jsontree.Number, Text: strconv.FormatUint(m.Seq, 10)}},
		{Key: "stream", Value: str(m.Stream)},
		{Key: "subject", Value: str(m.Subject)},
		{Key: "time", Value: str(m.Stored.UTC().Format(time.RFC3339Nano))},
	}}
}

// attributesOf is attributes for the attributes of an event FromNATS
// accepts (its extensions are strings).
func attributesOf(a events.Attributes) jsontree.Value {
	members := make([]jsontree.Member, 0, 10)
	members = append(members,
		jsontree.Member{Key: "datacontenttype", Value: str(a.DataContentType)},
		jsontree.Member{Key: "dataschema", Value: str(a.DataSchema)},
		jsontree.Member{Key: "id", Value: str(a.ID)},
		jsontree.Member{Key: "source", Value: str(a.Source)},
		jsontree.Member{Key: "specversion", Value: str(events.SpecVersion)},
		jsontree.Member{Key: "subject", Value: str(a.Subject)},
		jsontree.Member{Key: "time", Value: str(a.Time.UTC().Format(time.RFC3339Nano))},
		jsontree.Member{Key: "type", Value: str(a.Type)},
	)
	if a.Traceparent != "" {
		members = append(members, jsontree.Member{Key: events.ExtTraceparent, Value: str(a.Traceparent)})
	}
	if a.Tracestate != "" {
		members = append(members, jsontree.Member{Key: events.ExtTracestate, Value: str(a.Tracestate)})
	}
	return jsontree.Value{Kind: jsontree.Object, Members: members}
}

func attributes(e event.Event) (jsontree.Value, error) {
	members := make([]jsontree.Member, 0, 10)
	members = append(members,
		jsontree.Member{Key: "datacontenttype", Value: str(e.DataContentType())},
		jsontree.Member{Key: "dataschema", Value: str(e.DataSchema())},
		jsontree.Member{Key: "id", Value: str(e.ID())},
		jsontree.Member{Key: "source", Value: str(e.Source())},
		jsontree.Member{Key: "specversion", Value: str(e.SpecVersion())},
		jsontree.Member{Key: "subject", Value: str(e.Subject())},
		jsontree.Member{Key: "time", Value: str(e.Time().UTC().Format(time.RFC3339Nano))},
		jsontree.Member{Key: "type", Value: str(e.Type())},
	)
	for name, v := range e.Extensions() {
		s, ok := v.(string)
		if !ok {
			return jsontree.Value{}, fmt.Errorf("extension %s is a %T", name, v)
		}
		members = append(members, jsontree.Member{Key: name, Value: str(s)})
	}
	return jsontree.Value{Kind: jsontree.Object, Members: members}, nil
}

// Reject is the event of a message the auditor cannot record as it is:
// an auditor-made event.rejected naming the cause.
func Reject(m *Message, source string, cause error) jsontree.Value { return rejected(m, source, cause) }

// rejected is the event of a message that is not a valid catalog event.
func rejected(m *Message, source string, cause error) jsontree.Value {
	deliveries := max(m.Deliveries, 1)
	consumer := m.Consumer
	if consumer == "" {
		consumer = "auditor"
	}
	rec := events.Rejected(m.Stream, consumer, m.Subject, m.Seq, deliveries, m.Header, m.Data, cause)
	if !errors.Is(cause, events.ErrInvalid) {
		rec.Reason = "unrecordable"
	}
	b, err := json.Marshal(rec)
	data := jsontree.Value{Kind: jsontree.Object}
	if err == nil {
		if v, perr := jsontree.Parse(b); perr == nil {
			data = v
		}
	}
	spec, _ := events.Lookup(events.TypeEventRejected)
	attrs := object(
		"datacontenttype", str(events.ContentType),
		"dataschema", str(spec.SchemaURI),
		"id", str(RejectionID(m.Stream, m.Seq)),
		"source", str(source),
		"specversion", str(events.SpecVersion),
		"subject", str(rec.Subject()),
		"time", str(m.Stored.UTC().Format(time.RFC3339Nano)),
		"type", str(events.TypeEventRejected),
	)
	return jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
		{Key: "attributes", Value: attrs},
		{Key: "data", Value: data},
		{Key: "nats", Value: position(m)},
		{Key: "rejected", Value: jsontree.Value{Kind: jsontree.Bool, Bool: true}},
	}}
}

// RejectionID is the id of the auditor's rejection record of a stream's
// message (as natsbus.DeadLetterID names the consumer "auditor").
func RejectionID(stream string, seq uint64) string {
	return natsbus.DeadLetterID(stream, "auditor", seq)
}

func str(s string) jsontree.Value { return jsontree.Value{Kind: jsontree.String, Text: s} }

// object builds an object from key, value pairs.
func object(kv ...any) jsontree.Value {
	v := jsontree.Value{Kind: jsontree.Object, Members: make([]jsontree.Member, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Members = append(v.Members, jsontree.Member{Key: kv[i].(string), Value: kv[i+1].(jsontree.Value)})
	}
	return v
}
