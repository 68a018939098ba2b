package link

import (
	"crypto/sha256"
	"encoding/hex"
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
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
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
	// Chain, when set, is the link's chain instead of ChainName's.
	Chain string
	// Notice, when set, makes the link an auditor-made record about the
	// stream itself rather than one of its messages (Gap, Reset).
	Notice *Notice
}

// Reasons of the auditor's notices about a stream (event.rejected
// records that stand for no message).
const (
	// ReasonGap: stream sequences missing from the stream (expired,
	// purged or deleted) before the auditor recorded them.
	ReasonGap events.Reason = "stream_gap"
	// ReasonReset: the stream's sequence went back (the stream was deleted
	// and re-created); the links that follow number the new stream.
	ReasonReset events.Reason = "stream_reset"
	// ReasonOverAllowance: the message's host is over its allowance of
	// audit bytes; the message is recorded by its digest and size, or
	// (a notice) the host's messages are not recorded from here on until
	// the allowance refills.
	ReasonOverAllowance events.Reason = "over_allowance"
	// ReasonUnrecorded: the notice of a run of a host's messages left out
	// over its allowance, naming their count, bytes and sequences.
	ReasonUnrecorded events.Reason = "unrecorded"
)

// Notice is what the auditor records about a stream itself, as an
// auditor-made event.rejected with "rejected": true: data.reason is
// Reason, data.error Detail and data.stream_sequence Seq; the subject
// (NATS and original) is ">", any of the stream's.
type Notice struct {
	Reason events.Reason
	// Seq is the data's stream_sequence: the first sequence missing (a
	// gap), the last one recorded of the old stream (a reset).
	Seq uint64
	// Subject is the event's subject attribute.
	Subject string
	Detail  string
}

// Gap is the notice that stream sequences first to last are missing from
// the stream (expired or purged) before they were recorded. Its position
// ("nats") is last, so that the chain's recorded position covers the gap.
func Gap(stream, consumer string, first, last uint64, at time.Time) *Message {
	return &Message{Stream: stream, Seq: last, Subject: ">", Stored: at, Consumer: consumer, Notice: &Notice{
		Reason: ReasonGap, Seq: first,
		Subject: fmt.Sprintf("%s:%d..%d", stream, first, last),
		Detail:  fmt.Sprintf("stream sequences %d..%d missing: expired or purged from the stream before they were recorded", first, last),
	}}
}

// Reset is the notice that the stream's sequence went back: the chain
// recorded it up to recorded, the stream now ends at now (it was deleted
// and re-created). Its position ("nats") is sequence 0 of the new stream,
// so that the links that follow record the new stream from its start.
func Reset(stream, consumer string, recorded, now uint64, at time.Time) *Message {
	return &Message{Stream: stream, Seq: 0, Subject: ">", Stored: at, Consumer: consumer, Notice: &Notice{
		Reason: ReasonReset, Seq: recorded,
		Subject: fmt.Sprintf("%s:reset@%d", stream, recorded),
		Detail:  fmt.Sprintf("stream reset: recorded up to %d, stream now at %d", recorded, now),
	}}
}

// msg adapts a Message to events.Msg.
type msg struct{ m *Message }

func (v msg) Subject() string      { return v.m.Subject }
func (v msg) Headers() nats.Header { return v.m.Header }
func (v msg) Data() []byte         { return v.m.Data }

// DeadLetterHost is the host token of a dead letter's subject
// (rt.dlq.<stream>.<host>, events.DeadLetterSubject); "" for another.
func DeadLetterHost(subject string) string { return token(subject, 3) }

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
	tok, _ := hostToken("EVIDENCE", subject)
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
// source, with "rejected": true, and so does a signed event whose
// signature cannot be its own (claimed: ReasonBadSignature,
// ReasonClaimMismatch), recorded without its data. The payload of any
// other is recorded as it came; its schema is the consumers' to check
// (EntryStrict checks it too). Entry never fails.
func Entry(m *Message, source string) jsontree.Value {
	e, err := binding.FromNATS(m.Header, m.Data)
	if err != nil {
		return rejected(m, source, err)
	}
	a := binding.AttributesOf(e)
	digest, err := claimed(m, e, a.Signature != "")
	if err != nil {
		return refused(m, source, err)
	}
	data, err := jsontree.Parse(m.Data)
	if err != nil {
		return rejected(m, source, err)
	}
	return eventOf(attributesOf(a), data, digest, m)
}

