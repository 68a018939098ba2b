package events

import (
	"crypto/sha256"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// Hooks for the external tests.

// DecodeEvidence is the evidence.collected decoding ReadEvidence runs: the
// payload (its Snapshot canonical) and the snapshot.
func DecodeEvidence(data []byte) (EvidenceCollected, *snapshot.Snapshot, error) {
	var p EvidenceCollected
	if err := decodeData(byType[TypeEvidenceCollected], data, &p); err != nil {
		return EvidenceCollected{}, nil, err
	}
	s, canon, err := p.check()
	if err != nil {
		return EvidenceCollected{}, nil, payloadError(err)
	}
	p.Snapshot = canon
	return p, s, nil
}

// CheckSchema runs the JSON Schema of type typ on data.
func CheckSchema(typ string, data []byte) error { return validateData(byType[typ], data) }

// Compiler returns a JSON Schema compiler that knows every payload schema
// and the report schema by their $id, and asserts formats.
func Compiler() (*jsonschema.Compiler, error) {
	c, _, err := newCompiler()
	return c, err
}

var (
	// EncodeData is New's encoding of a payload.
	EncodeData = encodeData
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

// DecodeData decodes data as the payload of type typ (Decode without the
// event).
func DecodeData(typ string, data []byte) (Payload, error) {
	s := byType[typ]
	return s.decode(s, data)
}
