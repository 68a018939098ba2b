package events

import (
	"errors"
	"fmt"
)

// ErrInvalid is matched (errors.Is) by every error that rejects an event:
// such an event will never decode, so a consumer terminates it (Term) and
// dead-letters it (see Reject) instead of retrying.
var ErrInvalid = errors.New("invalid event")

// Reason classifies why an event was rejected. Reasons are stable,
// lower-case tokens, fit for a metric label and for EventRejected.Reason.
type Reason string

// The reasons an event is rejected.
const (
	// ReasonMissingAttribute: a required attribute (header) is absent.
	ReasonMissingAttribute Reason = "missing_attribute"
	// ReasonInvalidAttribute: an attribute or header is malformed
	// (bad percent-encoding, a control character, an id that cannot be a
	// Nats-Msg-Id, a source that is not a URI reference, a header given
	// twice, ...).
	ReasonInvalidAttribute Reason = "invalid_attribute"
	// ReasonSpecVersion: specversion is not "1.0".
	ReasonSpecVersion Reason = "specversion"
	// ReasonUnknownType: the type is not in the catalog.
	ReasonUnknownType Reason = "unknown_type"
	// ReasonUnknownExtension: an extension attribute other than the
	// registered ones (traceparent, tracestate).
	ReasonUnknownExtension Reason = "unknown_extension"
	// ReasonContentMode: a structured-mode (Content-Type
	// application/cloudevents...) message; only binary mode is accepted.
	ReasonContentMode Reason = "content_mode"
	// ReasonTooLarge: the data or the headers exceed their limit.
	ReasonTooLarge Reason = "too_large"
	// ReasonMalformedJSON: the data is not one well-formed JSON value
	// (syntax, invalid UTF-8, lone surrogates, trailing data).
	ReasonMalformedJSON Reason = "malformed_json"
	// ReasonDuplicateKey: a JSON object in the data repeats a key.
	ReasonDuplicateKey Reason = "duplicate_key"
	// ReasonSchema: the data does not match the type's JSON Schema
	// (unknown fields included).
	ReasonSchema Reason = "schema"
	// ReasonInvalidPayload: the data matches the schema but not the
	// payload's own rules (a digest that does not match the embedded
	// snapshot, a verdict whose status differs from its report, ...).
	ReasonInvalidPayload Reason = "invalid_payload"
	// ReasonUnexpectedType: a valid event of another type than the one the
	// consumer decodes (Decode[Verdict] on an evidence event).
	ReasonUnexpectedType Reason = "unexpected_type"
	// ReasonSubjectMismatch: the subject attribute or the NATS subject is
	// not the one the payload implies.
	ReasonSubjectMismatch Reason = "subject_mismatch"
	// ReasonPermanent is not produced by this package: a handler uses it in
	// a dead-letter record for a valid event it permanently failed to
	// handle, or one it gave up on after the last delivery.
	ReasonPermanent Reason = "permanent"
)

// Error rejects an event: why (Reason), where (Field: an attribute such as
// "source", a header such as "ce-id", or a path into the data such as
// "/report/status"), and the detail. It matches ErrInvalid.
type Error struct {
	Reason Reason
	Field  string
	Err    error
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %v (%s)", ErrInvalid, e.Err, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %v (%s)", ErrInvalid, e.Field, e.Err, e.Reason)
}

// Unwrap returns the detail.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every *Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// ReasonOf returns the reason of a rejected event's error, or "" when err
// does not reject an event.
func ReasonOf(err error) Reason {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Reason
	}
	return ""
}

// Invalid is the *Error of a rejected event: reason, field, and the
// detail formatted.
func Invalid(reason Reason, field, format string, args ...any) *Error {
	return &Error{Reason: reason, Field: field, Err: fmt.Errorf(format, args...)}
}
