package dsse

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

// Signed evidence. A collector signs every event it publishes with its
// own Ed25519 key: the signature covers a claim that names the event
// (id, type, source, subject, time), the host and target it is about, a
// per-key sequence number that only grows (across restarts too), and the
// SHA-256 of the data. The claim travels, signed, in a DSSE envelope
// (https://github.com/secure-systems-lab/dsse, as in-toto and Sigstore
// use), compact JSON, in the CloudEvent extension attribute ExtSignature
// (the NATS header ce-rtsignature):
//
//	{"payloadType":"application/vnd.runtimetruth.claim.v1+json",
//	 "payload":"<base64 of the claim JSON>",
//	 "signatures":[{"keyid":"<KeyID>","sig":"<base64 of the signature>"}]}
//
// The bytes signed are DSSE's pre-authentication encoding of the payload
// type and the claim JSON exactly as carried (base64-decoded):
//
//	"DSSEv1" SP LEN(payloadType) SP payloadType SP LEN(claim) SP claim
//
// with LEN the decimal byte count (PAE). A verifier checks the signature
// over those bytes with the key KeyID names, then that the claim says what
// the event says (VerifySignature): no canonical form is needed, the claim
// is compared field by field. The claim JSON:
//
//	{"id":"…","type":"…","source":"…","subject":"…","time":"<the time attribute, RFC 3339>",
//	 "host":"…","target":{"kind":"…","identifier":"…"},"seq":42,
//	 "payload_sha256":"<hex SHA-256 of the data>"}
//
// target is left out for an event about no target.
const (
	// ExtSignature is the extension attribute of the envelope.
	ExtSignature = "rtsignature"
	// ClaimPayloadType is the envelope's payloadType.
	ClaimPayloadType = "application/vnd.runtimetruth.claim.v1+json"
	// MaxSignatureSize bounds the extension's value.
	MaxSignatureSize = 4 << 10
)

// Claim is what a signature asserts about one event.
type Claim struct {
	ID      string         `json:"id"`
	Type    string         `json:"type"`
	Source  string         `json:"source"`
	Subject string         `json:"subject"`
	Time    string         `json:"time"`
	Host    string         `json:"host"`
	Target  *events.Target `json:"target,omitempty"`
	// Seq is the signing key's sequence number: every event a key signs
	// has a higher one than the last (gaps allowed).
	Seq uint64 `json:"seq"`
	// PayloadSHA256 is the hex SHA-256 of the event's data.
	PayloadSHA256 string `json:"payload_sha256"`
}

// KeyID names an Ed25519 public key by the key itself: "ed25519:" and the
// standard base64 of its 32 bytes. A signature's key id so carries the
// key, which a registry pins on first use or holds for an operator's
// approval; it is trusted only once the registry holds it for the host.
func KeyID(pub ed25519.PublicKey) string {
	return keyIDPrefix + base64.StdEncoding.EncodeToString(pub)
}

// keyIDPrefix starts every key id (events.KeyIDPrefix).
const keyIDPrefix = events.KeyIDPrefix

// namesKey reports whether id is KeyID(pub), without building it.
func namesKey(id string, pub ed25519.PublicKey) bool {
	var enc [44]byte // base64 of 32 bytes
	rest, ok := strings.CutPrefix(id, keyIDPrefix)
	if !ok || len(rest) != len(enc) || base64.StdEncoding.EncodedLen(len(pub)) != len(enc) {
		return false
	}
	base64.StdEncoding.Encode(enc[:], pub)
	return rest == string(enc[:])
}

// ParseKeyID returns the public key a key id names (events.ParseKeyID,
// where the key id's form is checked for the registry's events too).
func ParseKeyID(id string) (ed25519.PublicKey, error) { return events.ParseKeyID(id) }

// PAE is DSSE's pre-authentication encoding of a payload and its type:
// the bytes a DSSE signature covers.
func PAE(payloadType string, payload []byte) []byte {
	b := make([]byte, 0, 32+len(payloadType)+len(payload))
	b = append(b, "DSSEv1 "...)
	b = strconv.AppendInt(b, int64(len(payloadType)), 10)
	b = append(b, ' ')
	b = append(b, payloadType...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(payload)), 10)
	b = append(b, ' ')
	return append(b, payload...)
}

// Signer signs the events New and NewMsg build (WithSigner). It is safe
// for concurrent use when next is.
type Signer struct {
	key   ed25519.PrivateKey
	keyID string
	next  func() (uint64, error)
}

// NewSigner signs with key, taking each event's sequence number from
// next, which must return a higher number on every call, across restarts
// of the process too.
func NewSigner(key ed25519.PrivateKey, next func() (uint64, error)) *Signer {
	return &Signer{key: key, keyID: KeyID(key.Public().(ed25519.PublicKey)), next: next}
}

// KeyID is the id of the signer's public key.
func (s *Signer) KeyID() string { return s.keyID }

// dsseEnvelope is a DSSE envelope; encoding/json writes []byte as
// standard base64, as DSSE has it.
type dsseEnvelope struct {
	PayloadType string          `json:"payloadType"`
	Payload     []byte          `json:"payload"`
	Signatures  []dsseSignature `json:"signatures"`
}

type dsseSignature struct {
	KeyID string `json:"keyid"`
	Sig   []byte `json:"sig"`
}

