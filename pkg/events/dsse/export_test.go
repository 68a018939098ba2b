package dsse

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Hooks for the tests holding signature reading to encoding/json's strict
// decoding (unknown fields disallowed), the reference.

// EnvelopeBothWays decodes a signature envelope by the decoder (ok: it
// took the document) and by the reference, and returns both results as
// JSON.
func EnvelopeBothWays(v string) (got, reference []byte, ok bool, referenceErr error) {
	f, err := decodeEnvelope([]byte(v))
	got, _ = json.Marshal(f)
	var g dsseEnvelope
	referenceErr = decodeReference([]byte(v), &g)
	reference, _ = json.Marshal(g)
	return got, reference, err == nil, referenceErr
}

// ClaimBothWays does the same for a claim.
func ClaimBothWays(b []byte) (got, reference Claim, ok bool, referenceErr error) {
	got, err := decodeClaim(b)
	referenceErr = decodeReference(b, &reference)
	return got, reference, err == nil, referenceErr
}

// decodeReference decodes exactly one JSON value into v by encoding/json,
// unknown fields disallowed.
func decodeReference(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	return nil
}
