package events

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// NewVerdictMsg is NewMsg for a verdict, for a producer of many: it
// returns exactly what NewMsg returns (the same message, event and
// errors), but checks the data without running the whole verdict schema
// each time. Validate already holds every member of the verdict to what
// the schema requires (the tests hold the two to the same verdicts); what
// is left is the report, which is checked against the schema's report
// rules (schemas/verdict.v1.schema.json#/properties/report, with the
// report schema it refers to) once per distinct report: a verifier's
// reports repeat, pass after pass.
//
// The verdict's JSON is written directly (marshalVerdict), and the
// message and event are built directly (see newMsg). The data is, as
// NewMsg's, v as encoding/json writes it with HTML escaping off: passed
// through json.HTMLEscape, it is json.Marshal(v).
func NewVerdictMsg(source string, v Verdict, opts ...Option) (*nats.Msg, event.Event, error) {
	var report []byte // the report's JSON, as the data carries it
	enc := func() ([]byte, error) {
		data, raw, err := marshalVerdict(v)
		report = raw
		return data, err
	}
	check := func(s *Spec, p Payload, data []byte) error { return checkVerdictReport(s, p, data, report) }
	return newMsg(source, v, enc, check, opts...)
}

// marshalVerdict encodes v as marshal does, without reflection
// (appendVerdict). It returns the report's JSON too, a part of data (nil
// without a report).
func marshalVerdict(v Verdict) (data, report []byte, err error) {
	data, start, end := appendVerdict(make([]byte, 0, 512), v)
	if v.Report != nil {
		report = data[start:end:end]
	}
	return data, report, nil
}

// checkVerdictReport is validateData for a verdict that passed Validate,
// given the report's JSON as the data carries it (nil: encoded here).
func checkVerdictReport(s *Spec, p Payload, data, raw []byte) error {
	if len(data) > MaxDataSize {
		return invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	v, ok := p.(Verdict)
	if !ok || s.SchemaURI != schemaBase+"verdict/v1.json" {
		return validateData(s, data)
	}
	if v.Report == nil {
		return nil
	}
	if raw == nil {
		var err error
		if raw, err = marshalJSON(v.Report); err != nil {
			return fmt.Errorf("encode report: %w", err)
		}
	}
	key := sha256.Sum256(raw)
	if checkedReports.has(key) {
		return nil
	}
	sch, err := reportRules()
	if err != nil {
		return err
	}
	tree, err := jsontree.Parse(raw)
	if err != nil {
		return &Error{Reason: ReasonMalformedJSON, Field: "/report", Err: err}
	}
	if err := sch.Validate(instance(tree)); err != nil {
		field := "/report"
		if ve, ok := errors.AsType[*jsonschema.ValidationError](err); ok {
			err = schemaError(ve)
			if loc := firstLocation(ve); loc != "/" {
				field += loc
			}
		}
		return &Error{Reason: ReasonSchema, Field: field, Err: err}
	}
	checkedReports.add(key)
	return nil
}

// reportRules is the verdict schema's rules for its report member.
var reportRules = sync.OnceValues(func() (*jsonschema.Schema, error) {
	c, _, err := newCompiler()
	if err != nil {
		return nil, err
	}
	sch, err := c.Compile(schemaBase + "verdict/v1.json#/properties/report")
	if err != nil {
		return nil, fmt.Errorf("compile the verdict schema's report rules: %w", err)
	}
	return sch, nil
})

// reportSet remembers the digests of reports that passed the report
// rules; it forgets them all past maxCheckedReports.
type reportSet struct {
	mu   sync.Mutex
	seen map[[sha256.Size]byte]struct{}
}

const maxCheckedReports = 4096

var checkedReports = &reportSet{seen: map[[sha256.Size]byte]struct{}{}}

func (r *reportSet) has(k [sha256.Size]byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.seen[k]
	return ok
}

func (r *reportSet) add(k [sha256.Size]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.seen) >= maxCheckedReports {
		clear(r.seen)
	}
	r.seen[k] = struct{}{}
}
