package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when any test leaves a goroutine behind: the
// four services, their HTTP servers and the embedded NATS server must all
// stop on Shutdown.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
