package dsse

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
)

// DSSE envelopes over any payload type. An event's signature is one such
// envelope over a claim (ClaimPayloadType, WithSigner, VerifySignature);
// SignEnvelope and OpenEnvelope sign and check envelopes of other payload
// types with the same key, key id and bytes signed:
//
//	{"payloadType":"<payloadType>","payload":"<base64 of the payload>",
//	 "signatures":[{"keyid":"<KeyID>","sig":"<base64 of the signature>"}]}
//
// the Ed25519 signature over PAE(payloadType, payload). The payload type
// separates what a key signs: an envelope verifies only as the type it was
// signed as, and SignEnvelope refuses ClaimPayloadType, so no envelope it
// signs reads as an event's claim.

// ErrPayloadType is returned by SignEnvelope for a payload type it does
// not sign (empty, or ClaimPayloadType).
var ErrPayloadType = errors.New("payload type not signable")

// SignEnvelope returns the DSSE envelope, compact JSON, of payload as
// payloadType, signed with s's key. It takes no sequence number: what the
// payload asserts (a nonce, a time) is the caller's.
func (s *Signer) SignEnvelope(payloadType string, payload []byte) ([]byte, error) {
	if payloadType == "" || payloadType == ClaimPayloadType {
		return nil, fmt.Errorf("%w: %q", ErrPayloadType, payloadType)
	}
	env, err := json.Marshal(dsseEnvelope{PayloadType: payloadType, Payload: payload,
		Signatures: []dsseSignature{{KeyID: s.keyID, Sig: ed25519.Sign(s.key, PAE(payloadType, payload))}}})
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", payloadType, err)
	}
	return env, nil
}

// OpenEnvelope checks a DSSE envelope of payloadType and returns the key
// id that signed it and the payload (base64-decoded, as signed). It wraps
// ErrUnsigned when data is not a DSSE envelope or carries no signature,
// and ErrBadSignature when the payload type is another, there is not
// exactly one signature, or it does not verify with the key key returns
// for its key id (an error from key, say a key the caller does not trust,
// is returned wrapped).
func OpenEnvelope(data []byte, payloadType string, key func(keyID string) (ed25519.PublicKey, error)) (keyID string, payload []byte, err error) {
	env, err := decodeEnvelope(data)
	if err != nil {
		return "", nil, fmt.Errorf("%w: not a DSSE envelope: %w", ErrUnsigned, err)
	}
	if len(env.Signatures) == 0 {
		return "", nil, fmt.Errorf("%w: an envelope without signatures", ErrUnsigned)
	}
	if err := checkEnvelope(env, payloadType); err != nil {
		return "", nil, err
	}
	if err := env.verify(key); err != nil {
		return "", nil, err
	}
	return env.Signatures[0].KeyID, env.Payload, nil
}

// parseEnvelope decodes raw as a DSSE envelope of payloadType with one
// signature of an Ed25519 size; every error wraps ErrBadSignature.
func parseEnvelope(raw []byte, payloadType string) (dsseEnvelope, error) {
	env, err := decodeEnvelope(raw)
	if err != nil {
		return dsseEnvelope{}, fmt.Errorf("%w: the envelope is not DSSE JSON: %w", ErrBadSignature, err)
	}
	if err := checkEnvelope(env, payloadType); err != nil {
		return dsseEnvelope{}, err
	}
	return env, nil
}

// checkEnvelope checks env's payload type and that it has exactly one
// signature of an Ed25519 size.
func checkEnvelope(env dsseEnvelope, payloadType string) error {
	switch {
	case env.PayloadType != payloadType:
		return fmt.Errorf("%w: payload type %q", ErrBadSignature, env.PayloadType)
	case len(env.Signatures) != 1:
		return fmt.Errorf("%w: %d signatures, want 1", ErrBadSignature, len(env.Signatures))
	case len(env.Signatures[0].Sig) != ed25519.SignatureSize:
		return fmt.Errorf("%w: a signature of %d bytes", ErrBadSignature, len(env.Signatures[0].Sig))
	}
	return nil
}

// verify checks env's one signature over the PAE of its payload with the
// key key returns for its key id, which must be the key the id names.
func (env dsseEnvelope) verify(key func(keyID string) (ed25519.PublicKey, error)) error {
	pub, err := env.publicKey(key)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, PAE(env.PayloadType, env.Payload), env.Signatures[0].Sig) {
		return fmt.Errorf("%w: by key %s", ErrBadSignature, env.Signatures[0].KeyID)
	}
	return nil
}

// publicKey is the key key returns for the key id of env's one signature,
// which must be the key the id names.
func (env dsseEnvelope) publicKey(key func(keyID string) (ed25519.PublicKey, error)) (ed25519.PublicKey, error) {
	id := env.Signatures[0].KeyID
	pub, err := key(id)
	if err != nil {
		return nil, fmt.Errorf("key %s: %w", id, err)
	}
	if len(pub) != ed25519.PublicKeySize || !namesKey(id, pub) {
		return nil, fmt.Errorf("%w: key %s is not the key it names", ErrBadSignature, id)
	}
	return pub, nil
}
