package events

import (
	"strings"

	"github.com/google/uuid"
)

// IDSpace is the UUIDv5 namespace of one kind of derived event id: an
// event made because of another (a verdict of evidence, a dead letter of
// a message) has an id derived from what it is about, so that making it
// again yields the same id and the stream drops the copy. One table, so
// that no two kinds share a namespace.
type IDSpace uuid.UUID

// The namespaces of derived ids.
var (
	// VerdictIDs: a verdict's, from its evidence id.
	VerdictIDs = IDSpace(uuid.MustParse("4d5a7c0e-9b7e-4b8a-a3c4-2f0e6f1d9c37"))
	// StaleIDs: a stale verdict's, from the last authentic evidence id.
	StaleIDs = IDSpace(uuid.MustParse("0b8d3f5e-2c1a-4e6b-9f7d-5a3c8e1b2d40"))
	// BaselineChangedIDs: a baseline.changed event's, from the baseline
	// key, the change and the bucket revision.
	BaselineChangedIDs = IDSpace(uuid.MustParse("0b7c1f0e-3c55-4f86-8d0c-0f1c2c3d4e5f"))
	// AttestationCreatedIDs: an attestation.created event's, from the
	// baseline key, its digest and the bundle's digest.
	AttestationCreatedIDs = IDSpace(uuid.MustParse("5f0d6f52-2c1a-4c55-9f3e-8a1b7d0c4e21"))
	// HostKeyChangedIDs: a host.key.changed event's, from the host and
	// the registry's revision of its record.
	HostKeyChangedIDs = IDSpace(uuid.MustParse("a3e1c6d2-7b4f-4e0a-8c95-1d2f3b4a5c6e"))
	// FindingIDs: a SIEM finding's uid (services/auditor/siem), from
	// what it is about: a host and target's episode, a change, a refusal.
	FindingIDs = IDSpace(uuid.MustParse("9c1f7a52-4e0b-4d6a-b2f3-6a8e5d1c0b47"))
	// NotificationIDs: a notifier's webhook request's (webhook-id), from
	// the receiver and the alert changes it carries.
	NotificationIDs = IDSpace(uuid.MustParse("2e6b9a4d-71c8-4f3e-a5d0-8c1f6b7e9a23"))
	// DeadLetterIDs: a dead-letter record's, from the stream, the
	// consumer and the stream sequence.
	DeadLetterIDs = IDSpace(uuid.MustParse("6f0d3c8e-5a41-4a7e-9a55-3f3c1d1e7b21"))
)

// ID is the id derived in s from parts: a UUIDv5 of the parts joined by
// NUL bytes.
func (s IDSpace) ID(parts ...string) string {
	return uuid.NewSHA1(uuid.UUID(s), []byte(strings.Join(parts, "\x00"))).String()
}
