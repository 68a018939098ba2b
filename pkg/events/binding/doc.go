// Package binding carries runtimetruth's events over NATS: CloudEvents 1.0
// in binary content mode, as the CloudEvents NATS binding (1.0.3)
// specifies. Each attribute is a "ce-<name>" header with a percent-encoded
// value and the JSON payload is the message body; the id is also the
// Nats-Msg-Id header, so JetStream drops a duplicate published within the
// stream's duplicate window; trace context rides in the traceparent and
// tracestate extensions (TraceCarrier, TraceHeaderCarrier); a producer's
// signature in the rtsignature extension (WithSigner; package dsse). The
// envelope is sdk-go's event.Event; transport is nats.go's jetstream
// package, used directly.
//
// New and NewMsg build events through the sdk-go setters; ToNATS and
// FromNATS encode and decode the envelope, one function each way
// (AttributesOf gives an event's attributes as plain values). Decode
// decodes an event's payload (events.DecodeData), Read a message,
// ReadEvidence evidence with its snapshot. Decoding is strict: a required
// attribute missing, a specversion other than 1.0, a type not in the
// catalog, an extension other than trace context and the signature, a
// malformed header value, an oversized event (see events' limits), data
// its payload refuses, or a subject that does not match the payload: each
// fails with an *events.Error carrying a Reason, never a panic. Reject
// builds the dead-letter record of a message a consumer gives up on.
package binding
