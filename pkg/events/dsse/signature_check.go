package dsse

import (
	"crypto/ed25519"
	"fmt"
	"github.com/runtimetruth/runtimetruth/pkg/events"

	"github.com/cloudevents/sdk-go/v2/event"
)

// PendingSignature is an event's signature read, up to the Ed25519 check
// itself (ReadSignature), so that a caller holding many can check them
// together (batch verification) and then finish each with Verified.
// PublicKey, Message and Sig are what to check: Sig over Message (the
// PAE of the envelope's payload type and claim) by PublicKey, plain
// Ed25519 (RFC 8032, no context or prehash).
type PendingSignature struct {
	KeyID     string
	PublicKey ed25519.PublicKey
	Message   []byte
	Sig       []byte

	e     event.Event
	p     events.Payload
	claim []byte
}

// ReadSignature reads e's signature as VerifySignature checks it, up to
// the Ed25519 check: the envelope well formed with one signature, and the
// key key returns for its key id the key it names (errors as
// VerifySignature's).
func ReadSignature(e event.Event, p events.Payload, key func(keyID string) (ed25519.PublicKey, error)) (*PendingSignature, error) {
	env, err := envelopeOf(e)
	if err != nil {
		return nil, err
	}
	pub, err := env.publicKey(key)
	if err != nil {
		return nil, err
	}
	sig := env.Signatures[0]
	return &PendingSignature{KeyID: sig.KeyID, PublicKey: pub, Message: PAE(env.PayloadType, env.Payload), Sig: sig.Sig,
		e: e, p: p, claim: env.Payload}, nil
}

// Verified finishes VerifySignature's checks given valid, whether Sig is
// a valid signature of Message by PublicKey, as the caller checked it: a
// bad signature when it is not; else the claim read and compared with the
// event (ErrClaim).
func (s *PendingSignature) Verified(valid bool) (Signature, error) {
	if !valid {
		return Signature{}, fmt.Errorf("%w: by key %s", ErrBadSignature, s.KeyID)
	}
	got, err := readClaim(s.claim)
	if err != nil {
		return Signature{}, err
	}
	want := claimOf(&s.e, s.p)
	want.Seq = got.Seq
	if field := claimDiff(got, want); field != "" {
		return Signature{}, fmt.Errorf("%w: %s differs", ErrClaim, field)
	}
	return Signature{KeyID: s.KeyID, Claim: got}, nil
}
