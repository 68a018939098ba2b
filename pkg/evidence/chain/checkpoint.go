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

// CheckpointMsgID is the MSGID of the syslog messages that carry a
// checkpoint.
const CheckpointMsgID = "checkpoint"

// ParseCheckpoint reads the checkpoint of one line: a JSON checkpoint line
// (one that starts with '{'), or an RFC 5424 message whose MSGID is
// CheckpointMsgID and whose STRUCTURED-DATA holds a CheckpointSD@<PEN>
// element, the checkpoint being that element's parameters. ok is false
// for any other line: text that is no RFC 5424 message, a message of
// another MSGID, or one without the element (or whose structured data
// cannot be read before it). Nothing else of a line is read: a link
// message's parameters and any MSG part may hold checkpoint text (a
// target's name does) and are never taken for a checkpoint. err is a
// checkpoint's line that is malformed: a JSON line that is not one
// checkpoint, or a checkpoint message whose element (or what follows it)
// does not parse or lacks chain, seq, head or time.
func ParseCheckpoint(line []byte) (c Checkpoint, ok bool, err error) {
	line = bytes.TrimSpace(line)
	if bytes.HasPrefix(line, []byte("{")) {
		if err := strictjson.Decode(line, &c); err != nil {
			return Checkpoint{}, false, fmt.Errorf("checkpoint: %w", err)
		}
		return c.checked()
	}
	sd, ok := checkpointSD(line)
	if !ok {
		return Checkpoint{}, false, nil
	}
	params, ok, err := checkpointElement(sd)
	if err != nil || !ok {
		return Checkpoint{}, false, err
	}
	c = Checkpoint{Chain: params["chain"], Head: params["head"], Auditor: params["auditor"], Key: params["key"], Sig: params["sig"]}
	if c.Seq, err = strconv.ParseUint(params["seq"], 10, 64); err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint: seq %q", params["seq"])
	}
	if c.Time, err = time.Parse(time.RFC3339Nano, params["time"]); err != nil {
		return Checkpoint{}, false, fmt.Errorf("checkpoint: time %q", params["time"])
	}
	return c.checked()
}

// checked returns c, found, when it names a chain, seq and head.
func (c Checkpoint) checked() (Checkpoint, bool, error) {
	if c.Chain == "" || c.Seq == 0 || c.Head == "" {
		return Checkpoint{}, false, errors.New("checkpoint: chain, seq and head are required")
	}
	return c, true, nil
}

// checkpointSD returns the STRUCTURED-DATA and what follows it of an RFC
// 5424 message whose MSGID is CheckpointMsgID; ok is false for a line
// that is not one:
//
//	<PRI>VERSION SP TIMESTAMP SP HOSTNAME SP APP-NAME SP PROCID SP MSGID SP STRUCTURED-DATA [SP MSG]
func checkpointSD(line []byte) (sd []byte, ok bool) {
	if len(line) < 3 || line[0] != '<' {
		return nil, false
	}
	end := bytes.IndexByte(line, '>')
	if end < 2 || end > 4 || !digits(line[1:end]) {
		return nil, false
	}
	if pri, _ := strconv.Atoi(string(line[1:end])); pri > 191 {
		return nil, false
	}
	rest := line[end+1:]
	sp := bytes.IndexByte(rest, ' ')
	if sp < 1 || sp > 3 || !digits(rest[:sp]) || rest[0] == '0' {
		return nil, false
	}
	rest = rest[sp+1:]
	var field []byte
	for range 5 { // TIMESTAMP, HOSTNAME, APP-NAME, PROCID, MSGID
		sp = bytes.IndexByte(rest, ' ')
		if sp < 1 {
			return nil, false
		}
		field, rest = rest[:sp], rest[sp+1:]
		for _, b := range field {
			if b < 33 || b > 126 {
				return nil, false
			}
		}
	}
	if string(field) != CheckpointMsgID {
		return nil, false
	}
	return rest, true
}

// checkpointElement finds the CheckpointSD@<PEN> element in the
// STRUCTURED-DATA at the start of sd and returns its parameters; ok is
// false when there is none, or when an element before it does not parse
// (a message that is not the auditor's). Once the element is found,
// anything malformed (the element, a second one, the structured data
// after it) is an error.
func checkpointElement(sd []byte) (params map[string]string, ok bool, err error) {
	if len(sd) == 0 || sd[0] != '[' {
		return nil, false, nil // NILVALUE, or no structured data
	}
	for len(sd) > 0 && sd[0] == '[' {
		id := sdID(sd[1:])
		ours := strings.HasPrefix(id, CheckpointSD+"@")
		p, n, perr := sdElement(sd)
		switch {
		case ours && params != nil:
			return nil, false, errors.New("checkpoint: two " + CheckpointSD + " elements")
		case ours && perr != nil:
			return nil, false, perr
		case ours && !pen(strings.TrimPrefix(id, CheckpointSD+"@")):
			return nil, false, fmt.Errorf("checkpoint: SD-ID %q: the private enterprise number is not digits and dots", id)
		case ours:
			params = p
		case perr != nil && params == nil:
			return nil, false, nil
		case perr != nil:
			return nil, false, perr
		}
		sd = sd[n:]
	}
	if params == nil {
		return nil, false, nil
	}
	if len(sd) > 0 && sd[0] != ' ' {
		return nil, false, errors.New("checkpoint: malformed structured data")
	}
	return params, true, nil
}

