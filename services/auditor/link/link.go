// Package link is one link of the audit chain as every sink stores it: a
// pkg/evidence/chain link whose event is a JetStream message in canonical
// form, sealed with the previous link's hash, plus the columns the sinks
// index (type, subject, host, target, ...).
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
// The hash is the chain package's: over the RFC 8785 form of
// {"chain","event","prev","seq"}, plain SHA-256 or, with a key, HMAC-SHA-256.
// Hasher computes it from the canonical bytes directly, without a second
// canonicalization; tests hold it equal to chain.Hasher.
package link

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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

// Record is one sealed link. Its Link.Event (the parsed tree) may be
// empty: sinks use the canonical bytes (Line, Event), Prepare builds no
// tree for an event it writes directly, and the auditor's writer drops
// the tree once sealed.
type Record struct {
	chain.Link
	// Line is the link as one canonical JSON line, without the newline.
	Line []byte
	// Event is the canonical JSON of the event (a slice of Line).
	Event []byte
	Meta  Meta
}

// Head returns the chain head this record makes.
func (r Record) Head() Head {
	return Head{Seq: r.Seq, Hash: r.Hash, Stream: r.Meta.Stream, StreamSeq: r.Meta.StreamSeq}
}

// Hasher seals and checks links, plain or keyed; it is chain.Hasher
// computed over the canonical bytes directly.
type Hasher struct {
	key   []byte
	chain chain.Hasher
	// macs holds *mac states from New for reuse by Sum (nil in a zero
	// Hasher, which makes a new one every time): a keyed state costs
	// allocations to set up.
	macs *sync.Pool
}

// mac is a hash from New and room for its sum.
type mac struct {
	hash.Hash
	sum [sha256.Size]byte
}

// NewHasher returns a hasher; a non-empty key makes links HMAC-SHA-256.
func NewHasher(key []byte) Hasher {
	k := append([]byte(nil), key...)
	h := Hasher{key: k, chain: chain.NewHasher(k)}
	h.macs = &sync.Pool{New: func() any { return &mac{Hash: h.New()} }}
	return h
}

// Keyed reports whether links carry an HMAC.
func (h Hasher) Keyed() bool { return len(h.key) > 0 }

// Chain returns the equivalent chain.Hasher.
func (h Hasher) Chain() chain.Hasher { return h.chain }

// Prefix is the hash prefix of the links h makes: "sha256:" or
// "hmac-sha256:".
func (h Hasher) Prefix() string {
	if h.Keyed() {
		return "hmac-sha256:"
	}
	return "sha256:"
}

// New returns a hash.Hash computing link hashes (HMAC-SHA-256 with the key,
// else SHA-256); Format turns its sum into a link hash.
func (h Hasher) New() hash.Hash {
	if h.Keyed() {
		return hmac.New(sha256.New, h.key)
	}
	return sha256.New()
}

// Format renders a sum of a hash from New as a link hash.
func (h Hasher) Format(sum []byte) string {
	var buf [96]byte
	return string(hex.AppendEncode(append(buf[:0], h.Prefix()...), sum))
}

// Body appends the canonical bytes the hash covers,
// {"chain":…,"event":…,"prev":…,"seq":…}, to dst; event must be
// canonical JSON.
func Body(dst []byte, chainName string, seq uint64, prev string, event []byte) []byte {
	dst = append(dst, `{"chain":`...)
	dst = canonjson.AppendString(dst, chainName)
	dst = append(dst, `,"event":`...)
	dst = append(dst, event...)
	dst = append(dst, `,"prev":`...)
	dst = canonjson.AppendString(dst, prev)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	return append(dst, '}')
}

// line appends the link line: Body with the hash member between event and
// prev (the keys sorted), and returns it with the offsets of the event.
func line(dst []byte, chainName string, seq uint64, prev, hashValue string, event []byte) ([]byte, int, int) {
	dst = lineHead(dst, chainName)
	start := len(dst)
	dst = append(dst, event...)
	end := len(dst)
	return lineTail(dst, seq, prev, hashValue), start, end
}

