// Package events is the wire contract of runtimetruth: the catalog of
// CloudEvents its services exchange over NATS JetStream, and a strict codec
// for them.
//
// # Catalog
//
// Each event type (Catalog, Lookup) has a versioned name under
// "dev.runtimetruth." ending in ".v1", a Go payload type, a JSON Schema
// (SchemaFS; its $id is the event's dataschema), a golden example under
// testdata/, the convention of its subject attribute and the NATS subject it
// goes to. A payload decides its own type, subject attribute and NATS
// subject (the Payload interface), so they cannot disagree with the data.
//
// # Codec
//
// Events use CloudEvents 1.0 in binary content mode over NATS headers, as
// the CloudEvents NATS binding (1.0.3) specifies: each attribute in a
// "ce-<name>" header with a percent-encoded value, the JSON payload as the
// message body. The id is also the Nats-Msg-Id header, so JetStream drops a
// duplicate published within the stream's duplicate window; trace context
// rides in the traceparent and tracestate extensions (TraceCarrier); a
// producer's signature in the rtsignature extension (WithSigner,
// VerifySignature, or ReadSignature and Verified around a caller's own
// Ed25519 check: a DSSE envelope over a claim of the event; SignEnvelope
// and OpenEnvelope sign and check envelopes of other payload types with
// the same key). The
// envelope is sdk-go's event.Event; transport is nats.go's jetstream
// package, used directly.
//
// New and NewMsg build events; ToNATS and FromNATS encode and decode the
// envelope through the sdk-go setters (ParseAttributes the same, returning
// the attributes); Decode decodes the payload (Decode[Payload] of any
// type), Read a message (Read[Payload] of any type), ReadEvidence evidence
// with its snapshot. Each contract has one decoder and one encoder: the
// data is decoded strictly by pkg/evidence/strictjson into the payload
// type and checked by its Validate, and encoded by one encoder. The JSON
// Schemas specify the same rules; the tests hold the decoder to them.
// Decoding is strict: a required attribute missing, a specversion other
// than 1.0, a type not in the catalog, an extension other than trace
// context and the signature, a malformed header value, an oversized event
// (see the limits), malformed JSON, a duplicate key, an unknown field, a
// null or an empty string, a required member missing, data that breaks
// its schema's or its payload's rules, or a subject that does not match
// the payload: each fails with an *Error carrying a Reason, never a panic.
// A consumer terminates such a message and publishes its dead-letter
// record (Reject, TypeEventRejected) to rt.dlq.<stream>.<host>.
//
// # Subjects
//
// Subjects start with "rt."; host names, target kinds and identifiers
// become subject tokens through Token, a reversible encoding into the
// characters NATS subjects and key-value keys both allow.
//
// The package carries no infrastructure: the streams, consumers and
// key-value buckets are pkg/platform/topology's. Package eventstest holds
// the golden files' fixture payloads, signtest per-host signing keys.
package events
