package main

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain/servicemaintest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMainConformance(t *testing.T) {
	servicemaintest.Conformance(t, service, "shutdown_timeout: -1s\n", true)
}