// lineHead appends what precedes the event in a link line.
func lineHead(dst []byte, chainName string) []byte {
	dst = append(dst, `{"chain":`...)
	dst = canonjson.AppendString(dst, chainName)
	return append(dst, `,"event":`...)
}

// lineTail appends what follows the event in a link line.
func lineTail(dst []byte, seq uint64, prev, hashValue string) []byte {
	dst = append(dst, `,"hash":`...)
	dst = canonjson.AppendString(dst, hashValue)
	dst = append(dst, `,"prev":`...)
	dst = canonjson.AppendString(dst, prev)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	return append(dst, '}')
}

// lineRoom is the room a link line needs besides its event and chain name
// (the prefixes of hash and prev and a sequence number, with some to
// spare); a longer one is grown as needed.
const lineRoom = 260

// Sum returns the hash of a link from its parts; event must be canonical
// JSON.
func (h Hasher) Sum(chainName string, seq uint64, prev string, event []byte) string {
	var m *mac
	if h.macs != nil {
		m = h.macs.Get().(*mac)
		defer h.macs.Put(m)
		m.Reset()
	} else {
		m = &mac{Hash: h.New()}
	}
	buf := getBuffer()
	*buf = Body((*buf)[:0], chainName, seq, prev, event)
	m.Write(*buf)
	putBuffer(buf)
	return h.Format(m.Sum(m.sum[:0]))
}

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
	// line, when set, is the start of the link line, ending with Bytes,
	// with room for the rest: the first SealPrepared of p (the one that
	// sets claimed) completes it in place rather than copying the event.
	line    []byte
	claimed *atomic.Bool
}

