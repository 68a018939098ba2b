package natsbus_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests start in-process servers, clients and consume loops; none may
// leave a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