// sdID is the SD-ID at the start of b, up to a space or ']'.
func sdID(b []byte) string {
	i := 0
	for i < len(b) && b[i] != ' ' && b[i] != ']' {
		i++
	}
	return string(b[:i])
}

// sdElement parses the SD-ELEMENT at the start of b,
// "[" SD-ID *(SP PARAM-NAME="PARAM-VALUE") "]", and returns its
// parameters and its length. In a PARAM-VALUE, '"', '\' and ']' are
// escaped with '\' (a '\' before another character is itself); a
// parameter named twice is an error.
func sdElement(b []byte) (map[string]string, int, error) {
	malformed := errors.New("checkpoint: malformed structured data")
	i := 1
	for i < len(b) && b[i] != ' ' && b[i] != ']' {
		i++
	}
	if !sdName(b[1:i], true) {
		return nil, 0, malformed
	}
	out := map[string]string{}
	for i < len(b) && b[i] == ' ' {
		i++
		eq := bytes.IndexByte(b[i:], '=')
		if eq < 0 || !sdName(b[i:i+eq], false) || i+eq+1 >= len(b) || b[i+eq+1] != '"' {
			return nil, 0, malformed
		}
		name := string(b[i : i+eq])
		i += eq + 2
		var v strings.Builder
		for ; i < len(b) && b[i] != '"'; i++ {
			switch {
			case b[i] == '\\' && i+1 < len(b) && (b[i+1] == '"' || b[i+1] == '\\' || b[i+1] == ']'):
				i++
			case b[i] == ']':
				return nil, 0, errors.New("checkpoint: unescaped ] in a parameter value")
			}
			v.WriteByte(b[i])
		}
		if i >= len(b) {
			return nil, 0, errors.New("checkpoint: unterminated parameter value")
		}
		if _, dup := out[name]; dup {
			return nil, 0, fmt.Errorf("checkpoint: parameter %s given twice", name)
		}
		out[name] = v.String()
		i++
	}
	if i >= len(b) || b[i] != ']' {
		return nil, 0, malformed
	}
	return out, i + 1, nil
}

// sdName reports whether b is an SD-NAME (1 to 32 printable US-ASCII
// characters but '=', ' ', ']' and '"'), or with at, an SD-ID (an SD-NAME,
// or name@PEN).
func sdName(b []byte, at bool) bool {
	if at {
		if name, rest, ok := bytes.Cut(b, []byte("@")); ok {
			return sdName(name, false) && len(rest) > 0 && !bytes.ContainsAny(rest, "@=] \"") && printable(rest)
		}
	}
	if len(b) == 0 || len(b) > 32 || bytes.ContainsAny(b, "@=] \"") {
		return false
	}
	return printable(b)
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 33 || c > 126 {
			return false
		}
	}
	return true
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// pen reports whether s is a private enterprise number: digits and dots.
func pen(s string) bool {
	return s != "" && strings.Trim(s, "0123456789.") == ""
}

// MaxCheckpointLine bounds a line ReadCheckpoints reads: a longer one
// holds no checkpoint the auditor sends (those are under a kilobyte but
// for the chain's name) and is skipped.
const MaxCheckpointLine = 1 << 20

// ReadCheckpoints reads the checkpoints in r (name names r in errors): the
// JSON checkpoint lines of an auditor's checkpoint file, and in a syslog
// receiver's log, one RFC 5424 message a line, the messages of MSGID
// "checkpoint" carrying an rtcheckpoint@<PEN> element (ParseCheckpoint).
// Every other line but blank ones, a link's message or anyone else's,
// whatever its text, is skipped and counted in skipped. A checkpoint's
// line that is malformed is an error naming the line, as is one whose
// signature does not verify against pub when pub is not nil. It keeps,
// per chain, every checkpoint (all are checked against the chain).
func ReadCheckpoints(r io.Reader, name string, pub ed25519.PublicKey) (cps []Checkpoint, skipped int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for n := 1; ; n++ {
		line = line[:0]
		long := false
		var rerr error
		for {
			frag, e := br.ReadSlice('\n')
			switch {
			case long:
			case len(line)+len(frag) > MaxCheckpointLine:
				long, line = true, line[:0]
			default:
				line = append(line, frag...)
			}
			if !errors.Is(e, bufio.ErrBufferFull) {
				rerr = e
				break
			}
		}
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return nil, 0, fmt.Errorf("checkpoints %s: %w", name, rerr)
		}
		if rerr != nil && len(line) == 0 && !long {
			break
		}
		if long {
			skipped++
		} else {
			c, ok, perr := ParseCheckpoint(line)
			if perr == nil && ok && pub != nil {
				perr = c.Verify(pub)
			}
			switch {
			case perr != nil:
				return nil, 0, fmt.Errorf("%s:%d: %w", name, n, perr)
			case ok:
				cps = append(cps, c)
			case len(bytes.TrimSpace(line)) > 0:
				skipped++
			}
		}
		if rerr != nil {
			break
		}
	}
	return cps, skipped, nil
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
