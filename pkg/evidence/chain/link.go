package chain

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/bufpool"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// Genesis is the prev of every chain's first link.
const Genesis = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// MaxLinkSize bounds one link line (the event plus about 300 bytes).
const MaxLinkSize = 2 << 20

// ErrLink is wrapped by errors about a malformed link.
var ErrLink = errors.New("invalid audit link")

// Head is a chain's last link; Seq 0 (and any Hash) is an empty chain.
type Head struct {
	Seq  uint64
	Hash string
}

// Link is one link of a chain, as one canonical JSON line.
type Link struct {
	Chain string
	Seq   uint64
	Prev  string
	Hash  string
	// Line is the link line without the newline.
	Line []byte
	// Event is the canonical JSON of the event (a slice of Line).
	Event []byte
}

// Head returns the chain head this link makes.
func (l Link) Head() Head { return Head{Seq: l.Seq, Hash: l.Hash} }

// Hasher seals and checks links, plain or keyed.
type Hasher struct {
	key []byte
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
	h := Hasher{key: append([]byte(nil), key...)}
	h.macs = &sync.Pool{New: func() any { return &mac{Hash: h.New()} }}
	return h
}

// Keyed reports whether links carry an HMAC.
func (h Hasher) Keyed() bool { return len(h.key) > 0 }

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

// body appends the canonical bytes the hash covers,
// {"chain":…,"event":…,"prev":…,"seq":…}, to dst; event must be
// canonical JSON.
func body(dst []byte, chainName string, seq uint64, prev string, event []byte) []byte {
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
	buf := bufpool.Get()
	*buf = body((*buf)[:0], chainName, seq, prev, event)
	m.Write(*buf)
	bufpool.Put(buf)
	return h.Format(m.Sum(m.sum[:0]))
}

// LineStart appends what precedes the event in a link line of chainName,
// {"chain":…,"event":, to dst.
func LineStart(dst []byte, chainName string) []byte {
	dst = append(dst, `{"chain":`...)
	dst = canonjson.AppendString(dst, chainName)
	return append(dst, `,"event":`...)
}

// lineEnd appends what follows the event in a link line (the keys sorted:
// hash, prev, seq).
func lineEnd(dst []byte, seq uint64, prev, hashValue string) []byte {
	dst = append(dst, `,"hash":`...)
	dst = canonjson.AppendString(dst, hashValue)
	dst = append(dst, `,"prev":`...)
	dst = canonjson.AppendString(dst, prev)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, seq, 10)
	return append(dst, '}')
}

// LineRoom is the room a link line needs besides its event and chain name
// (the prefixes of hash and prev and a sequence number, with some to
// spare); a longer one is grown as needed.
const LineRoom = 260

// next returns the seq and prev of the link that follows head.
func next(head Head) (uint64, string) {
	if head.Seq == 0 {
		return 1, Genesis
	}
	return head.Seq + 1, head.Hash
}

// Seal makes the link of event (canonical JSON) that follows head in
// chainName (the zero Head for a new chain).
func (h Hasher) Seal(chainName string, head Head, event []byte) Link {
	seq, prev := next(head)
	ln := LineStart(make([]byte, 0, len(event)+len(chainName)+LineRoom), chainName)
	start := len(ln)
	ln = append(ln, event...)
	end := len(ln)
	sum := h.Sum(chainName, seq, prev, ln[start:end])
	ln = lineEnd(ln, seq, prev, sum)
	return Link{Chain: chainName, Seq: seq, Prev: prev, Hash: sum, Line: ln, Event: ln[start:end:end]}
}

// NewLink makes the link of stored parts (a database row, a parsed line):
// ev in canonical form, in its line. It does not check the hash.
func NewLink(chainName string, seq uint64, prev, hashValue string, ev jsontree.Value) (Link, error) {
	event, err := canonjson.Marshal(ev)
	if err != nil {
		return Link{}, fmt.Errorf("%w: chain %q seq %d: event: %w", ErrLink, chainName, seq, err)
	}
	ln := LineStart(make([]byte, 0, len(event)+len(chainName)+LineRoom), chainName)
	start := len(ln)
	ln = append(ln, event...)
	end := len(ln)
	ln = lineEnd(ln, seq, prev, hashValue)
	return Link{Chain: chainName, Seq: seq, Prev: prev, Hash: hashValue, Line: ln, Event: ln[start:end:end]}, nil
}

// ParseLink reads one link line strictly, in any key order and layout,
// into its canonical form; it does not check the hash.
func ParseLink(line []byte) (Link, error) {
	if len(line) > MaxLinkSize {
		return Link{}, fmt.Errorf("%w: longer than %d bytes", ErrLink, MaxLinkSize)
	}
	v, err := jsontree.Parse(line)
	if err != nil {
		return Link{}, fmt.Errorf("%w: %w", ErrLink, err)
	}
	if v.Kind != jsontree.Object {
		return Link{}, fmt.Errorf("%w: not an object", ErrLink)
	}
	var (
		l  Link
		ev jsontree.Value
	)
	seen := 0
	for _, m := range v.Members {
		seen++
		switch m.Key {
		case "chain":
			l.Chain, err = str(m.Value, "chain")
		case "prev":
			l.Prev, err = str(m.Value, "prev")
		case "hash":
			l.Hash, err = str(m.Value, "hash")
		case "event":
			ev = m.Value
		case "seq":
			if !m.Value.IsInteger() {
				err = fmt.Errorf("%w: seq must be an integer", ErrLink)
			} else if l.Seq, err = strconv.ParseUint(m.Value.Text, 10, 64); err != nil || l.Seq == 0 {
				err = fmt.Errorf("%w: seq must be a positive integer", ErrLink)
			}
		default:
			err = fmt.Errorf("%w: unknown key %q", ErrLink, m.Key)
		}
		if err != nil {
			return Link{}, err
		}
	}
	if seen != 5 || l.Chain == "" || ev.Kind != jsontree.Object {
		return Link{}, fmt.Errorf("%w: want chain, seq, prev, hash and an event object", ErrLink)
	}
	if !validHash(l.Prev) || !validHash(l.Hash) {
		return Link{}, fmt.Errorf("%w: malformed hash", ErrLink)
	}
	return NewLink(l.Chain, l.Seq, l.Prev, l.Hash, ev)
}

