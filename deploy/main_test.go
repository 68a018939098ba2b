package deploy_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if builtDir != "" {
			_ = os.RemoveAll(builtDir)
		}
		os.Exit(code)
	}))
}
