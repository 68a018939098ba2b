// Package attestation signs RuntimeTruth baseline statements into Sigstore
// bundles and verifies them, with sigstore-go (no cosign executable).
//
// Signing (Signer): KeySigner uses a static ECDSA P-256 key (PEM PKCS #8
// or SEC 1, or cosign's encrypted format, LoadPrivateKey); KeylessSigner
// gets a short-lived certificate from Fulcio for the identity of an OIDC
// token, plus an RFC 3161 timestamp and/or a Rekor entry. Either writes a
// v0.3 bundle holding a DSSE envelope whose payload is the statement —
// what `cosign attest-blob --statement` writes, and what `cosign
// verify-blob-attestation` verifies. Neither the key, its password nor the
// token ever appears in an error.
//
// Verifying (Verifier) follows RuntimeTruth's order. The signature step
// comes first: the bundle's signature must verify under the Policy — an
// exact certificate identity and OIDC issuer against a trusted root, or a
// public key — and must cover the statement bytes exactly, either as a
// DSSE payload (attest-blob) or as a message signature (`cosign sign-blob`
// over the statement file, what RuntimeTruth writes). Only then the
// statement step: pkg/evidence/statement's strict parse and exact-shape
// validation, binding the statement to the baseline digest. A failure is an
// *Error naming its Step, wrapping ErrBundle, ErrSignature, ErrIdentity or
// a statement error.
//
// Checker is the verifier service's side: it verifies the attestation
// stored next to a baseline (Record, in the baselines bucket under
// events.AttestationKey) for a baseline that names a required identity,
// and caches the outcome by digest.
package attestation
