// Package link maps a JetStream message to its link of the audit chain as
// every sink stores it: a pkg/evidence/chain link whose event is the
// message in canonical form, sealed with the previous link's hash, plus
// the columns the sinks index (type, subject, host, target, ...).
//
// The event of a link is one JSON object:
//
//	{
//	  "attributes": {"id": …, "source": …, "type": …, "subject": …, "time": …,
//	                 "specversion": "1.0", "datacontenttype": …, "dataschema": …,
//	                 "traceparent": …},
//	  "data": { the CloudEvent's JSON data },
//	  "nats": {"stream": "EVIDENCE", "seq": 42, "subject": "rt.evidence.…",
//	           "time": "2026-…Z"}
//	}
//
// "nats" is the message's place in its stream: seq is the stream sequence
// and time the time the stream stored it, so a redelivered message yields
// the same event.
//
// A signed event (a collector's: pkg/events signature.go) keeps its
// signature: the attribute "rtsignature" holds the DSSE envelope as it
// came, and a member "data_sha256", between "data" and "nats", the hex
// SHA-256 of the data bytes as the auditor received them, which is what
// the signature's claim covers (payload_sha256). The link's "data" is
// those bytes re-encoded canonically, from which the bytes signed cannot
// be recovered: the payload digest is the auditor's record of them, bound
// by the chain hash, and `audit verify` checks the claim against it. An
// unsigned event's link has neither member, as before signatures existed,
// so its hash is unchanged. A message that is not a valid catalog event is recorded,
// not dropped: its event is an auditor-made event.rejected (attributes and
// data built by the auditor, the data naming the reason and the message's
// size and SHA-256), with "rejected": true.
//
// So is a signed event whose signature cannot be its own, as far as the
// message shows without a key or any state (events.CheckClaim): the
// envelope is not one (reason "bad_signature"), or its claim names
// another id, type, source, subject or time than the attributes, another
// payload digest than the SHA-256 of the data received (a real event's
// headers on other data), or, on EVIDENCE and VERDICTS, another host than
// the NATS subject's ("claim_mismatch"). Its record keeps the identifying
// headers (the event's id among them, each cut to 256 bytes), the data's
// size and SHA-256 and the subject (so its host and chain), never the
// data: about 1.3 KiB whatever the message's size. A signed event that
// passes is linked whole, its hash as before the check; whether its key is
// the host's is the verifier's to say, and `audit verify --registry`'s.
//
// The link, its hash and line, the verifier and checkpoints are
// pkg/evidence/chain's; this package only maps a message to the event of
// its link (Prepare, then Prepared.Seal with a chain.Hasher) and reads the
// columns sinks index back from a link (MetaOf, HeadOf).
package link

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/bufpool"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// ErrRecord is wrapped by errors about a record that cannot be built or
// read.
var ErrRecord = errors.New("audit record")

// Head is the last link of a chain in a sink.
type Head struct {
	// Seq and Hash are the link's sequence number and hash; Seq 0 means an
	// empty chain.
	Seq  uint64
	Hash string
	// Stream and StreamSeq locate the link's message.
	Stream    string
	StreamSeq uint64
}

// Meta holds what sinks index of a link's event.
type Meta struct {
	// Stream, StreamSeq, NATSSubject and Stored locate the message.
	Stream      string
	StreamSeq   uint64
	NATSSubject string
	Stored      time.Time
	// ID, Type, Source, Subject and Time are the CloudEvent attributes.
	ID      string
	Type    string
	Source  string
	Subject string
	Time    time.Time
	// Host, Target ("<kind>:<identifier>") and Status come from the data
	// when it has them.
	Host   string
	Target string
	Status string
	// Rejected marks an auditor-made rejection record; Reason is its
	// reason.
	Rejected bool
	Reason   string
}

// Record is one sealed link and what sinks index of its event.
type Record struct {
	chain.Link
	Meta Meta
}

// Head returns the chain head this record makes.
func (r Record) Head() Head {
	return Head{Seq: r.Seq, Hash: r.Hash, Stream: r.Meta.Stream, StreamSeq: r.Meta.StreamSeq}
}

// chainHead is the head of h in pkg/evidence/chain's terms.
func (h Head) chainHead() chain.Head { return chain.Head{Seq: h.Seq, Hash: h.Hash} }

// Prepared is an event ready to be sealed into its chain: the costly
// part of sealing (checking, canonical form), independent of the chain's
// head, so that events are prepared in parallel and sealed in order.
type Prepared struct {
	Chain string
	// Event is the event's tree where Prepare built one (strict, or a
	// rejection); empty when the canonical form was written from the
	// message directly.
	Event jsontree.Value
	// Bytes is the event's canonical JSON.
	Bytes []byte
	Meta  Meta
}

// Prepare checks m and builds its event (Entry, or EntryStrict when
// strict; a Notice's event when m is one) in canonical form, for m.Chain
// or else ChainName's chain. An event the canonical form cannot carry (a
// number out of RFC 8785's range) is recorded as a rejection.
func Prepare(m *Message, source string, strict bool) Prepared {
	chainName := chainOf(m)
	if m.Notice != nil {
		p, _ := prepare(chainName, notice(m, source))
		return p
	}
	var ev jsontree.Value
	if strict {
		ev = EntryStrict(m, source)
	} else {
		ev = Entry(m, source)
	}
	p, err := prepare(chainName, ev)
	if err != nil {
		p, _ = prepare(p.Chain, Reject(m, source, err))
	}
	return p
}

