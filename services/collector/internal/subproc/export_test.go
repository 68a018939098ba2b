package subproc

import (
	"testing"
	"time"
)

// SetWaitDelay sets how long Run waits for the output pipes, until t ends.
func SetWaitDelay(t testing.TB, d time.Duration) {
	old := waitDelay
	waitDelay = d
	t.Cleanup(func() { waitDelay = old })
}
