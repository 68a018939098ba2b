package events

import (
	"crypto/ed25519"
	"fmt"
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