// Reasons of the auditor's refusals: a signed event whose signature
// cannot be its own (events.CheckClaim), recorded as an auditor-made
// event.rejected without its payload. They are the verifier's reason
// labels for the same faults.
const (
	// ReasonBadSignature: the signature envelope is not one (not DSSE
	// JSON, another payload type, not one signature of an Ed25519 size).
	ReasonBadSignature events.Reason = "bad_signature"
	// ReasonClaimMismatch: the signed claim names another id, type,
	// source, subject or time than the event's attributes, or another
	// payload digest than the data received's: a real event's headers on
	// other data, or its id changed.
	ReasonClaimMismatch events.Reason = "claim_mismatch"
)

// claimed checks a signed event's claim against its attributes and data
// (events.CheckClaim) and, on a host-scoped stream (EVIDENCE, VERDICTS),
// that it names the host of the NATS subject (its token, events.Token,
// as every subject of a host's events carries it: a real event published
// on another host's subject would otherwise be linked whole in that
// host's chain, past the chain's id check). It returns the data's hex
// SHA-256, the link's DataDigestMember; "" and nil for an unsigned event
// (signed false: no signature extension).
func claimed(m *Message, e event.Event, signed bool) (string, error) {
	if !signed {
		return "", nil
	}
	digest := dataDigest(m.Data)
	c, err := dsse.CheckClaim(e, digest)
	if err != nil {
		return digest, err
	}
	if tok, ok := hostToken(m.Stream, m.Subject); ok && tok != events.Token(c.Host) {
		return digest, fmt.Errorf("%w: host differs: the claim names %q, the NATS subject another host", dsse.ErrClaim,
			binding.Clip(c.Host, events.MaxTokenLength, "…"))
	}
	return digest, nil
}

// hostToken is the host token of a subject of a host-scoped stream
// (ChainName's), as it is; false for other streams.
func hostToken(stream, subject string) (string, bool) {
	switch stream {
	case "EVIDENCE", "VERDICTS":
	default:
		return "", false
	}
	i := 2
	if token(subject, 1) == "collect" {
		i = 3
	}
	return token(subject, i), true
}

// DataDigestMember is the member of a signed event's link holding the
// hex SHA-256 of the data bytes as the auditor received them: the digest
// the signature's claim covers (payload_sha256). The link's "data" is
// their canonical form, from which the bytes signed cannot be recovered;
// the digest is the auditor's record of them, bound by the chain hash.
const DataDigestMember = "data_sha256"

// eventOf is the event of a link: attributes, data, the data's digest
// (hex, "" when unsigned), and the message's position.
func eventOf(attrs, data jsontree.Value, digest string, m *Message) jsontree.Value {
	members := make([]jsontree.Member, 0, 4)
	members = append(members, jsontree.Member{Key: "attributes", Value: attrs}, jsontree.Member{Key: "data", Value: data})
	if digest != "" {
		members = append(members, jsontree.Member{Key: DataDigestMember, Value: str(digest)})
	}
	return jsontree.Value{Kind: jsontree.Object, Members: append(members, jsontree.Member{Key: "nats", Value: position(m)})}
}

// dataDigest is the hex SHA-256 of data.
func dataDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// EntryStrict is Entry with the payload checked as its consumers check it
// (events.Read[events.Payload]: JSON Schema, payload rules, NATS subject); about twenty
// times the cost.
func EntryStrict(m *Message, source string) jsontree.Value {
	e, _, err := binding.Read[events.Payload](msg{m})
	return entry(m, source, e, err)
}

