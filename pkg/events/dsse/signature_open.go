package dsse

import (
	"crypto/ed25519"
	"fmt"
	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/cloudevents/sdk-go/v2/types"
)

// OpenSignature checks a signature envelope as carried in ExtSignature,
// apart from its event: well formed (the claim's payload type, one Ed25519
// signature), by the key its key id names (ParseKeyID), over the PAE of
// the claim. It returns the claim, for the caller to compare with what it
// holds of the event (ClaimDiff); trusting the key is the caller's
// (a registry). It is VerifySignature without the event, for a record
// that keeps an event's envelope and payload digest but not its payload
// bytes: a link of the audit chain.
func OpenSignature(envelope string) (Signature, error) {
	env, err := claimEnvelope(envelope)
	if err != nil {
		return Signature{}, err
	}
	sig := env.Signatures[0]
	pub, err := ParseKeyID(sig.KeyID)
	if err != nil {
		return Signature{}, fmt.Errorf("%w: %w", ErrBadSignature, err)
	}
	if !ed25519.Verify(pub, PAE(env.PayloadType, env.Payload), sig.Sig) {
		return Signature{}, fmt.Errorf("%w: by key %s", ErrBadSignature, sig.KeyID)
	}
	c, err := readClaim(env.Payload)
	if err != nil {
		return Signature{}, err
	}
	return Signature{KeyID: sig.KeyID, Claim: c}, nil
}

// ClaimDiff names the first field in which two claims differ, their
// sequence numbers aside ("id", "type", …, "payload_sha256"); "" when
// they agree.
func ClaimDiff(a, b Claim) string { return claimDiff(a, b) }

// CheckClaim checks, without the signature itself, that an event's
// signature envelope (as carried in ExtSignature) can be the event's: the
// envelope well formed (the claim's payload type, one signature of an
// Ed25519 size; ErrBadSignature), and its claim saying what the event's
// attributes say (id, type, source, subject, time) and naming
// dataSHA256, the hex SHA-256 of the data bytes as received, as the
// payload's digest (ErrClaim, naming the first field that differs). It
// returns the claim. Its host and target, which need the payload decoded,
// are not compared, nor is the key trusted: a signature that passes may
// still be refused by a verifier. It needs no key and no state, so that a
// reader of every message (the auditor) tells evidence that cannot be
// authentic (a real event's headers on other data, the id changed) from
// evidence that may be, for the cost of decoding the envelope.
func CheckClaim(e event.Event, dataSHA256 string) (Claim, error) {
	env, err := envelopeOf(e)
	if err != nil {
		return Claim{}, err
	}
	got, err := readClaim(env.Payload)
	if err != nil {
		return Claim{}, err
	}
	want := Claim{ID: e.ID(), Type: e.Type(), Source: e.Source(), Subject: e.Subject(), Time: types.FormatTime(e.Time()),
		Host: got.Host, Target: got.Target, PayloadSHA256: dataSHA256}
	if field := claimDiff(got, want); field != "" {
		return Claim{}, fmt.Errorf("%w: %s differs", ErrClaim, field)
	}
	return got, nil
}
