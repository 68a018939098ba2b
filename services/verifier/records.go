package verifier

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

// The verifier's key-value records, each with one encoder and one decoder:
//
//	record                      bucket              encoder            decoder
//	Observation                 evidence-latest     encodeRecord       decodeObservation
//	VerdictRecord               verdicts-latest     encodeRecord       decodeVerdictRecord
//	events.HostRecord           hosts (<host>)      encodeRecord       decodeHostRecord
//	Rejections                  hosts (rejections.) encodeRecord       decodeRejections
//	events.Baseline             baselines           encodeRecord       decodeBaseline
//
// A record is written by encoding/json and read by one strict decode
// (strictjson.Decode: an unknown member or data after the value is
// refused) into its type, followed by its Validate where it has rules.
// The bytes are the ones every earlier verifier wrote (encoding/json's,
// or bytes held equal to them), so that a record written before an
// upgrade reads after it (records_test.go keeps one of each).

// encodeRecord is the encoder of every record the verifier stores.
func encodeRecord(v any) ([]byte, error) { return json.Marshal(v) }

// decodeRecord reads data strictly into a T, then checks it (check may
// be nil).
func decodeRecord[T any](data []byte, check func(*T) error) (T, error) {
	var v T
	if err := strictjson.Decode(data, &v); err != nil {
		return v, err
	}
	if check != nil {
		if err := check(&v); err != nil {
			return v, err
		}
	}
	return v, nil
}

// ErrInvalidRecord is why a stored record that decodes breaks its rules.
var ErrInvalidRecord = errors.New("invalid record")

func invalidRecord(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidRecord, fmt.Sprintf(format, args...))
}

// decodeObservation is the decoder of an evidence-latest record.
func decodeObservation(data []byte) (Observation, error) {
	return decodeRecord(data, (*Observation).Validate)
}

// Validate checks what every stored latest snapshot has: its host,
// target, digest, evidence and snapshot (a JSON object); AtBaseline is
// never stored.
func (o *Observation) Validate() error {
	switch {
	case o.Host == "":
		return invalidRecord("latest snapshot: no host")
	case o.Target.Kind == "" || o.Target.Identifier == "":
		return invalidRecord("latest snapshot of %s: no target", o.Host)
	case o.Digest == "" || o.EvidenceID == "" || len(o.Snapshot) == 0 || o.Snapshot[0] != '{':
		return invalidRecord("latest snapshot of %s on %s: no digest, evidence id or snapshot document", o.Target, o.Host)
	case o.AtBaseline:
		return invalidRecord("latest snapshot of %s on %s: at_baseline is never stored", o.Target, o.Host)
	}
	return nil
}

// decodeVerdictRecord is the decoder of a verdicts-latest record.
func decodeVerdictRecord(data []byte) (VerdictRecord, error) {
	return decodeRecord(data, (*VerdictRecord).Validate)
}

// Validate checks a verdict record: the verdict of the evidence it
// names, at most maxHandled marks in each list. The verdict itself was
// checked when it was published (events.NewMsg); its rules are the event
// contract's, which a later version may tighten, and a record must stay
// readable across an upgrade, its handled marks above all (a record that
// does not read loses them: see latestBucket.read).
func (r *VerdictRecord) Validate() error {
	switch {
	case r.ID == "" || r.EvidenceID == "":
		return invalidRecord("verdict record: no id or evidence id")
	case r.Verdict.EvidenceID != r.EvidenceID:
		return invalidRecord("verdict record of evidence %s holds the verdict of %s", r.EvidenceID, r.Verdict.EvidenceID)
	case len(r.Handled) > maxHandled || len(r.Unconfirmed) > maxHandled:
		return invalidRecord("verdict record of evidence %s: more than %d marks", r.EvidenceID, maxHandled)
	case r.IntervalSeconds < 0:
		return invalidRecord("verdict record of evidence %s: interval_seconds %d", r.EvidenceID, r.IntervalSeconds)
	}
	return nil
}

// decodeHostRecord is the decoder of a host's entry in the registry.
func decodeHostRecord(data []byte) (events.HostRecord, error) {
	return decodeRecord[events.HostRecord](data, nil)
}

// decodeRejections is the decoder of a host's rejection log.
func decodeRejections(data []byte) (Rejections, error) {
	return decodeRecord(data, (*Rejections).Validate)
}

// Validate checks a rejection log: a host, at most maxRejections recent
// refusals, each counted within the total.
func (r *Rejections) Validate() error {
	if r.Host == "" {
		return invalidRecord("rejection log: no host")
	}
	if len(r.Recent) > maxRejections {
		return invalidRecord("rejection log of %s: %d recent refusals, over %d", r.Host, len(r.Recent), maxRejections)
	}
	for _, x := range r.Recent {
		if x.Seq == 0 || x.Seq > r.Total {
			return invalidRecord("rejection log of %s: refusal %d of %d", r.Host, x.Seq, r.Total)
		}
	}
	return nil
}
