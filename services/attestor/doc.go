// Package attestor signs reviewed baselines with Sigstore on request over
// NATS.
//
// An Attestor answers sign requests (SignRequest, JSON) on the core NATS
// subject events.AttestSubject, rt.ctl.attest (queue group "attestor", so
// instances share them):
// it reads the target's baseline from the baselines bucket, checks that the
// snapshot, its digest and the requested digest agree, builds the in-toto
// statement (pkg/evidence/statement), signs it (package attestation: a
// static key, or keyless with Fulcio and a timestamp authority or Rekor),
// stores the statement and bundle next to the baseline
// (events.AttestationKey, <kind>.<identifier>.attestation) and publishes an
// attestation.created event (rt.attestation.<target>, stream BASELINES).
// The reply (SignReply) names the digests, the signer, the stored record
// and the event; RequestSign is the client side.
//
// The signing key, its password and the OIDC token never appear in an
// event, a reply, a log line or an error: the configuration holds file
// paths only, and signing errors are redacted.
//
// The verifier trusts a baseline that names a required identity only when
// the stored attestation verifies (attestation.Checker).
package attestor
