package chain

import (
	"bytes"
	"fmt"
	"hash"
	"hash/maphash"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// Reason says why a link breaks its chain.
type Reason string

// The ways a chain can break.
const (
	// Changed: the link's content no longer matches its hash, or its prev
	// does not match the link before it (that link or this one was edited).
	Changed Reason = "changed"
	// Missing: sequence numbers were skipped (links deleted).
	Missing Reason = "missing"
	// Reordered: a link appears after a later one.
	Reordered Reason = "reordered"
	// Duplicated: a link appears twice.
	Duplicated Reason = "duplicated"
	// Truncated: the chain ends before a checkpoint's sequence number.
	Truncated Reason = "truncated"
	// Rewritten: the link at a checkpoint's sequence number does not have
	// the checkpoint's hash (the chain was recomputed).
	Rewritten Reason = "rewritten"
	// Malformed: the line or row is not a valid link.
	Malformed Reason = "malformed"
	// KeyRequired is the reason of a break found where links carry an
	// HMAC but no key was given: the chain cannot be checked (an error,
	// not a verdict).
	KeyRequired Reason = "key required"
)

// recent is how many of a chain's last hashes are kept to tell a
// duplicated link from a reordered one.
const recent = 64

// Position says where a link was read: a file and line, or a row number.
type Position struct {
	File string
	Line int
	Row  int
}

// Break is the first broken link found.
type Break struct {
	Chain string
	// Seq is the sequence number found (or expected, for Truncated).
	Seq uint64
	// File names the file of a JSONL link and Line (1-based) its line; 0
	// for Truncated and Rewritten.
	File string
	Line int
	// Row is the 1-based row of a database link.
	Row    int
	Reason Reason
	Detail string
}

func newBreak(name string, seq uint64, pos Position, r Reason, detail string) *Break {
	return &Break{Chain: name, Seq: seq, File: pos.File, Line: pos.Line, Row: pos.Row, Reason: r, Detail: detail}
}

func (b *Break) Error() string {
	var where string
	switch {
	case b.File != "" && b.Line > 0:
		where = fmt.Sprintf("%s:%d: ", b.File, b.Line)
	case b.Line > 0:
		where = fmt.Sprintf("line %d: ", b.Line)
	case b.Row > 0:
		where = fmt.Sprintf("row %d: ", b.Row)
	case b.File != "":
		where = b.File + ": "
	}
	return fmt.Sprintf("%schain %q seq %d: %s: %s", where, b.Chain, b.Seq, b.Reason, b.Detail)
}

// Report is the outcome of a verification.
type Report struct {
	// Links counts the links checked.
	Links int
	// Chains holds each chain's last verified link.
	Chains map[string]Head
	// Broken is the first broken link; nil when every chain verifies.
	Broken *Break
	// Duplicate is the first link found carrying an event id an earlier
	// link of its chain carries (Options.EventIDs); Duplicates counts such
	// links. The chain itself may verify: a duplicate is a record made
	// twice, not a change.
	Duplicate  *DuplicateID
	Duplicates int
}

// DuplicateID is an event id linked twice in a chain: at seq First, and
// again at Seq (read at Pos).
type DuplicateID struct {
	Chain string
	ID    string
	First uint64
	Seq   uint64
	Pos   Position
}

func (d *DuplicateID) Error() string {
	return fmt.Sprintf("chain %q: event id %q linked twice, at seq %d and seq %d", d.Chain, d.ID, d.First, d.Seq)
}

// Candidate is one link to check: its stored parts and, once digested,
// the hash its bytes give.
type Candidate struct {
	Chain string
	Seq   uint64
	Prev  string
	Hash  string
	// Event is the event's JSON as stored.
	Event []byte
	// Line is the whole line (JSONL input), when there is one.
	Line []byte
	Pos  Position
	// Computed is the hash of the stored bytes (Digester); empty when the
	// line is not in canonical layout.
	Computed string
	// Err is a read or parse error of the line or row.
	Err error

	// idState says what idSum holds (Digester.ID): idUnknown, idMessage
	// (the hash of the chain and the id at idRaw), idNone (an auditor-made
	// record, or an event without a readable id).
	idState uint8
	idSum   uint64
	idRaw   []byte
	// finding is what Options.Inspector found of the link, beside the
	// hashing (the zero Finding: not inspected yet).
	finding Finding
}

const (
	idUnknown uint8 = iota
	idMessage
	idNone
)

// Digester computes Candidate.Computed; one per goroutine.
type Digester struct {
	h   Hasher
	m   hash.Hash
	buf []byte
	sum []byte
}

// NewDigester returns a digester for links hashed by h.
func NewDigester(h Hasher) *Digester { return &Digester{h: h, m: h.New()} }

// Row hashes a row's parts, taking the stored event bytes as canonical.
func (d *Digester) Row(c *Candidate) {
	d.buf = body(d.buf[:0], c.Chain, c.Seq, c.Prev, c.Event)
	d.m.Reset()
	d.m.Write(d.buf)
	d.sum = d.m.Sum(d.sum[:0])
	c.Computed = d.h.Format(d.sum)
}

// ID hashes c's chain and event id with seed (for Options.EventIDs),
// from the event bytes as stored.
func (d *Digester) ID(c *Candidate, seed maphash.Seed) {
	raw, message, ok := EventID(c.Event)
	if !ok || !message {
		c.idState = idNone
		return
	}
	// Two keyed hashes combined: of the chain (a string the next links
	// share) and of the id.
	sum := maphash.Bytes(seed, raw) ^ maphash.String(seed, c.Chain)*0x9e3779b97f4a7c15
	c.idState, c.idSum, c.idRaw = idMessage, sum, raw
}

// Line fills c from a JSONL line in the canonical layout
// {"chain":…,"event":…,"hash":"…","prev":"…","seq":N} and hashes the line
// without its hash member. A line in another layout is left for Check to
// parse (c.Line set, c.Computed empty).
func (d *Digester) Line(ln []byte, pos Position, c *Candidate) {
	*c = Candidate{Line: ln, Pos: pos}
	name, seq, prev, hashValue, eventStart, hashStart, prevStart, ok := layout(ln)
	if !ok {
		return
	}
	c.Chain, c.Seq, c.Prev, c.Hash = name, seq, prev, hashValue
	c.Event = ln[eventStart:hashStart]
	d.m.Reset()
	d.m.Write(ln[:hashStart])
	d.m.Write(ln[prevStart:])
	d.sum = d.m.Sum(d.sum[:0])
	c.Computed = d.h.Format(d.sum)
}

// Verifier checks links in the order they are stored; it keeps per-chain
// state. Use it from one goroutine.
type Verifier struct {
	h       Hasher
	d       *Digester
	chains  map[string]*state
	marks   map[string]map[uint64]string // checkpointed seqs per chain
	cps     []Checkpoint
	links   int
	pending *Break // a "missing" break that the next link may show to be a reordering
	pendAt  *state

	// ids maps the hash of a chain and event id to the seq that linked it
	// (EventIDs); nil when ids are not checked.
	ids        map[uint64]uint64
	seed       maphash.Seed
	dup        *DuplicateID
	duplicates int
}

// EventIDs makes the verifier report an event id linked twice in a chain
// (Report.Duplicate); candidates hashed with Digester.ID need v.Seed.
func (v *Verifier) EventIDs() {
	v.ids = map[uint64]uint64{}
	v.seed = maphash.MakeSeed()
}

// Seed is the seed of the id hashes (EventIDs).
func (v *Verifier) Seed() maphash.Seed { return v.seed }

// noteID remembers the event id of a link that verified, and reports a
// second one.
func (v *Verifier) noteID(c *Candidate) {
	if v.ids == nil {
		return
	}
	if c.idState == idUnknown {
		v.d.ID(c, v.seed)
	}
	if c.idState != idMessage {
		return
	}
	first, ok := v.ids[c.idSum]
	if !ok {
		v.ids[c.idSum] = c.Seq
		return
	}
	v.duplicates++
	if v.dup == nil {
		v.dup = &DuplicateID{Chain: c.Chain, ID: UnquoteID(c.idRaw), First: first, Seq: c.Seq, Pos: c.Pos}
	}
}

type state struct {
	head   Head
	last   [recent]Head      // ring by seq
	marked map[uint64]string // hashes at checkpointed seqs
}

// NewVerifier returns a verifier for links hashed by h, which will check
// the chains against checkpoints at Finish.
func NewVerifier(h Hasher, checkpoints []Checkpoint) *Verifier {
	v := &Verifier{h: h, d: NewDigester(h), chains: map[string]*state{}, marks: map[string]map[uint64]string{}, cps: checkpoints}
	for _, cp := range checkpoints {
		if v.marks[cp.Chain] == nil {
			v.marks[cp.Chain] = map[uint64]string{}
		}
		v.marks[cp.Chain][cp.Seq] = cp.Head
	}
	return v
}

// Check verifies the next stored link. It returns the first broken link
// (possibly an earlier one whose verdict waited for this link), or nil.
func (v *Verifier) Check(c *Candidate) *Break {
	if c.Err != nil {
		return v.flush(newBreak(c.Chain, c.Seq, c.Pos, Malformed, c.Err.Error()))
	}
	valid := c.Computed != "" && c.Computed == c.Hash
	if !valid {
		var b *Break
		if valid, b = v.slow(c); b != nil {
			return v.flush(b)
		}
	}
	v.links++
	st := v.chains[c.Chain]
	if st == nil {
		st = &state{head: Head{Hash: Genesis}}
		if m := v.marks[c.Chain]; m != nil {
			st.marked = map[uint64]string{}
		}
		v.chains[c.Chain] = st
	}
	brk := func(r Reason, format string, args ...any) *Break {
		return newBreak(c.Chain, c.Seq, c.Pos, r, fmt.Sprintf(format, args...))
	}
	if v.pending != nil {
		p := v.pending
		if v.pendAt != st {
			// Another chain: the pending link stays pending until its
			// chain shows more, unless this one breaks first.
			if b := v.step(st, c, valid, brk); b != nil {
				return v.flush(b)
			}
			v.noteID(c)
			return nil
		}
		v.pending, v.pendAt = nil, nil
		if valid && c.Seq == st.head.Seq+1 && c.Prev == st.head.Hash {
			p.Reason = Reordered
			p.Detail = fmt.Sprintf("seq %d appears before seq %d", p.Seq, c.Seq)
			return p
		}
		return p
	}
	if b := v.step(st, c, valid, brk); b != nil {
		return b
	}
	if v.pending == nil {
		v.noteID(c)
	}
	return nil
}

// step applies one valid-or-not link to its chain's state.
func (v *Verifier) step(st *state, c *Candidate, valid bool, brk func(Reason, string, ...any) *Break) *Break {
	if !valid && (strings.HasPrefix(c.Hash, "hmac-sha256:") != v.h.Keyed()) {
		if !v.h.Keyed() {
			return brk(KeyRequired, "the link carries an HMAC; give the chain's key")
		}
		return brk(Changed, "the link carries a plain hash where the chain is keyed (recomputed without the key)")
	}
	expected := st.head.Seq + 1
	switch {
	case c.Seq < expected:
		if !valid {
			return brk(Changed, "content does not match its hash")
		}
		if h := st.last[c.Seq%recent]; h.Seq == c.Seq && h.Hash == c.Hash {
			return brk(Duplicated, "seq %d already appeared", c.Seq)
		}
		if c.Seq == st.head.Seq {
			return brk(Changed, "a second, different link with seq %d (a link was inserted or replaced)", c.Seq)
		}
		return brk(Reordered, "seq %d after seq %d", c.Seq, st.head.Seq)
	case c.Seq > expected:
		b := brk(Missing, "links %d..%d are missing", expected, c.Seq-1)
		if c.Seq == expected+1 {
			b.Detail = fmt.Sprintf("link %d is missing", expected)
			if valid && c.Line != nil {
				// In a file, the missing link may come next (two links
				// swapped): decide on the chain's next link.
				v.pending, v.pendAt = b, st
				return nil
			}
		}
		return b
	case !valid:
		if s, ok := v.movedFrom(c); ok {
			return brk(Reordered, "the link of seq %d is stored at seq %d", s, c.Seq)
		}
		return brk(Changed, "content does not match its hash")
	case c.Prev != st.head.Hash:
		return brk(Changed, "prev %s does not match the hash of seq %d (%s)", c.Prev, st.head.Seq, st.head.Hash)
	}
	st.head = Head{Seq: c.Seq, Hash: c.Hash}
	st.last[c.Seq%recent] = st.head
	if st.marked != nil {
		if _, ok := v.marks[c.Chain][c.Seq]; ok {
			st.marked[c.Seq] = c.Hash
		}
	}
	return nil
}

// flush returns the pending break if there is one (it came first), else b.
func (v *Verifier) flush(b *Break) *Break {
	if p := v.pending; p != nil {
		v.pending, v.pendAt = nil, nil
		return p
	}
	return b
}

// slow parses a link whose stored bytes do not hash to its hash: a line
// in another layout, or a reformatted or changed event. It reports
// whether the canonical form matches the hash, or a malformed link.
func (v *Verifier) slow(c *Candidate) (bool, *Break) {
	if c.Line != nil && c.Computed == "" {
		l, err := ParseLink(c.Line)
		if err != nil {
			return false, newBreak("", 0, c.Pos, Malformed, err.Error())
		}
		c.Chain, c.Seq, c.Prev, c.Hash, c.Event = l.Chain, l.Seq, l.Prev, l.Hash, l.Event
		v.d.Row(c)
		return c.Computed == c.Hash, nil
	}
	ev, err := jsontree.Parse(c.Event)
	if err != nil || ev.Kind != jsontree.Object {
		detail := "event is not a JSON object"
		if err != nil {
			detail = "event: " + err.Error()
		}
		return false, newBreak(c.Chain, c.Seq, c.Pos, Malformed, detail)
	}
	canon, err := canonjson.Marshal(ev)
	if err != nil {
		return false, newBreak(c.Chain, c.Seq, c.Pos, Malformed, "event: "+err.Error())
	}
	if bytes.Equal(canon, c.Event) {
		return false, nil
	}
	cc := *c
	cc.Event = canon
	v.d.Row(&cc)
	return cc.Computed == c.Hash, nil
}

// movedFrom finds whether a link whose hash does not match its seq was
// sealed at a nearby seq (its seq was rewritten: rows reordered).
func (v *Verifier) movedFrom(c *Candidate) (uint64, bool) {
	for d := uint64(1); d <= 16; d++ {
		for _, s := range []uint64{c.Seq + d, c.Seq - d} {
			if s == 0 || s > c.Seq+d {
				continue
			}
			if v.h.Sum(c.Chain, s, c.Prev, c.Event) == c.Hash {
				return s, true
			}
		}
	}
	return 0, false
}

// Finish ends the verification: a link still pending is reported, then
// every checkpoint is checked (truncated: the chain ends before it;
// rewritten: the link at its seq has another hash).
func (v *Verifier) Finish() Report {
	r := Report{Links: v.links, Chains: make(map[string]Head, len(v.chains)), Duplicate: v.dup, Duplicates: v.duplicates}
	for name, st := range v.chains {
		r.Chains[name] = st.head
	}
	if v.pending != nil {
		r.Broken = v.pending
		v.pending = nil
		return r
	}
	for _, cp := range v.cps {
		st := v.chains[cp.Chain]
		if st == nil || st.head.Seq < cp.Seq {
			got := uint64(0)
			if st != nil {
				got = st.head.Seq
			}
			r.Broken = &Break{Chain: cp.Chain, Seq: cp.Seq, Reason: Truncated,
				Detail: fmt.Sprintf("chain ends at seq %d but a checkpoint records seq %d", got, cp.Seq)}
			return r
		}
		if h := st.marked[cp.Seq]; h != cp.Head {
			r.Broken = &Break{Chain: cp.Chain, Seq: cp.Seq, Reason: Rewritten,
				Detail: fmt.Sprintf("hash %s differs from the checkpoint's %s", h, cp.Head)}
			return r
		}
	}
	return r
}
