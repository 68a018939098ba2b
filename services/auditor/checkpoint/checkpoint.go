// Package checkpoint is the auditor's signed high-water marks: a
// checkpoint asserts that a chain's link seq has hash head, signed with
// the auditor's Ed25519 key. Kept outside the database (in a SIEM through
// syslog, or a file), checkpoints make truncation and a full rewrite of a
// chain detectable: `runtimetruth audit verify --checkpoints` checks the
// chain against them (pkg/evidence/chain's Truncated and Rewritten).
//
// The signature covers the RFC 8785 form of
// {"auditor","chain","head","seq","time"}. A checkpoint travels as a JSON
// line,
//
//	{"auditor":"/auditor/a1","chain":"VERDICTS/web-01","head":"sha256:…","key":"<key id>","seq":42,"sig":"<base64>","time":"…"}
//
// or as an RFC 5424 structured-data element,
//
//	[rtcheckpoint@32473 chain="…" seq="42" head="sha256:…" time="…" auditor="…" key="…" sig="…"]
//
// and ReadFile finds both in any text file (a syslog receiver's log
// included). The key id is the first 16 hex digits of the SHA-256 of the
// public key's PKIX DER form.
package checkpoint

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
	"strconv"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"

	"github.com/runtimetruth/runtimetruth/pkg/platform/regfile"
)

// Errors.
var (
	// ErrSignature: a checkpoint is unsigned, signed by another key, or its
	// signature does not verify.
	ErrSignature = errors.New("checkpoint signature does not verify")
	// ErrKey: a key file is not an Ed25519 key.
	ErrKey = errors.New("not an Ed25519 key")
)

// SDName is the structured-data name of a checkpoint element (the
// SD-ID is SDName@<private enterprise number>).
const SDName = "rtcheckpoint"

// Checkpoint is one signed assertion about a chain.
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

// Sign signs c with key (nil leaves it unsigned).
func Sign(c Checkpoint, key ed25519.PrivateKey) Checkpoint {
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
// SDName@pen.
func (c Checkpoint) SD(pen string) string {
	var b strings.Builder
	b.WriteString("[" + SDName + "@" + pen)
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

// Parse finds a checkpoint in one line: a JSON checkpoint line or a
// syslog message carrying a checkpoint element. ok is false for a line
// without one.
func Parse(line []byte) (c Checkpoint, ok bool, err error) {
	line = bytes.TrimSpace(line)
	if bytes.HasPrefix(line, []byte("{")) {
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			return Checkpoint{}, false, fmt.Errorf("checkpoint: %w", err)
		}
		return c, true, c.check()
	}
	i := bytes.Index(line, []byte("["+SDName+"@"))
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

// ReadFile reads every checkpoint in a file of JSON checkpoint lines or
// syslog messages, checking each signature against pub when pub is not
// nil; it keeps, per chain, every checkpoint (all are checked against the
// chain).
func ReadFile(path string, pub ed25519.PublicKey) ([]Checkpoint, error) {
	f, err := regfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	defer func() { _ = f.Close() }()
	var out []Checkpoint
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	n := 0
	for sc.Scan() {
		n++
		c, ok, err := Parse(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if !ok {
			continue
		}
		if pub != nil {
			if err := c.Verify(pub); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, n, err)
			}
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("checkpoints %s: %w", path, err)
	}
	return out, nil
}

// ForChain converts checkpoints for pkg/evidence/chain and the verifier.
func ForChain(cps []Checkpoint) []chain.Checkpoint {
	out := make([]chain.Checkpoint, len(cps))
	for i, c := range cps {
		out[i] = chain.Checkpoint{Chain: c.Chain, Seq: c.Seq, Head: c.Head}
	}
	return out
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

// maxKeyFile bounds a key file (regular files only).
const maxKeyFile = 64 << 10

// LoadPrivateKey reads a PEM PKCS #8 Ed25519 private key (openssl genpkey
// -algorithm ed25519).
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	b, err := regfile.Read(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("checkpoint key %s: %w: want a PEM PRIVATE KEY block", path, ErrKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key %s: %w", path, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("checkpoint key %s: %w", path, ErrKey)
	}
	return ek, nil
}

// LoadPublicKey reads a PEM PKIX Ed25519 public key, or the public half of
// a private key file.
func LoadPublicKey(path string) (ed25519.PublicKey, error) {
	b, err := regfile.Read(path, maxKeyFile)
	if err != nil {
		return nil, fmt.Errorf("checkpoint public key: %w", err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("checkpoint public key %s: %w: no PEM block", path, ErrKey)
	}
	if blk.Type == "PRIVATE KEY" {
		k, err := LoadPrivateKey(path)
		if err != nil {
			return nil, err
		}
		return k.Public().(ed25519.PublicKey), nil
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("checkpoint public key %s: %w", path, err)
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("checkpoint public key %s: %w", path, ErrKey)
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
