package events

import (
	"bytes"
	"encoding/json"
)

// Hooks for the tests holding the direct paths of signature reading to
// encoding/json's.

// EnvelopeBothWays decodes a signature envelope by the direct path
// (fastOK: it took the document) and by encoding/json's strict decoding,
// and returns both results as JSON.
func EnvelopeBothWays(v string) (fast, general []byte, fastOK bool, generalErr error) {
	f, fastOK := fastEnvelope([]byte(v))
	fast, _ = json.Marshal(f)
	var g dsseEnvelope
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.DisallowUnknownFields()
	generalErr = decodeOne(dec, &g)
	general, _ = json.Marshal(g)
	return fast, general, fastOK, generalErr
}

// ClaimBothWays does the same for a claim.
func ClaimBothWays(b []byte) (fast, general Claim, fastOK bool, generalErr error) {
	fast, fastOK = fastClaim(b)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	generalErr = decodeOne(dec, &general)
	return fast, general, fastOK, generalErr
}
