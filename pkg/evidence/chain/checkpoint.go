package chain

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

// Errors of checkpoints and their keys.
var (
	// ErrSignature: a checkpoint is unsigned, signed by another key, or its
	// signature does not verify.
	ErrSignature = errors.New("checkpoint signature does not verify")
	// ErrKey: a key file is not an Ed25519 key.
	ErrKey = errors.New("not an Ed25519 key")
)

// CheckpointSD is the structured-data name of a checkpoint element (the
// SD-ID is CheckpointSD@<private enterprise number>).
const CheckpointSD = "rtcheckpoint"

// Checkpoint is one signed assertion about a chain: its link Seq has hash
// Head.
type Checkpoint struct {
	Chain string `json:"chain"`
	Seq   uint64 `json:"seq"`
	Head  string `json:"head"`
	// Time is when the checkpoint was made.
	Time time.Time `json:"time"`
	// Auditor is the source of the auditor that made it.
	Auditor string `json:"auditor"`
	// Key is the signing key's id; Sig the signature (both empty when
	// unsigned).
	Key string `json:"key,omitempty"`
	Sig string `json:"sig,omitempty"`
}

// signed returns the bytes the signature covers.
func (c Checkpoint) signed() []byte {
	s := func(v string) jsontree.Value { return jsontree.Value{Kind: jsontree.String, Text: v} }
	b, _ := canonjson.Marshal(jsontree.Value{Kind: jsontree.Object, Members: []jsontree.Member{
		{Key: "auditor", Value: s(c.Auditor)},
		{Key: "chain", Value: s(c.Chain)},
		{Key: "head", Value: s(c.Head)},
		{Key: "seq", Value: jsontree.Value{Kind: jsontree.Number, Text: strconv.FormatUint(c.Seq, 10)}},
		{Key: "time", Value: s(c.Time.UTC().Format(time.RFC3339Nano))},
	}})
	return b
}

// Sign returns c signed with key (nil leaves it unsigned).
func (c Checkpoint) Sign(key ed25519.PrivateKey) Checkpoint {
	c.Time = c.Time.UTC()
	c.Key, c.Sig = "", ""
	if key != nil {
		c.Key = KeyID(key.Public().(ed25519.PublicKey))
		c.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, c.signed()))
	}
	return c
}

// Verify checks c's signature against pub.
func (c Checkpoint) Verify(pub ed25519.PublicKey) error {
	if c.Sig == "" {
		return fmt.Errorf("%w: chain %q seq %d: unsigned", ErrSignature, c.Chain, c.Seq)
	}
	if id := KeyID(pub); c.Key != id {
		return fmt.Errorf("%w: chain %q seq %d: signed by key %s, not %s", ErrSignature, c.Chain, c.Seq, c.Key, id)
	}
	sig, err := base64.StdEncoding.DecodeString(c.Sig)
	if err != nil || !ed25519.Verify(pub, c.signed(), sig) {
		return fmt.Errorf("%w: chain %q seq %d", ErrSignature, c.Chain, c.Seq)
	}
	return nil
}

// JSON renders c as one JSON line (without the newline).
func (c Checkpoint) JSON() []byte {
	c.Time = c.Time.UTC()
	b, _ := json.Marshal(c)
	return b
}

// SD renders c as an RFC 5424 structured-data element with the SD-ID
// CheckpointSD@pen.
func (c Checkpoint) SD(pen string) string {
	var b strings.Builder
	b.WriteString("[" + CheckpointSD + "@" + pen)
	for _, p := range [][2]string{
		{"chain", c.Chain}, {"seq", strconv.FormatUint(c.Seq, 10)}, {"head", c.Head},
		{"time", c.Time.UTC().Format(time.RFC3339Nano)}, {"auditor", c.Auditor}, {"key", c.Key}, {"sig", c.Sig},
	} {
		b.WriteString(" " + p[0] + `="` + EscapeParam(p[1]) + `"`)
	}
	b.WriteString("]")
	return b.String()
}

