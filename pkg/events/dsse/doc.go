// Package dsse signs runtimetruth's events and checks their signatures. A
// collector signs every event it publishes with its own Ed25519 key
// (Signer, binding.WithSigner): the signature covers a Claim that names
// the event, the host and target it is about, a per-key sequence number
// and the SHA-256 of the data, in a DSSE envelope carried in the
// rtsignature extension (ExtSignature). VerifySignature checks one with a
// key lookup; ReadSignature and Verified split it around a caller's own
// Ed25519 check; CheckClaim checks, without a key, that an envelope can be
// its event's; OpenSignature reads one without an event. SignEnvelope and
// OpenEnvelope sign and check envelopes of other payload types (a
// collect-now reply) with the same key. Envelopes and claims are decoded
// by pkg/evidence/strictjson.
package dsse
