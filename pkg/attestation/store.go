package attestation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

// RecordSuffix follows a baseline's key (<kind>.<identifier>) to make the
// key of its attestation in the same bucket; it is
// events.AttestationKeySuffix, where the key naming lives.
const RecordSuffix = events.AttestationKeySuffix

// RecordKey is the baselines-bucket key of a target's attestation:
// events.AttestationKey.
func RecordKey(t events.Target) string { return events.AttestationKey(t) }

// IsRecordKey reports whether a baselines-bucket key holds an attestation:
// events.IsAttestationKey.
func IsRecordKey(key string) bool { return events.IsAttestationKey(key) }

// ErrNoAttestation means no attestation is stored for the target.
var ErrNoAttestation = errors.New("no attestation")

// ErrInvalidRecord means a stored attestation record cannot be read.
var ErrInvalidRecord = errors.New("invalid attestation record")

// Record is the attestation of a baseline as stored next to it in the
// baselines bucket: the signed statement and its bundle.
type Record struct {
	// Target is the baseline's target.
	Target events.Target `json:"target"`
	// BaselineDigest is the digest the statement attests (sha256:<hex>).
	BaselineDigest string `json:"baseline_digest"`
	// BaselineRevision is the bucket revision of the baseline that was
	// signed.
	BaselineRevision uint64 `json:"baseline_revision,omitempty"`
	// Statement is the signed statement, its exact bytes as a string
	// (RFC 8785 JSON text).
	Statement string `json:"statement"`
	// Bundle is the Sigstore bundle.
	Bundle json.RawMessage `json:"bundle"`
	// CertificateIdentity and OIDCIssuer name a keyless signer; KeyHint a
	// key.
	CertificateIdentity string `json:"certificate_identity,omitempty"`
	OIDCIssuer          string `json:"oidc_issuer,omitempty"`
	KeyHint             string `json:"key_hint,omitempty"`
	// SignedAt is when the attestor signed.
	SignedAt time.Time `json:"signed_at"`
}

// Validate checks the fields that must be present.
func (r Record) Validate() error {
	switch {
	case r.Target.Kind == "" || r.Target.Identifier == "":
		return fmt.Errorf("%w: no target", ErrInvalidRecord)
	case !strings.HasPrefix(r.BaselineDigest, "sha256:") || len(r.BaselineDigest) != len("sha256:")+64:
		return fmt.Errorf("%w: baseline_digest %q", ErrInvalidRecord, r.BaselineDigest)
	case r.Statement == "" || len(r.Statement) > statement.MaxSize:
		return fmt.Errorf("%w: statement of %d bytes", ErrInvalidRecord, len(r.Statement))
	case len(bytes.TrimSpace(r.Bundle)) == 0 || len(r.Bundle) > MaxBundleSize:
		return fmt.Errorf("%w: bundle of %d bytes", ErrInvalidRecord, len(r.Bundle))
	}
	return nil
}

// GetRecord reads a target's attestation from the baselines bucket:
// ErrNoAttestation when there is none.
func GetRecord(ctx context.Context, kv jetstream.KeyValue, t events.Target) (*Record, error) {
	e, err := kv.Get(ctx, RecordKey(t))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w for %s", ErrNoAttestation, t)
	}
	if err != nil {
		return nil, fmt.Errorf("read attestation of %s: %w", t, err)
	}
	var r Record
	if err := strictjson.Decode(e.Value(), &r); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidRecord, e.Key(), err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", e.Key(), err)
	}
	if r.Target != t {
		return nil, fmt.Errorf("%w: %s holds the attestation of %s", ErrInvalidRecord, e.Key(), r.Target)
	}
	return &r, nil
}

// PutRecord stores a target's attestation, replacing any earlier one, and
// returns its revision.
func PutRecord(ctx context.Context, kv jetstream.KeyValue, r Record) (uint64, error) {
	if err := r.Validate(); err != nil {
		return 0, err
	}
	value, err := json.Marshal(r)
	if err != nil {
		return 0, fmt.Errorf("encode attestation: %w", err)
	}
	rev, err := kv.Put(ctx, RecordKey(r.Target), value)
	if err != nil {
		return 0, fmt.Errorf("write attestation of %s: %w", r.Target, err)
	}
	return rev, nil
}