// EscapeParam escapes an RFC 5424 PARAM-VALUE: '"', '\' and ']'.
func EscapeParam(s string) string {
	if !strings.ContainsAny(s, "\"\\]") {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if r == '"' || r == '\\' || r == ']' {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ParseCheckpoint finds a checkpoint in one line: a JSON checkpoint line
// or a syslog message carrying a checkpoint element. ok is false for a
// line without one.
func ParseCheckpoint(line []byte) (c Checkpoint, ok bool, err error) {
	line = bytes.TrimSpace(line)
	if bytes.HasPrefix(line, []byte("{")) {
		if err := strictjson.Decode(line, &c); err != nil {
			return Checkpoint{}, false, fmt.Errorf("checkpoint: %w", err)
		}
		return c, true, c.check()
	}
	i := bytes.Index(line, []byte("["+CheckpointSD+"@"))
	if i < 0 {
		return Checkpoint{}, false, nil
	}
	params, err := sdParams(line[i+1:])
	if err != nil {
		return Checkpoint{}, false, err
	}
	c = Checkpoint{Chain: params["chain"], Head: params["head"], Auditor: params["auditor"], Key: params["key"], Sig: params["sig"]}
	if c.Seq, err = strconv.ParseUint(params["seq"], 10, 64); err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint: seq %q", params["seq"])
	}
	if c.Time, err = time.Parse(time.RFC3339Nano, params["time"]); err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint: time %q", params["time"])
	}
	return c, true, c.check()
}

func (c Checkpoint) check() error {
	if c.Chain == "" || c.Seq == 0 || c.Head == "" {
		return fmt.Errorf("checkpoint: chain, seq and head are required")
	}
	return nil
}

// sdParams parses SD-ID *(SP PARAM-NAME="PARAM-VALUE") up to the closing
// bracket.
func sdParams(b []byte) (map[string]string, error) {
	out := map[string]string{}
	i := bytes.IndexByte(b, ' ')
	end := bytes.IndexByte(b, ']')
	if i < 0 || (end >= 0 && end < i) {
		return out, nil
	}
	for i < len(b) && b[i] == ' ' {
		i++
		eq := bytes.IndexByte(b[i:], '=')
		if eq < 0 || i+eq+1 >= len(b) || b[i+eq+1] != '"' {
			return nil, errors.New("checkpoint: malformed structured data")
		}
		name := string(b[i : i+eq])
		i += eq + 2
		var v strings.Builder
		for ; i < len(b) && b[i] != '"'; i++ {
			if b[i] == '\\' && i+1 < len(b) && (b[i+1] == '"' || b[i+1] == '\\' || b[i+1] == ']') {
				i++
			}
			v.WriteByte(b[i])
		}
		if i >= len(b) {
			return nil, errors.New("checkpoint: unterminated parameter value")
		}
		out[name] = v.String()
		i++
	}
	if i >= len(b) || b[i] != ']' {
		return nil, errors.New("checkpoint: malformed structured data")
	}
	return out, nil
}

// ReadCheckpoints reads every checkpoint in r, JSON checkpoint lines or
// syslog messages (name names r in errors), checking each signature
// against pub when pub is not nil; it keeps, per chain, every checkpoint
// (all are checked against the chain).
func ReadCheckpoints(r io.Reader, name string, pub ed25519.PublicKey) ([]Checkpoint, error) {
	var out []Checkpoint
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		n++
		c, ok, err := ParseCheckpoint(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if !ok {
			continue
		}
		if pub != nil {
			if err := c.Verify(pub); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, n, err)
			}
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("checkpoints %s: %w", name, err)
	}
	return out, nil
}

// KeyID names a public key: 16 hex digits of the SHA-256 of its PKIX DER.
func KeyID(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:8])
}

// MaxKeyFile bounds a checkpoint key file.
const MaxKeyFile = 64 << 10

// ParsePrivateKey reads a PEM PKCS #8 Ed25519 private key (openssl
// genpkey -algorithm ed25519) from b, the file name.
func ParsePrivateKey(b []byte, name string) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("checkpoint key %s: %w: want a PEM PRIVATE KEY block", name, ErrKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key %s: %w", name, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("checkpoint key %s: %w", name, ErrKey)
	}
	return ek, nil
}

// ParsePublicKey reads a PEM PKIX Ed25519 public key, or the public half
// of a private key, from b, the file name.
func ParsePublicKey(b []byte, name string) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("checkpoint public key %s: %w: no PEM block", name, ErrKey)
	}
	if blk.Type == "PRIVATE KEY" {
		k, err := ParsePrivateKey(b, name)
		if err != nil {
			return nil, err
		}
		return k.Public().(ed25519.PublicKey), nil
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("checkpoint public key %s: %w", name, err)
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("checkpoint public key %s: %w", name, ErrKey)
	}
	return ek, nil
}

// MarshalPrivateKey renders a key as PEM PKCS #8 (for tests and key
// generation).
func MarshalPrivateKey(k ed25519.PrivateKey) []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// MarshalPublicKey renders a public key as PEM PKIX.
func MarshalPublicKey(k ed25519.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}
