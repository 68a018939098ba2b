package events

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// ReadEvidence is Read[EvidenceCollected] for a consumer that goes on to
// use the snapshot: it also returns the snapshot, parsed once. It accepts
// and rejects exactly what Read accepts and rejects, with the same errors.
// The returned payload's Snapshot holds the snapshot's canonical JSON (the
// bytes its digest covers), not the bytes as received (Read's).
func ReadEvidence(m Msg) (event.Event, EvidenceCollected, *snapshot.Snapshot, error) {
	e, err := FromNATS(m.Headers(), m.Data())
	if err != nil {
		return event.Event{}, EvidenceCollected{}, nil, err
	}
	s := byType[e.Type()]
	if want := reflect.TypeFor[EvidenceCollected](); s.goType != want {
		return event.Event{}, EvidenceCollected{}, nil, invalid(ReasonUnexpectedType, "type", "%s carries %s, not %s", s.Type, s.Payload, want.Name())
	}
	var p EvidenceCollected
	if err := decodeData(s, e.Data(), &p); err != nil {
		return event.Event{}, EvidenceCollected{}, nil, err
	}
	snap, canon, err := p.check()
	if err != nil {
		return event.Event{}, EvidenceCollected{}, nil, payloadError(err)
	}
	p.Snapshot = canon
	if err := checkDecoded(s, e, p); err != nil {
		return event.Event{}, EvidenceCollected{}, nil, err
	}
	if err := checkNATSSubject(p, m.Subject()); err != nil {
		return event.Event{}, EvidenceCollected{}, nil, err
	}
	return e, p, snap, nil
}

// check is Validate, returning the snapshot parsed and its canonical JSON.
func (p EvidenceCollected) check() (*snapshot.Snapshot, []byte, error) {
	if err := checkName("host", p.Host); err != nil {
		return nil, nil, err
	}
	if err := p.Target.validate("target"); err != nil {
		return nil, nil, err
	}
	if err := checkDigest("digest", p.Digest); err != nil {
		return nil, nil, err
	}
	if p.IntervalSeconds < 0 || p.IntervalSeconds > canonjson.MaxSafeInteger {
		return nil, nil, schemaErr("interval_seconds", "%d is not within 0 and 2^53-1", p.IntervalSeconds)
	}
	if p.Baseline != nil {
		if err := p.Baseline.validate("baseline"); err != nil {
			return nil, nil, err
		}
	}
	s, err := snapshot.Parse(p.Snapshot)
	if errors.Is(err, snapshot.ErrDuplicateKind) {
		return nil, nil, fieldErr("snapshot", "%v", err)
	} else if err != nil {
		return nil, nil, schemaErr("snapshot", "%v", err)
	}
	if got := (Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}); got != p.Target {
		return nil, nil, fieldErr("target", "%s, but the snapshot's target is %s", p.Target, got)
	}
	canon, err := s.Canonical()
	if err != nil {
		return nil, nil, fieldErr("snapshot", "%v", err)
	}
	if sum := sha256.Sum256(canon); !digestEquals(p.Digest, &sum) {
		return nil, nil, fieldErr("digest", "%s, but the snapshot's digest is %s", p.Digest, "sha256:"+hex.EncodeToString(sum[:]))
	}
	return s, canon, nil
}
