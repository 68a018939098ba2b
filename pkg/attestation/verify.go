package attestation

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
)

// MaxBundleSize bounds a bundle; a keyless one with a transparency log
// entry is a few KiB.
const MaxBundleSize = 1 << 20

// Policy says which signer to trust: a keyless identity (Identity and
// Issuer, matched exactly, against TrustedMaterial) or a public key.
type Policy struct {
	// Identity is the certificate identity (the SAN: an e-mail address or
	// a URI such as https://github.com/ORG/REPO/.github/workflows/W@REF).
	Identity string
	// Issuer is the OIDC issuer (https://token.actions.githubusercontent.com).
	Issuer string
	// TrustedMaterial holds the Fulcio CAs, and the timestamp
	// authorities, Rekor logs and CT logs of a keyless deployment
	// (LoadTrustedRoot). What it holds is what is required: Rekor logs
	// make a transparency log entry mandatory, CT logs an embedded SCT.
	TrustedMaterial root.TrustedMaterial
	// PublicKey is the key of a key-based signature (LoadPublicKey).
	PublicKey crypto.PublicKey
}

// Keyless reports whether the policy names an identity.
func (p Policy) Keyless() bool { return p.Identity != "" || p.Issuer != "" }

// Validate checks that the policy names exactly one kind of signer.
func (p Policy) Validate() error {
	switch {
	case p.PublicKey != nil && p.Keyless():
		return errors.New("verify with a public key or with a certificate identity and issuer, not both")
	case p.PublicKey == nil && !p.Keyless():
		return errors.New("verification needs a certificate identity and OIDC issuer, or a public key")
	case p.Keyless() && (strings.TrimSpace(p.Identity) == "" || strings.TrimSpace(p.Issuer) == ""):
		return errors.New("verification needs both a certificate identity and an OIDC issuer")
	case p.Keyless() && p.TrustedMaterial == nil:
		return errors.New("keyless verification needs a trusted root")
	}
	return nil
}

// Result is what a verification established.
type Result struct {
	// Envelope reports a DSSE bundle (attest-blob, runtimetruth attest);
	// false is a message signature over the statement bytes (sign-blob).
	Envelope bool
	// Identity and Issuer are the verified keyless signer.
	Identity, Issuer string
	// KeyHint is the verified key's hint (key-based).
	KeyHint string
	// Timestamps are the verified signing times (signed timestamps or
	// transparency log entries); empty for a key signature.
	Timestamps []time.Time
	// CurrentTime reports that the certificate was checked at the current
	// time, for lack of a signed time: the result holds only until
	// NotAfter.
	CurrentTime bool
	// NotAfter is the end of the signing certificate's validity; zero for
	// a key.
	NotAfter time.Time
	// StatementDigest is sha256:<hex> over the statement bytes.
	StatementDigest string
	// BaselineDigest is the verified baseline's sha256:<hex> (Verify
	// only).
	BaselineDigest string
}

// Verifier verifies attestations under one policy. It is safe for
// concurrent use.
type Verifier struct {
	policy  Policy
	keyTM   root.TrustedMaterial
	keyHint string
	id      verify.CertificateIdentity
}

// NewVerifier returns a verifier for a policy.
func NewVerifier(p Policy) (*Verifier, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	v := &Verifier{policy: p}
	if p.PublicKey != nil {
		ec, ok := p.PublicKey.(*ecdsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("%w: not an ECDSA public key", ErrKey)
		}
		sv, err := signature.LoadVerifier(ec, crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrKey, err)
		}
		key := root.NewExpiringKey(sv, time.Time{}, time.Time{})
		v.keyTM = root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) { return key, nil })
		if v.keyHint, err = KeyHint(ec); err != nil {
			return nil, err
		}
		return v, nil
	}
	// Both exact: no regular expressions.
	id, err := verify.NewShortCertificateIdentity(p.Issuer, "", p.Identity, "")
	if err != nil {
		return nil, err
	}
	v.id = id
	return v, nil
}

// Policy returns the verifier's policy.
func (v *Verifier) Policy() Policy { return v.policy }

