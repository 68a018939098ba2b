package chain

import (
	"bufio"
	"fmt"
	"io"
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
	// Malformed: the line is not a valid link.
	Malformed Reason = "malformed"
)

// Break is the first broken link found.
type Break struct {
	Chain  string
	Seq    uint64 // the sequence number found (or expected, for Truncated)
	Line   int    // 1-based line of the file (0 for Truncated)
	Reason Reason
	Detail string
}

func (b *Break) Error() string {
	where := fmt.Sprintf("chain %q seq %d", b.Chain, b.Seq)
	if b.Line > 0 {
		where = fmt.Sprintf("line %d: %s", b.Line, where)
	}
	return fmt.Sprintf("%s: %s: %s", where, b.Reason, b.Detail)
}

// Checkpoint is an externally kept assertion that a chain's link seq had
// hash Head.
type Checkpoint struct {
	Chain string
	Seq   uint64
	Head  string
}

// Head is the state of one chain after verification.
type Head struct {
	Seq  uint64
	Hash string
}

// Report is the outcome of Verify.
type Report struct {
	Links  int
	Chains map[string]Head
	// Broken is the first broken link, nil when every chain verifies.
	Broken *Break
}

// Verifier checks links one at a time; it keeps per-chain state.
type Verifier struct {
	h      Hasher
	chains map[string]*state
	links  int
}

type state struct {
	head   Head
	hashes map[uint64]string // every hash seen, for duplicate and checkpoint checks
}

// NewVerifier returns a verifier for links hashed by h.
func NewVerifier(h Hasher) *Verifier { return &Verifier{h: h, chains: map[string]*state{}} }

// Check verifies the next link of the stream (line is for messages).
func (v *Verifier) Check(l Link, line int) *Break {
	v.links++
	st := v.chains[l.Chain]
	if st == nil {
		st = &state{head: Head{Hash: Genesis}, hashes: map[uint64]string{}}
		v.chains[l.Chain] = st
	}
	brk := func(r Reason, format string, args ...any) *Break {
		return &Break{Chain: l.Chain, Seq: l.Seq, Line: line, Reason: r, Detail: fmt.Sprintf(format, args...)}
	}
	want, err := v.h.Sum(l.Chain, l.Seq, l.Prev, l.Event)
	if err != nil {
		return brk(Malformed, "%v", err)
	}
	expected := st.head.Seq + 1
	switch {
	case l.Seq < expected:
		if old, ok := st.hashes[l.Seq]; ok && old == l.Hash && want == l.Hash {
			return brk(Duplicated, "seq %d already appeared", l.Seq)
		}
		return brk(Reordered, "seq %d after seq %d", l.Seq, st.head.Seq)
	case l.Seq > expected:
		if l.Seq == expected+1 {
			return brk(Missing, "link %d is missing", expected)
		}
		return brk(Missing, "links %d..%d are missing", expected, l.Seq-1)
	case want != l.Hash:
		return brk(Changed, "content does not match its hash (recomputed %s)", want)
	case l.Prev != st.head.Hash:
		return brk(Changed, "prev %s does not match the hash of seq %d (%s)", l.Prev, st.head.Seq, st.head.Hash)
	}
	st.head = Head{Seq: l.Seq, Hash: l.Hash}
	st.hashes[l.Seq] = l.Hash
	return nil
}

// Finish checks the chains against checkpoints and returns the report.
func (v *Verifier) Finish(checkpoints []Checkpoint) Report {
	r := Report{Links: v.links, Chains: make(map[string]Head, len(v.chains))}
	for name, st := range v.chains {
		r.Chains[name] = st.head
	}
	for _, cp := range checkpoints {
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
		if h := st.hashes[cp.Seq]; h != cp.Head {
			r.Broken = &Break{Chain: cp.Chain, Seq: cp.Seq, Reason: Rewritten,
				Detail: fmt.Sprintf("hash %s differs from the checkpoint's %s", h, cp.Head)}
			return r
		}
	}
	return r
}

// Verify reads a JSONL chain file and verifies every chain in it.
func Verify(r io.Reader, h Hasher, checkpoints []Checkpoint) (Report, error) {
	v := NewVerifier(h)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLinkSize+1)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		l, err := ParseLink(sc.Bytes())
		if err != nil {
			rep := v.Finish(nil)
			rep.Broken = &Break{Line: line, Reason: Malformed, Detail: err.Error()}
			return rep, nil
		}
		if b := v.Check(l, line); b != nil {
			rep := v.Finish(nil)
			rep.Broken = b
			return rep, nil
		}
	}
	if err := sc.Err(); err != nil {
		return Report{}, fmt.Errorf("read audit chain: %w", err)
	}
	return v.Finish(checkpoints), nil
}
