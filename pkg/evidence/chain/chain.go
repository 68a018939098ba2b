package chain

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/pyjson"
)

// Genesis is the prev of every chain's first link.
const Genesis = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// MaxLinkSize bounds one link line (the event plus about 300 bytes).
const MaxLinkSize = 2 << 20

// ErrLink is wrapped by errors about a malformed link.
var ErrLink = errors.New("invalid audit link")

// Link is one entry of a chain.
type Link struct {
	Chain string
	Seq   uint64
	Prev  string
	Hash  string
	// Event is the event the link records, as a JSON document.
	Event jsontree.Value
}

// Hasher computes link hashes, plain or keyed.
type Hasher struct {
	key []byte
}

// NewHasher returns a hasher; a non-empty key makes links HMAC-SHA-256.
func NewHasher(key []byte) Hasher { return Hasher{key: append([]byte(nil), key...)} }

// Keyed reports whether links carry an HMAC.
func (h Hasher) Keyed() bool { return len(h.key) > 0 }

func (h Hasher) prefix() string {
	if h.Keyed() {
		return "hmac-sha256:"
	}
	return "sha256:"
}

// Sum returns the hash of a link from its chain, seq, prev and event.
func (h Hasher) Sum(chainName string, seq uint64, prev string, ev jsontree.Value) (string, error) {
	c, err := canonjson.Marshal(body(chainName, seq, prev, ev))
	if err != nil {
		return "", fmt.Errorf("%w: event: %w", ErrLink, err)
	}
	var m hash.Hash
	if h.Keyed() {
		m = hmac.New(sha256.New, h.key)
	} else {
		m = sha256.New()
	}
	m.Write(c)
	return h.prefix() + hex.EncodeToString(m.Sum(nil)), nil
}

func body(chainName string, seq uint64, prev string, ev jsontree.Value) jsontree.Value {
	return jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
		{Key: "chain", Value: jsontree.Value{Kind: jsontree.String, Text: chainName}},
		{Key: "event", Value: ev},
		{Key: "prev", Value: jsontree.Value{Kind: jsontree.String, Text: prev}},
		{Key: "seq", Value: jsontree.Value{Kind: jsontree.Number, Text: strconv.FormatUint(seq, 10)}},
	}}
}

// Next builds the link that follows head (nil for a new chain).
func (h Hasher) Next(chainName string, head *Link, ev jsontree.Value) (Link, error) {
	if chainName == "" {
		return Link{}, fmt.Errorf("%w: empty chain name", ErrLink)
	}
	l := Link{Chain: chainName, Seq: 1, Prev: Genesis, Event: ev}
	if head != nil {
		l.Seq, l.Prev = head.Seq+1, head.Hash
	}
	var err error
	l.Hash, err = h.Sum(l.Chain, l.Seq, l.Prev, l.Event)
	return l, err
}

// Marshal returns the link as one JSON line without the newline; its keys
// are sorted, and the event is in canonical form.
func (l Link) Marshal() ([]byte, error) {
	t := body(l.Chain, l.Seq, l.Prev, l.Event)
	t.Members = append(t.Members, jsontree.Member{Key: "hash", Value: jsontree.Value{Kind: jsontree.String, Text: l.Hash}})
	return canonjson.Marshal(t)
}

// ParseLink reads one link line strictly.
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
	var l Link
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
			l.Event = m.Value
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
	if seen != 5 || l.Chain == "" || l.Event.Kind != jsontree.Object {
		return Link{}, fmt.Errorf("%w: want chain, seq, prev, hash and an event object", ErrLink)
	}
	if !validHash(l.Prev) || !validHash(l.Hash) {
		return Link{}, fmt.Errorf("%w: malformed hash", ErrLink)
	}
	return l, nil
}

func str(v jsontree.Value, key string) (string, error) {
	if v.Kind != jsontree.String {
		return "", fmt.Errorf("%w: %s must be a string", ErrLink, key)
	}
	return v.Text, nil
}

func validHash(s string) bool {
	_, hexPart, ok := strings.Cut(s, ":")
	if !ok || (!strings.HasPrefix(s, "sha256:") && !strings.HasPrefix(s, "hmac-sha256:")) || len(hexPart) != 64 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil
}

// EventJSON renders a link's event as compact sorted JSON, for display.
func (l Link) EventJSON() string {
	b, err := pyjson.Marshal(l.Event, pyjson.Compact)
	if err != nil {
		return ""
	}
	return string(b)
}