// VerifySignature runs the signature step: the bundle must be a valid
// Sigstore bundle whose signature verifies under the policy and covers
// exactly stmt — a DSSE envelope whose payload is stmt, byte for byte, or a
// message signature over stmt (cosign sign-blob). Failures are *Error of
// StepSignature.
func (v *Verifier) VerifySignature(stmt, bundleJSON []byte) (*Result, error) {
	fail := func(err error) (*Result, error) { return nil, &Error{Step: StepSignature, Err: err} }
	if len(bundleJSON) > MaxBundleSize {
		return fail(fmt.Errorf("%w: larger than %d bytes", ErrBundle, MaxBundleSize))
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(bundleJSON); err != nil {
		return fail(fmt.Errorf("%w: %w", ErrBundle, err))
	}
	tm, opts := v.keyTM, []verify.VerifierOption{verify.WithNoObserverTimestamps()}
	if v.policy.Keyless() {
		tm, opts = v.policy.TrustedMaterial, keylessOptions(&b, v.policy.TrustedMaterial)
	}
	sev, err := verify.NewVerifier(tm, append(opts, verify.WithoutStatementPredicate())...)
	if err != nil {
		return fail(fmt.Errorf("%w: %w", ErrSignature, err))
	}

	env := b.GetDsseEnvelope()
	var artifact verify.ArtifactPolicyOption
	switch {
	case env != nil:
		if env.GetPayloadType() != statement.PayloadType {
			return fail(fmt.Errorf("%w: DSSE payload type %q, want %q", ErrSignature, env.GetPayloadType(), statement.PayloadType))
		}
		artifact = verify.WithoutArtifactUnsafe() // the payload is compared with stmt below
	case b.GetMessageSignature() != nil:
		artifact = verify.WithArtifact(bytes.NewReader(stmt))
	default:
		return fail(fmt.Errorf("%w: neither a DSSE envelope nor a message signature", ErrBundle))
	}
	signer := verify.WithKey()
	if v.policy.Keyless() {
		if vc, err := b.VerificationContent(); err == nil && vc.Certificate() == nil {
			return fail(fmt.Errorf("%w: the bundle is signed with a key, not a certificate", ErrIdentity))
		}
		signer = verify.WithCertificateIdentity(v.id)
	}
	res, err := sev.Verify(&b, verify.NewPolicy(artifact, signer))
	if err != nil {
		return fail(classify(err))
	}
	if env != nil && !bytes.Equal(env.GetPayload(), stmt) {
		return fail(fmt.Errorf("%w: the bundle signs a different statement", ErrSignature))
	}

	out := &Result{Envelope: env != nil, StatementDigest: statement.Digest(stmt)}
	for _, ts := range res.VerifiedTimestamps {
		if ts.Type == "CurrentTime" {
			continue // not a signed time
		}
		out.Timestamps = append(out.Timestamps, ts.Timestamp)
	}
	if c := res.Signature.Certificate; c != nil {
		out.Identity, out.Issuer = c.SubjectAlternativeName, c.Issuer
		if vc, err := b.VerificationContent(); err == nil && vc.Certificate() != nil {
			out.NotAfter = vc.Certificate().NotAfter
		}
		out.CurrentTime = len(out.Timestamps) == 0
	} else {
		out.KeyHint = v.keyHint
	}
	return out, nil
}

// Verify verifies an attestation of a baseline in RuntimeTruth's order:
// first the signature step (VerifySignature), then — only if it passed —
// the statement step: stmt must be RFC 8785 canonical JSON of the exact
// shape, attesting baselineDigest (sha256:<hex>) with schemaVersion.
func (v *Verifier) Verify(baselineDigest string, schemaVersion int, stmt, bundleJSON []byte) (*Result, error) {
	res, err := v.VerifySignature(stmt, bundleJSON)
	if err != nil {
		return nil, err
	}
	if err := statement.Verify(stmt, baselineDigest, schemaVersion); err != nil {
		return nil, &Error{Step: StepStatement, Err: err}
	}
	res.BaselineDigest = "sha256:" + strings.TrimPrefix(baselineDigest, "sha256:")
	return res, nil
}

// keylessOptions requires what the trusted material can check: a
// transparency log entry when it lists Rekor logs, an embedded SCT when it
// lists CT logs. The certificate is checked at a verified signing time (a
// log entry's or a timestamp authority's); with neither in the bundle, at
// the current time.
func keylessOptions(b *bundle.Bundle, tm root.TrustedMaterial) []verify.VerifierOption {
	var opts []verify.VerifierOption
	if len(tm.CTLogs()) > 0 {
		opts = append(opts, verify.WithSignedCertificateTimestamps(1))
	}
	ts, _ := b.Timestamps()
	switch {
	case len(tm.RekorLogs()) > 0:
		opts = append(opts, verify.WithTransparencyLog(1), verify.WithObserverTimestamps(1))
	case len(ts) > 0:
		opts = append(opts, verify.WithSignedTimestamps(1))
	default:
		opts = append(opts, verify.WithCurrentTime())
	}
	return opts
}

func classify(err error) error {
	var noMatch *verify.ErrNoMatchingCertificateIdentity
	switch {
	case errors.As(err, &noMatch):
		return fmt.Errorf("%w: %w", ErrIdentity, noMatch)
	case strings.Contains(err.Error(), "entity was not signed with a certificate"):
		return fmt.Errorf("%w: the bundle is signed with a key, not a certificate", ErrIdentity)
	case strings.Contains(err.Error(), "expected key signature, not certificate"):
		return fmt.Errorf("%w: the bundle is signed with a certificate, not the key", ErrSignature)
	}
	return fmt.Errorf("%w: %w", ErrSignature, err)
}

// LoadTrustedRoot reads a Sigstore trusted root (trusted_root.json, as
// `cosign trusted-root create` writes it or the TUF repository serves it).
func LoadTrustedRoot(path string) (*root.TrustedRoot, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	tr, err := root.NewTrustedRootFromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("trusted root %s: %w", path, err)
	}
	return tr, nil
}
