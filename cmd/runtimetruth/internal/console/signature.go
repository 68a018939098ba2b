package console

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Signature is a baseline's Sigstore attestation as a target's page shows
// it: the record `runtimetruth baseline sign` stored next to the
// baseline, and what the verifier made of it. The console verifies
// nothing itself: a baseline that requires a signer is checked by the
// verifier before each verdict (attestation.Checker), which fails the
// verdict, naming why, when no attestation by that signer verifies.
type Signature struct {
	// Record is the stored attestation (nil: none); LogIndex its
	// transparency log entry's index ("" without one); Stale that it
	// attests another digest than the baseline's.
	Record   *attestation.Record
	LogIndex string
	Stale    bool
	// Required is the signer the baseline requires (nil: none).
	Required *events.SignerIdentity
	// Verified says the verifier's latest verdict against this baseline
	// checked the required signer's attestation; Failed why it did not.
	Verified bool
	Failed   string
}

// readSignature reads the attestation of t's baseline of digest (with
// the signer it requires) and reads the verifier's check of it in the
// latest verdict.
func readSignature(ctx context.Context, js jetstream.JetStream, t Target, digest string, required *events.SignerIdentity) (*Signature, error) {
	kv, err := js.KeyValue(ctx, topology.BucketBaselines)
	if err != nil {
		return nil, err
	}
	sig := &Signature{Required: required}
	rec, err := attestation.GetRecord(ctx, kv, t.Target)
	switch {
	case errors.Is(err, attestation.ErrNoAttestation):
	case err != nil:
		return nil, err
	default:
		sig.Record, sig.Stale, sig.LogIndex = rec, rec.BaselineDigest != digest, logIndex(rec.Bundle)
	}
	v := t.Record.Verdict
	switch {
	case required == nil:
	case v.Status == events.StatusError && strings.Contains(v.Error, attestation.ErrAttestationRequired.Error()):
		sig.Failed = v.Error
	case v.Status != events.StatusError && v.BaselineDigest == digest:
		sig.Verified = true
	}
	return sig, nil
}

// logIndex is the log index of a Sigstore bundle's first transparency
// log entry, "" when it has none or cannot be read (the verifier, not
// the page, judges the bundle).
func logIndex(bundle []byte) string {
	var b struct {
		VerificationMaterial struct {
			TlogEntries []struct {
				LogIndex json.RawMessage `json:"logIndex"` // an int64: a string in protobuf JSON
			} `json:"tlogEntries"`
		} `json:"verificationMaterial"`
	}
	if json.Unmarshal(bundle, &b) != nil || len(b.VerificationMaterial.TlogEntries) == 0 {
		return ""
	}
	return strings.Trim(string(b.VerificationMaterial.TlogEntries[0].LogIndex), `"`)
}
