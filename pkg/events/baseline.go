package events

import (
	"encoding/json"
	"time"
)

// Baseline is the reviewed snapshot a target is verified against, as kept
// in the baselines bucket under its target's key (topology.BaselineKey):
// the verifier writes it on approval and verifies against it, the attestor
// signs it. This is the record's one definition.
type Baseline struct {
	// Target is the snapshot's target.
	Target Target `json:"target"`
	// Snapshot is the schema-v1 snapshot document, canonical JSON (RFC
	// 8785).
	Snapshot json.RawMessage `json:"snapshot"`
	// Digest is the snapshot's digest, sha256:<hex> over the canonical
	// JSON: the same value `runtimetruth digest` prints for it.
	Digest string `json:"digest"`
	// Protect narrows verification to these selectors (kind or
	// kind.field, as `runtimetruth verify --protect`); empty verifies the
	// whole snapshot.
	Protect []string `json:"protect,omitempty"`
	// RequiredIdentity is the signer an attestation of this baseline must
	// come from; nil for none.
	RequiredIdentity *SignerIdentity `json:"required_identity,omitempty"`
	// ApprovedAt and ApprovedBy say when and by whom it was approved.
	ApprovedAt time.Time `json:"approved_at"`
	ApprovedBy string    `json:"approved_by,omitempty"`
	// Host is the host whose snapshot was approved; empty for a snapshot
	// put directly.
	Host string `json:"host,omitempty"`
}

// SignerIdentity names a keyless (Sigstore) signer: an OIDC issuer and the
// certificate identity it vouches for.
type SignerIdentity struct {
	Issuer   string `json:"issuer"`
	Identity string `json:"identity"`
}
