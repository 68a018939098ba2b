package events

import (
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
)

// NewVerdictMsg is NewMsg for a verdict, for a producer of many: it
// returns exactly what NewMsg returns (the same message, event and
// errors), but checks the data without running the whole verdict schema
// each time. Validate already holds every member of the verdict to what
// the schema requires (the tests hold the two to the same verdicts); what
// is left is the report, which report.Validate checks: its Go type and
// Validate together hold it to the schema's report rules
// (schemas/verdict.v2.schema.json#/properties/report, with the report
// schema it refers to; package report's tests hold Validate to that
// schema, and this package's tests hold NewVerdictMsg to NewMsg).
//
// The verdict's JSON is written directly (marshalVerdict), and the
// message and event are built directly (see newMsg). The data is, as
// NewMsg's, v as encoding/json writes it with HTML escaping off: passed
// through json.HTMLEscape, it is json.Marshal(v).
func NewVerdictMsg(source string, v Verdict, opts ...Option) (*nats.Msg, event.Event, error) {
	enc := func() ([]byte, error) { return marshalVerdict(v), nil }
	return newMsg(source, v, enc, checkVerdictReport, opts...)
}

// marshalVerdict encodes v as marshal does, without reflection
// (appendVerdict).
func marshalVerdict(v Verdict) []byte { return appendVerdict(make([]byte, 0, 512), v) }

// checkVerdictReport is validateData for a verdict that passed Validate.
func checkVerdictReport(s *Spec, p Payload, data []byte) error {
	if len(data) > MaxDataSize {
		return invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	v, ok := p.(Verdict)
	if !ok || s.SchemaURI != schemaBase+"verdict/v2.json" {
		return validateData(s, data)
	}
	if v.Report == nil {
		return nil
	}
	if err := v.Report.Validate(); err != nil {
		return &Error{Reason: ReasonSchema, Field: "/report", Err: err}
	}
	return nil
}
