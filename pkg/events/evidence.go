package events

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// DecodeEvidence decodes the data of an evidence.collected event as
// DecodeData does, and also returns the snapshot, parsed once; the
// payload's Snapshot is the snapshot's canonical JSON (what its digest
// covers), not the bytes as received.
func DecodeEvidence(data []byte) (EvidenceCollected, *snapshot.Snapshot, error) {
	var p EvidenceCollected
	if err := decodeData(byType[TypeEvidenceCollected], data, &p); err != nil {
		return EvidenceCollected{}, nil, err
	}
	snap, canon, err := p.check()
	if err != nil {
		return EvidenceCollected{}, nil, payloadError(err)
	}
	p.Snapshot = canon
	return p, snap, nil
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
	s, canon, err := snapshot.Decode(p.Snapshot)
	if errors.Is(err, snapshot.ErrDuplicateKind) {
		return nil, nil, fieldErr("snapshot", "%v", err)
	} else if err != nil {
		return nil, nil, schemaErr("snapshot", "%v", err)
	}
	if got := (Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}); got != p.Target {
		return nil, nil, fieldErr("target", "%s, but the snapshot's target is %s", p.Target, got)
	}
	sum := sha256.Sum256(canon)
	if digest := "sha256:" + hex.EncodeToString(sum[:]); digest != p.Digest {
		return nil, nil, fieldErr("digest", "%s, but the snapshot's digest is %s", p.Digest, digest)
	}
	return s, canon, nil
}
