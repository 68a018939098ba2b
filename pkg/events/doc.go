// Package events is the wire contract of runtimetruth: the catalog of the
// CloudEvents its services exchange over NATS JetStream, their payload
// types, and the one decoder and encoder of each payload. Two packages
// beside it carry the rest: binding maps events to and from NATS
// messages (CloudEvents over NATS), dsse signs and checks them.
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
// # Payloads
//
// DecodeData decodes an event's data as its type's payload: strictly
// (pkg/evidence/strictjson: one JSON value, names matched exactly, no name
// twice, valid UTF-8, no unknown member, no null, no empty string, every
// member the type's schema requires), then the payload's Validate, which
// holds the schema's lengths, patterns and enums (ReasonSchema) and the
// payload's own rules (ReasonInvalidPayload). DecodeEvidence does the same
// for evidence and keeps the snapshot it parsed. EncodeData is the one
// encoder. The JSON Schemas are the published specification of the same
// rules; the tests hold the decoder to them. Every rejection is an *Error
// with a Reason; a consumer terminates such a message and publishes its
// dead-letter record (binding.Reject, TypeEventRejected) to
// rt.dlq.<stream>.<host>.
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
