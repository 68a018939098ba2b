package events_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The JetStream tests start in-process servers and clients; none may leave
// a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
