package binding

import (
	"reflect"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// Decode checks e (as FromNATS does) and decodes its data as T
// (events.DecodeData); the payload must imply e's type and subject
// attribute. An event of another type fails with events.ReasonUnexpectedType.
// Decode[events.Payload] decodes any catalog type: the payload is one of
// the payload types, by value (events.EvidenceCollected, events.Verdict, ...). Every
// error is an *events.Error.
func Decode[T events.Payload](e event.Event) (T, error) {
	if err := checkEvent(e); err != nil {
		var zero T
		return zero, err
	}
	return decodeAs[T](e)
}

// decodeAs is Decode of an event checkEvent (or FromNATS) accepted.
func decodeAs[T events.Payload](e event.Event) (T, error) {
	var zero T
	s, err := carries[T](e)
	if err != nil {
		return zero, err
	}
	p, err := events.DecodeData(s.Type, e.Data())
	if err != nil {
		return zero, err
	}
	if err := checkDecoded(s, e, p); err != nil {
		return zero, err
	}
	return p.(T), nil
}

// carries returns the spec of e's type, which must carry T.
func carries[T events.Payload](e event.Event) (events.Spec, error) {
	s, _ := events.Lookup(e.Type())
	if want := reflect.TypeFor[T](); want != reflect.TypeFor[events.Payload]() && s.GoType() != want {
		return s, events.Invalid(events.ReasonUnexpectedType, "type", "%s carries %s, not %s", s.Type, s.Payload, want.Name())
	}
	return s, nil
}

// Msg is a received message; jetstream.Msg has this method set.
type Msg interface {
	Subject() string
	Headers() nats.Header
	Data() []byte
}

// Read decodes a received message as an event carrying T (FromNATS, then
// Decode), and checks that it arrived on the subject the payload implies.
// Read[events.Payload] reads any catalog type.
func Read[T events.Payload](m Msg) (event.Event, T, error) {
	var zero T
	e, err := FromNATS(m.Headers(), m.Data())
	if err != nil {
		return event.Event{}, zero, err
	}
	p, err := decodeAs[T](e)
	if err != nil {
		return event.Event{}, zero, err
	}
	if err := checkNATSSubject(p, m.Subject()); err != nil {
		return event.Event{}, zero, err
	}
	return e, p, nil
}

// ReadEvidence is Read[events.EvidenceCollected] for a consumer that goes
// on to use the snapshot: it also returns the snapshot, parsed once
// (events.DecodeEvidence). It accepts and rejects exactly what Read
// accepts and rejects, with the same errors. The returned payload's
// Snapshot holds the snapshot's canonical JSON (the bytes its digest
// covers), not the bytes as received (Read's).
func ReadEvidence(m Msg) (event.Event, events.EvidenceCollected, *snapshot.Snapshot, error) {
	e, err := FromNATS(m.Headers(), m.Data())
	if err != nil {
		return event.Event{}, events.EvidenceCollected{}, nil, err
	}
	s, err := carries[events.EvidenceCollected](e)
	if err != nil {
		return event.Event{}, events.EvidenceCollected{}, nil, err
	}
	p, snap, err := events.DecodeEvidence(e.Data())
	if err != nil {
		return event.Event{}, events.EvidenceCollected{}, nil, err
	}
	if err := checkDecoded(s, e, p); err != nil {
		return event.Event{}, events.EvidenceCollected{}, nil, err
	}
	if err := checkNATSSubject(p, m.Subject()); err != nil {
		return event.Event{}, events.EvidenceCollected{}, nil, err
	}
	return e, p, snap, nil
}

func checkNATSSubject(p events.Payload, subject string) error {
	if want := p.NATSSubject(); subject != want {
		return events.Invalid(events.ReasonSubjectMismatch, "nats subject", "arrived on %q, but the payload goes to %q", subject, want)
	}
	return nil
}

// checkDecoded checks that p, decoded from e's data, implies e's type and
// subject attribute.
func checkDecoded(s events.Spec, e event.Event, p events.Payload) error {
	if p.Type() != s.Current() {
		return events.Invalid(events.ReasonInvalidPayload, "type", "the payload is a %s event, not %s", p.Type(), e.Type())
	}
	if want := p.Subject(); e.Subject() != want {
		return events.Invalid(events.ReasonSubjectMismatch, "subject", "%q, but the payload's subject is %q", e.Subject(), want)
	}
	return nil
}