// Sign returns the signature of e (its data set) about p, the value of
// its ExtSignature: the envelope of a claim of the event, with the
// signer's next sequence number.
func (s *Signer) Sign(e *event.Event, p events.Payload) (string, error) {
	seq, err := s.next()
	if err != nil {
		return "", fmt.Errorf("sign %s: sequence: %w", e.Type(), err)
	}
	c := claimOf(e, p)
	c.Seq = seq
	claim, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("sign %s: %w", e.Type(), err)
	}
	env, err := json.Marshal(dsseEnvelope{PayloadType: ClaimPayloadType, Payload: claim,
		Signatures: []dsseSignature{{KeyID: s.keyID, Sig: ed25519.Sign(s.key, PAE(ClaimPayloadType, claim))}}})
	if err != nil {
		return "", fmt.Errorf("sign %s: %w", e.Type(), err)
	}
	return string(env), nil
}

// claimOf is the claim of event e (its data set) about p, without Seq.
func claimOf(e *event.Event, p events.Payload) Claim {
	return newClaim(e.ID(), e.Type(), e.Source(), e.Subject(), e.Time(), e.Data(), p)
}

// newClaim is the claim of the event of these attributes and data about
// p, without Seq.
func newClaim(id, typ, source, subject string, t time.Time, data []byte, p events.Payload) Claim {
	sum := sha256.Sum256(data)
	c := Claim{ID: id, Type: typ, Source: source, Subject: subject,
		Time: types.FormatTime(t), PayloadSHA256: hex.EncodeToString(sum[:])}
	c.Host, c.Target = claimedAbout(p)
	return c
}

// claimedAbout is the host and target a payload is about.
func claimedAbout(p events.Payload) (string, *events.Target) {
	switch p := p.(type) {
	case events.EvidenceCollected:
		return p.Host, &p.Target
	case events.CollectionFailed:
		return p.Host, p.Target
	case events.RunnableModified:
		return p.Host, nil
	case events.Verdict:
		return p.Host, &p.Target
	}
	return "", nil
}

// Why a signature does not hold (errors of VerifySignature, wrapped).
var (
	ErrUnsigned     = errors.New("unsigned")
	ErrBadSignature = errors.New("bad signature")
	ErrClaim        = errors.New("the claim does not match the event")
)

// Signature is a verified signature: the claim and the key that signed it.
type Signature struct {
	KeyID string
	Claim Claim
}

// SignatureOf reads e's envelope without checking the signature: the key
// id it names, for looking the key up.
func SignatureOf(e event.Event) (keyID string, err error) {
	env, err := envelopeOf(e)
	if err != nil {
		return "", err
	}
	return env.Signatures[0].KeyID, nil
}

// VerifySignature checks e's signature: the envelope is well formed with
// one signature, by the key key returns for its key id (an error from key,
// say an unknown or revoked key, is returned wrapped), over the PAE of its
// claim; and the claim says what the event says: id, type, source,
// subject, time, the host and target of p (the event's payload), and the
// SHA-256 of the data.
func VerifySignature(e event.Event, p events.Payload, key func(keyID string) (ed25519.PublicKey, error)) (Signature, error) {
	s, err := ReadSignature(e, p, key)
	if err != nil {
		return Signature{}, err
	}
	return s.Verified(ed25519.Verify(s.PublicKey, s.Message, s.Sig))
}

// claimDiff names the first field in which a and b differ, or "".
func claimDiff(a, b Claim) string {
	switch {
	case a.ID != b.ID:
		return "id"
	case a.Type != b.Type:
		return "type"
	case a.Source != b.Source:
		return "source"
	case a.Subject != b.Subject:
		return "subject"
	case a.Time != b.Time:
		return "time"
	case a.Host != b.Host:
		return "host"
	case (a.Target == nil) != (b.Target == nil) || a.Target != nil && *a.Target != *b.Target:
		return "target"
	case a.PayloadSHA256 != b.PayloadSHA256:
		return "payload_sha256"
	}
	return ""
}

// envelopeOf parses e's envelope (claimEnvelope).
func envelopeOf(e event.Event) (dsseEnvelope, error) {
	v, _ := e.Extensions()[ExtSignature].(string)
	return claimEnvelope(v)
}

// claimEnvelope parses an event's envelope v, as ExtSignature carries
// it: the payload type ClaimPayloadType and exactly one signature of an
// Ed25519 size (parseEnvelope); ErrUnsigned when v is empty.
func claimEnvelope(v string) (dsseEnvelope, error) {
	if v == "" {
		return dsseEnvelope{}, ErrUnsigned
	}
	return parseEnvelope([]byte(v), ClaimPayloadType)
}

// readClaim decodes the claim an envelope carries, an ErrClaim when it is
// not one.
func readClaim(b []byte) (Claim, error) {
	c, err := decodeClaim(b)
	if err != nil {
		return Claim{}, fmt.Errorf("%w: the claim is not a claim: %w", ErrClaim, err)
	}
	return c, nil
}

// ValidExtension checks the extension's value as the codec carries it:
// printable ASCII (compact JSON of base64 and ids) of at most
// MaxSignatureSize bytes. The signature itself is the verifier's to check.
func ValidExtension(v string) error {
	if v == "" || len(v) > MaxSignatureSize {
		return fmt.Errorf("empty or longer than %d bytes", MaxSignatureSize)
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7E {
			return errors.New("not printable ASCII")
		}
	}
	return nil
}

// decodeEnvelope decodes exactly one DSSE envelope, strictly.
func decodeEnvelope(raw []byte) (dsseEnvelope, error) {
	var env dsseEnvelope
	if err := strictjson.Decode(raw, &env, strictjson.NoNull()); err != nil {
		return dsseEnvelope{}, err
	}
	return env, nil
}

// decodeClaim decodes exactly one claim, strictly.
func decodeClaim(b []byte) (Claim, error) {
	var c Claim
	if err := strictjson.Decode(b, &c, strictjson.NoNull()); err != nil {
		return Claim{}, err
	}
	return c, nil
}
