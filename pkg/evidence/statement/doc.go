// Package statement is the in-toto Statement v1 that attests a RuntimeTruth
// baseline: built from the baseline, written as RFC 8785 canonical JSON,
// loaded strictly and validated against the baseline exactly as RuntimeTruth
// does before it trusts a signed baseline.
//
// The statement names the baseline by digest only; the predicate does not
// repeat baseline content:
//
//	{"_type":"https://in-toto.io/Statement/v1",
//	 "predicate":{"attestation_schema_version":1,"canonicalization":"RFC8785","snapshot_schema_version":1},
//	 "predicateType":"https://sidelobe.dev/runtimetruth/attestation/v1",
//	 "subject":[{"digest":{"sha256":"<hex>"},"name":"runtimetruth-baseline"}]}
//
// Build makes those bytes (no trailing newline); WriteFile writes them with
// exclusive create, never overwriting; Parse refuses duplicate keys and any
// bytes that are not already canonical; Validate requires the exact shape
// (every key set exact, both type URIs, one subject with the fixed name, a
// sha256-only digest equal to the baseline's, the three predicate fields)
// and reports a digest that differs from the baseline's with
// ErrDigestMismatch, every other deviation with ErrInvalid.
//
// Signing and verifying the statement is the attestor's (services/attestor);
// this package is the standard-library-only model both sides share.
package statement