// PrepareOverAllowance is Prepare's for a message recorded by its digest
// and size only, its host being over its allowance (ReasonOverAllowance).
func PrepareOverAllowance(m *Message, source string) Prepared {
	p, _ := prepare(chainOf(m), overAllowance(m, source))
	return p
}

// chainOf is m's chain: m.Chain, else ChainName's.
func chainOf(m *Message) string {
	if m.Chain != "" {
		return m.Chain
	}
	return ChainName(m.Stream, m.Subject)
}

func prepare(chainName string, ev jsontree.Value) (Prepared, error) {
	p := Prepared{Chain: chainName, Event: ev}
	var err error
	if p.Bytes, err = canonical(ev); err != nil {
		return p, fmt.Errorf("%w: event: %w", ErrRecord, err)
	}
	p.Meta, err = MetaOf(ev)
	return p, err
}

// canonical is canonjson.Marshal writing into a pooled buffer, so that
// only the result, at its size, is allocated.
func canonical(ev jsontree.Value) ([]byte, error) {
	buf := bufpool.Get()
	defer bufpool.Put(buf)
	out, err := canonjson.Append((*buf)[:0], ev)
	if err != nil {
		return nil, err
	}
	*buf = out
	return bytes.Clone(out), nil
}

// Seal makes the link of p that follows head (the zero Head for a new
// chain).
func (p Prepared) Seal(h chain.Hasher, head Head) Record {
	return Record{Link: h.Seal(p.Chain, head.chainHead(), p.Bytes), Meta: p.Meta}
}

// Seal makes the link that follows head (the zero Head for a new chain)
// in chainName for the event ev.
func Seal(h chain.Hasher, chainName string, head Head, ev jsontree.Value) (Record, error) {
	if chainName == "" {
		return Record{}, fmt.Errorf("%w: empty chain name", ErrRecord)
	}
	p, err := prepare(chainName, ev)
	if err != nil {
		return Record{}, err
	}
	return p.Seal(h, head), nil
}

// Parse reads a link line (strictly, as chain.ParseLink) into a record; it
// does not check the hash.
func Parse(ln []byte) (Record, error) {
	l, err := chain.ParseLink(ln)
	if err != nil {
		return Record{}, err
	}
	ev, err := jsontree.Parse(l.Event)
	if err != nil {
		return Record{}, fmt.Errorf("%w: event: %w", ErrRecord, err)
	}
	meta, err := MetaOf(ev)
	return Record{Link: l, Meta: meta}, err
}

// FromRow rebuilds a record from stored columns (a database row).
func FromRow(chainName string, seq uint64, prev, hashValue string, event []byte) (Record, error) {
	ev, err := jsontree.Parse(event)
	if err != nil {
		return Record{}, fmt.Errorf("%w: chain %q seq %d: event: %w", ErrRecord, chainName, seq, err)
	}
	l, err := chain.NewLink(chainName, seq, prev, hashValue, ev)
	if err != nil {
		return Record{}, err
	}
	meta, err := MetaOf(ev)
	return Record{Link: l, Meta: meta}, err
}

// MetaOf extracts the indexed columns from a link's event.
func MetaOf(ev jsontree.Value) (Meta, error) {
	if ev.Kind != jsontree.Object {
		return Meta{}, fmt.Errorf("%w: event is not an object", ErrRecord)
	}
	var m Meta
	nats, _ := ev.Get("nats")
	m.Stream = text(nats, "stream")
	if v, ok := nats.Get("seq"); ok && v.IsInteger() {
		m.StreamSeq, _ = strconv.ParseUint(v.Text, 10, 64)
	}
	m.NATSSubject = text(nats, "subject")
	m.Stored = parseTime(text(nats, "time"))
	attrs, _ := ev.Get("attributes")
	m.ID = text(attrs, "id")
	m.Type = text(attrs, "type")
	m.Source = text(attrs, "source")
	m.Subject = text(attrs, "subject")
	m.Time = parseTime(text(attrs, "time"))
	if v, ok := ev.Get("rejected"); ok && v.Kind == jsontree.Bool && v.Bool {
		m.Rejected = true
	}
	data, _ := ev.Get("data")
	m.Host = text(data, "host")
	m.Status = text(data, "status")
	if t, ok := data.Get("target"); ok && t.Kind == jsontree.Object {
		m.Target = text(t, "kind") + ":" + text(t, "identifier")
	}
	if m.Rejected {
		m.Reason = text(data, "reason")
		if m.Host == "" {
			m.Host = HostOf(m.NATSSubject)
		}
	}
	return m, nil
}

func text(v jsontree.Value, key string) string {
	if v.Kind != jsontree.Object {
		return ""
	}
	s, ok := v.Get(key)
	if !ok || s.Kind != jsontree.String {
		return ""
	}
	return s.Text
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}

// HeadOf is the head a link of seq and hash makes, its message's stream
// and stream sequence read from the link's event (MetaOf).
func HeadOf(seq uint64, hash string, event []byte) (Head, error) {
	ev, err := jsontree.Parse(event)
	if err != nil {
		return Head{}, fmt.Errorf("%w: seq %d: event: %w", ErrRecord, seq, err)
	}
	m, err := MetaOf(ev)
	return Head{Seq: seq, Hash: hash, Stream: m.Stream, StreamSeq: m.StreamSeq}, err
}