func entry(m *Message, source string, e event.Event, err error) jsontree.Value {
	if err != nil {
		return rejected(m, source, err)
	}
	digest := ""
	if digest, err = claimed(m, e, binding.AttributesOf(e).Signature != ""); err != nil {
		return refused(m, source, err)
	}
	data, err := jsontree.Parse(e.Data())
	if err != nil {
		return rejected(m, source, err)
	}
	attrs, err := attributes(e)
	if err != nil {
		return rejected(m, source, err)
	}
	return eventOf(attrs, data, digest, m)
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
func attributesOf(a binding.Attributes) jsontree.Value {
	members := make([]jsontree.Member, 0, 11)
	members = append(members,
		jsontree.Member{Key: "datacontenttype", Value: str(a.DataContentType)},
		jsontree.Member{Key: "dataschema", Value: str(a.DataSchema)},
		jsontree.Member{Key: "id", Value: str(a.ID)})
	if a.Signature != "" {
		members = append(members, jsontree.Member{Key: dsse.ExtSignature, Value: str(a.Signature)})
	}
	members = append(members,
		jsontree.Member{Key: "source", Value: str(a.Source)},
		jsontree.Member{Key: "specversion", Value: str(binding.SpecVersion)},
		jsontree.Member{Key: "subject", Value: str(a.Subject)},
		jsontree.Member{Key: "time", Value: str(a.Time.UTC().Format(time.RFC3339Nano))},
		jsontree.Member{Key: "type", Value: str(a.Type)},
	)
	if a.Traceparent != "" {
		members = append(members, jsontree.Member{Key: binding.ExtTraceparent, Value: str(a.Traceparent)})
	}
	if a.Tracestate != "" {
		members = append(members, jsontree.Member{Key: binding.ExtTracestate, Value: str(a.Tracestate)})
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
	rec := rejection(m, m.Header, cause)
	if !errors.Is(cause, events.ErrInvalid) {
		rec.Reason = "unrecordable"
	}
	return rejectedEvent(m, source, rec, RejectionID(m.Stream, m.Seq), rec.Subject())
}

// refused is the event of a signed message whose signature cannot be its
// own (claimed's error): an event.rejected like rejected's, naming
// ReasonClaimMismatch or ReasonBadSignature. Like every rejection record
// it keeps the message's identifying headers (each cut to 256 bytes), the
// data's size and SHA-256, and the subject (so its host), never the
// data: what such a message adds to the audit sinks is this record,
// whatever its size.
func refused(m *Message, source string, cause error) jsontree.Value {
	rec := rejection(m, m.Header, fmt.Errorf("the signature cannot be this event's: %w", cause))
	rec.Reason = ReasonBadSignature
	if errors.Is(cause, dsse.ErrClaim) {
		rec.Reason = ReasonClaimMismatch
	}
	return rejectedEvent(m, source, rec, RejectionID(m.Stream, m.Seq), rec.Subject())
}

// overAllowance is the event of a message recorded by its digest and
// size only, its host being over its allowance: an event.rejected like
// refused's, keeping only the message's id header (cut to 256 bytes).
func overAllowance(m *Message, source string) jsontree.Value {
	id := nats.Header{}
	for k, vs := range m.Header {
		if strings.EqualFold(k, binding.HeaderPrefix+"id") {
			id[k] = vs
		}
	}
	rec := rejection(m, id, errors.New("recorded by digest and size: the host is over its allowance of audit bytes"))
	rec.Reason = ReasonOverAllowance
	return rejectedEvent(m, source, rec, RejectionID(m.Stream, m.Seq), rec.Subject())
}

// rejection is the event.rejected record of m, keeping the headers of h
// that identify it (events.Rejected), as the auditor rejects it.
func rejection(m *Message, h nats.Header, cause error) events.EventRejected {
	return binding.Rejected(m.Stream, consumerOf(m), m.Subject, m.Seq, max(m.Deliveries, 1), h, m.Data, cause)
}

// consumerOf is the consumer m came through; "auditor" for a message read
// from its stream directly.
func consumerOf(m *Message) string {
	if m.Consumer == "" {
		return "auditor"
	}
	return m.Consumer
}

// notice is the event of a Notice.
func notice(m *Message, source string) jsontree.Value {
	n := m.Notice
	consumer := consumerOf(m)
	empty := sha256.Sum256(nil)
	rec := events.EventRejected{
		Stream: m.Stream, Consumer: consumer, OriginalSubject: m.Subject, StreamSequence: n.Seq, Deliveries: 1,
		Reason: n.Reason, Error: n.Detail, DataDigest: "sha256:" + hex.EncodeToString(empty[:]),
	}
	id := natsbus.DeadLetterID(m.Stream, "auditor/"+string(n.Reason), n.Seq)
	return rejectedEvent(m, source, rec, id, n.Subject)
}

// rejectedEvent is the event of an auditor-made event.rejected record.
func rejectedEvent(m *Message, source string, rec events.EventRejected, id, subject string) jsontree.Value {
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
		"id", str(id),
		"source", str(source),
		"specversion", str(binding.SpecVersion),
		"subject", str(subject),
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