// Prepare checks m and builds its event (Entry, or EntryStrict when
// strict; a Notice's event when m is one) in canonical form, for m.Chain
// or else ChainName's chain. An event the canonical form cannot carry (a
// number out of RFC 8785's range) is recorded as a rejection. The event
// of a message Entry accepts is written from the message's bytes, without
// its tree; the bytes and meta are those of the tree's path.
func Prepare(m *Message, source string, strict bool) Prepared {
	chainName := m.Chain
	if chainName == "" {
		chainName = ChainName(m.Stream, m.Subject)
	}
	if m.Notice != nil {
		p, _ := prepare(chainName, notice(m, source))
		return p
	}
	if !strict {
		if p, ok := prepareDirect(chainName, m); ok {
			return p
		}
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

func prepare(chainName string, ev jsontree.Value) (Prepared, error) {
	p := Prepared{Chain: chainName, Event: ev}
	var err error
	if p.Bytes, err = canonical(ev); err != nil {
		return p, fmt.Errorf("%w: event: %w", ErrRecord, err)
	}
	p.Meta, err = MetaOf(ev)
	return p, err
}

// maxPooled bounds the buffers kept for reuse: the events of most messages
// (a few KiB) fit; the buffer of a large one (up to 1 MiB and what the
// auditor adds to it) is left to the garbage collector rather than kept,
// one per core, after a burst of large events.
const maxPooled = 64 << 10

// buffers holds scratch buffers for canonical forms and hash bodies.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

func putBuffer(b *[]byte) {
	if cap(*b) <= maxPooled {
		*b = (*b)[:0]
		buffers.Put(b)
	}
}

// canonical is canonjson.Marshal writing into a pooled buffer, so that
// only the result, at its size, is allocated.
func canonical(ev jsontree.Value) ([]byte, error) {
	buf := getBuffer()
	defer putBuffer(buf)
	out, err := canonjson.Append((*buf)[:0], ev)
	if err != nil {
		return nil, err
	}
	*buf = out
	return bytes.Clone(out), nil
}

// SealPrepared makes the link of p that follows head (the zero Head for a
// new chain).
func (h Hasher) SealPrepared(p Prepared, head Head) Record {
	seq, prev := head.Seq+1, head.Hash
	if head.Seq == 0 {
		prev = chain.Genesis
	}
	sum := h.Sum(p.Chain, seq, prev, p.Bytes)
	var ln []byte
	var start, end int
	if p.line != nil && p.claimed.CompareAndSwap(false, true) {
		end = len(p.line)
		start = end - len(p.Bytes)
		ln = lineTail(p.line, seq, prev, sum)
	} else {
		ln, start, end = line(make([]byte, 0, len(p.Bytes)+len(p.Chain)+lineRoom), p.Chain, seq, prev, sum, p.Bytes)
	}
	return Record{
		Link:  chain.Link{Chain: p.Chain, Seq: seq, Prev: prev, Hash: sum, Event: p.Event},
		Line:  ln,
		Event: ln[start:end:end],
		Meta:  p.Meta,
	}
}

// Seal makes the link that follows head (the zero Head for a new chain)
// in chainName for the event ev.
func (h Hasher) Seal(chainName string, head Head, ev jsontree.Value) (Record, error) {
	if chainName == "" {
		return Record{}, fmt.Errorf("%w: empty chain name", ErrRecord)
	}
	p, err := prepare(chainName, ev)
	if err != nil {
		return Record{}, err
	}
	return h.SealPrepared(p, head), nil
}

// Parse reads a link line (strictly, as chain.ParseLink) into a record; it
// does not check the hash.
func Parse(ln []byte) (Record, error) {
	l, err := chain.ParseLink(ln)
	if err != nil {
		return Record{}, err
	}
	return FromLink(l)
}

// FromLink completes a parsed link into a record: canonical bytes and meta.
func FromLink(l chain.Link) (Record, error) {
	event, err := canonjson.Marshal(l.Event)
	if err != nil {
		return Record{}, fmt.Errorf("%w: event: %w", ErrRecord, err)
	}
	meta, err := MetaOf(l.Event)
	if err != nil {
		return Record{}, err
	}
	ln, start, end := line(make([]byte, 0, len(event)+len(l.Chain)+lineRoom), l.Chain, l.Seq, l.Prev, l.Hash, event)
	return Record{Link: l, Line: ln, Event: ln[start:end:end], Meta: meta}, nil
}

// FromRow rebuilds a record from stored columns (a database row).
func FromRow(chainName string, seq uint64, prev, hashValue string, event []byte) (Record, error) {
	ev, err := jsontree.Parse(event)
	if err != nil {
		return Record{}, fmt.Errorf("%w: chain %q seq %d: event: %w", ErrRecord, chainName, seq, err)
	}
	return FromLink(chain.Link{Chain: chainName, Seq: seq, Prev: prev, Hash: hashValue, Event: ev})
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

// Position reads the stream and stream sequence from a link's canonical
// event bytes without parsing it: the top-level "nats" member is the
// event's last object member ("rejected", after it, holds a boolean).
func Position(event []byte) (stream string, seq uint64, ok bool) {
	const key = `"nats":{"seq":`
	i := lastIndex(event, key)
	if i < 0 {
		return "", 0, false
	}
	j := i + len(key)
	k := j
	for k < len(event) && event[k] >= '0' && event[k] <= '9' {
		k++
	}
	n, err := strconv.ParseUint(string(event[j:k]), 10, 64)
	const sk = `,"stream":"`
	if err != nil || len(event) < k+len(sk) || string(event[k:k+len(sk)]) != sk {
		return "", 0, false
	}
	k += len(sk)
	e := k
	for e < len(event) && event[e] != '"' && event[e] != '\\' {
		e++
	}
	if e == len(event) || event[e] != '"' {
		return "", 0, false
	}
	return string(event[k:e]), n, true
}

func lastIndex(b []byte, s string) int {
	for i := len(b) - len(s); i >= 0; i-- {
		if b[i] == s[0] && string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}
