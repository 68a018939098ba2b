package events

import (
	"crypto/sha256"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// Hooks for the external tests of the evidence decoder.

// DecodeEvidence is the evidence.collected decoder ReadEvidence runs: the
// payload (its Snapshot canonical) and the snapshot.
func DecodeEvidence(data []byte) (EvidenceCollected, *snapshot.Snapshot, error) {
	p, s, _, err := decodeEvidence(data)
	return p, s, err
}

// CheckEvidenceSchemaCompiled runs the JSON Schema itself.
func CheckEvidenceSchemaCompiled(data []byte) error {
	return validateData(byType[TypeEvidenceCollected], data)
}

// DecodeEvidenceSchemaPath decodes as the schema specifies: the JSON
// Schema, then encoding/json, then Validate (decodeInto, which decodes
// the other payload types).
func DecodeEvidenceSchemaPath(data []byte) (EvidenceCollected, error) {
	var p EvidenceCollected
	err := decodeInto(byType[TypeEvidenceCollected], data, &p)
	return p, err
}

// Hooks for the tests holding the codec to its reference.
var (
	// FromNATSReference is FromNATS through the sdk-go setters alone.
	FromNATSReference = fromNATSReference
	// MarshalVerdict is NewMsg's encoding of a verdict.
	MarshalVerdict = marshalVerdict
	// MarshalPayload is encoding/json's encoding of a payload (HTML
	// escaping off), New's for every type without its own encoder.
	MarshalPayload = marshal
	// ValidTraceparent is the full check, with its errors.
	ValidTraceparent = validTraceparent
)

// Hooks for the tests holding the hand-written pattern checks to the
// regular expressions they replace.
var (
	IsHex64       = isHex64
	IsReasonToken = isReasonToken
	// The subject matchers.
	IsToken           = isToken
	IsEvidenceSubject = isEvidenceSubject
	IsTargetSubject   = isTargetSubject
)

// DigestEquals is digestEquals on the digest of data.
func DigestEquals(digest string, data []byte) bool {
	sum := sha256.Sum256(data)
	return digestEquals(digest, &sum)
}

// NewMsgReference is NewMsg through the sdk-go setters alone (New, then
// ToNATS, as the codec built them before it wrote the headers directly).
var NewMsgReference = newMsgReference