// SplitLine reads a link line in the canonical layout, as Seal writes
// it, without parsing its event: its chain, seq, prev and hash, and its
// event's bytes as they are. ok is false for a line in another layout
// (ParseLink reads it).
func SplitLine(ln []byte) (l Link, ok bool) {
	name, seq, prev, hashValue, eventStart, hashStart, _, ok := layout(ln)
	if !ok {
		return Link{}, false
	}
	return Link{Chain: name, Seq: seq, Prev: prev, Hash: hashValue, Line: ln, Event: ln[eventStart:hashStart:hashStart]}, true
}

// layout parses the canonical line layout, from both ends.
func layout(ln []byte) (name string, seq uint64, prev, hashValue string, eventStart, hashStart, prevStart int, ok bool) {
	const head = `{"chain":"`
	if !bytes.HasPrefix(ln, []byte(head)) || len(ln) < 100 || ln[len(ln)-1] != '}' {
		return
	}
	// The chain name: a JSON string with canonical escapes.
	i := len(head)
	for ; i < len(ln); i++ {
		if ln[i] == '\\' {
			i++
			continue
		}
		if ln[i] == '"' {
			break
		}
	}
	if i >= len(ln) {
		return
	}
	raw := ln[len(head)-1 : i+1]
	if bytes.IndexByte(raw, '\\') >= 0 {
		s, err := strconv.Unquote(string(raw))
		if err != nil || string(canonjson.AppendString(nil, s)) != string(raw) {
			return
		}
		name = s
	} else {
		name = string(raw[1 : len(raw)-1])
	}
	if !bytes.HasPrefix(ln[i+1:], []byte(`,"event":{`)) {
		return
	}
	eventStart = i + 1 + len(`,"event":`)
	// The tail: ,"hash":"H","prev":"P","seq":N}
	end := len(ln) - 1
	j := end
	for j > 0 && ln[j-1] >= '0' && ln[j-1] <= '9' {
		j--
	}
	if j == end || (ln[j] == '0' && end-j > 1) {
		return
	}
	n, err := strconv.ParseUint(string(ln[j:end]), 10, 64)
	if err != nil || n == 0 {
		return
	}
	seq = n
	const seqKey, prevKey, hashKey = `","seq":`, `,"prev":"`, `,"hash":"`
	if !bytes.HasSuffix(ln[:j], []byte(seqKey)) {
		return
	}
	// prev's value ends before seqKey; a hash value is "sha256:" or
	// "hmac-sha256:" and 64 hex digits.
	k := j - len(seqKey)
	var ok2 bool
	if prev, prevStart, ok2 = member(ln, k, prevKey, eventStart); !ok2 || ln[prevStart-1] != '"' {
		return
	}
	if hashValue, hashStart, ok2 = member(ln, prevStart-1, hashKey, eventStart); !ok2 || ln[hashStart-1] != '}' {
		return
	}
	return name, seq, prev, hashValue, eventStart, hashStart, prevStart, true
}

// member finds the string member key:"<hash>" whose value ends at end
// (the closing quote), and returns the value and where the member starts.
func member(ln []byte, end int, key string, floor int) (string, int, bool) {
	for _, n := range []int{len("sha256:") + 64, len("hmac-sha256:") + 64} {
		start := end - n - len(key)
		if start <= floor {
			continue
		}
		if string(ln[start:start+len(key)]) == key {
			v := string(ln[end-n : end])
			if validHash(v) {
				return v, start, true
			}
		}
	}
	return "", 0, false
}

func str(v jsontree.Value, key string) (string, error) {
	if v.Kind != jsontree.String {
		return "", fmt.Errorf("%w: %s must be a string", ErrLink, key)
	}
	return v.Text, nil
}

// validHash reports whether s is a link hash: "sha256:" or "hmac-sha256:"
// and 64 lowercase hex digits, as Format writes them.
func validHash(s string) bool {
	var hexPart string
	switch {
	case strings.HasPrefix(s, "sha256:"):
		hexPart = s[len("sha256:"):]
	case strings.HasPrefix(s, "hmac-sha256:"):
		hexPart = s[len("hmac-sha256:"):]
	default:
		return false
	}
	if len(hexPart) != 64 {
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		if !lowerHex[hexPart[i]] {
			return false
		}
	}
	return true
}

// lowerHex marks the lowercase hexadecimal digits.
var lowerHex = func() (t [256]bool) {
	for _, c := range "0123456789abcdef" {
		t[c] = true
	}
	return t
}()
