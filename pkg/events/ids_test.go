package events_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// Derived ids are UUIDv5s of their parts joined by NUL bytes, each kind in
// its own namespace (the ids already published stay the same).
func TestIDSpaces(t *testing.T) {
	spaces := map[string]events.IDSpace{
		"4d5a7c0e-9b7e-4b8a-a3c4-2f0e6f1d9c37": events.VerdictIDs,
		"0b8d3f5e-2c1a-4e6b-9f7d-5a3c8e1b2d40": events.StaleIDs,
		"0b7c1f0e-3c55-4f86-8d0c-0f1c2c3d4e5f": events.BaselineChangedIDs,
		"5f0d6f52-2c1a-4c55-9f3e-8a1b7d0c4e21": events.AttestationCreatedIDs,
		"a3e1c6d2-7b4f-4e0a-8c95-1d2f3b4a5c6e": events.HostKeyChangedIDs,
		"9c1f7a52-4e0b-4d6a-b2f3-6a8e5d1c0b47": events.FindingIDs,
		"2e6b9a4d-71c8-4f3e-a5d0-8c1f6b7e9a23": events.NotificationIDs,
		"6f0d3c8e-5a41-4a7e-9a55-3f3c1d1e7b21": events.DeadLetterIDs,
	}
	seen := map[string]bool{}
	for ns, s := range spaces {
		id := s.ID("EVIDENCE", "verifier", "42")
		assert.Equal(t, uuid.NewSHA1(uuid.MustParse(ns), []byte("EVIDENCE\x00verifier\x0042")).String(), id, ns)
		assert.False(t, seen[id], "%s: an id of another space", ns)
		seen[id] = true
		assert.Equal(t, uuid.NewSHA1(uuid.MustParse(ns), []byte("x")).String(), s.ID("x"), ns)
	}
}
