package attestation

import (
	"errors"
	"fmt"
)

// Step is a verification step, in the order Verify runs them.
type Step string

// The verification steps.
const (
	// StepSignature: the bundle, its signature over the statement, and
	// the signer (certificate identity and issuer, or public key).
	StepSignature Step = "signature"
	// StepStatement: the statement's exact shape and its binding to the
	// baseline digest (only after the signature verified).
	StepStatement Step = "statement"
)

// Errors of verification, each wrapped in an *Error naming its step.
var (
	// ErrBundle: the bundle cannot be read (not JSON, not a Sigstore
	// bundle, too large).
	ErrBundle = errors.New("invalid bundle")
	// ErrSignature: the signature, certificate chain, timestamps or
	// transparency log entry do not verify, or the bundle does not sign
	// the given statement.
	ErrSignature = errors.New("signature verification failed")
	// ErrIdentity: the signature verifies, but not from the required
	// identity and issuer (or it is a key signature where a certificate
	// is required).
	ErrIdentity = errors.New("signer identity not verified")
)

// Error is a failed verification: the step that failed and why. Match its
// cause with errors.Is (ErrSignature, ErrIdentity, statement.ErrInvalid,
// statement.ErrNotCanonical, statement.ErrDigestMismatch, ...).
type Error struct {
	Step Step
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("attestation %s: %v", e.Step, e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// StepOf returns the step of a verification error, or "" for another
// error.
func StepOf(err error) Step {
	var e *Error
	if errors.As(err, &e) {
		return e.Step
	}
	return ""
}
