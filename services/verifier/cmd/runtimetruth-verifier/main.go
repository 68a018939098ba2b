// Command runtimetruth-verifier verifies evidence snapshots from NATS
// JetStream against their baselines and publishes verdicts.
package main

import (
	"os"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

var version = "dev" // set by -ldflags "-X main.version=..."

var service = servicemain.Service[verifier.Config]{
	Name:            "verifier",
	Version:         version,
	DefaultConfig:   verifier.NewDefaultConfig,
	ShutdownTimeout: func(c verifier.Config) time.Duration { return c.ShutdownTimeout },
	New: func(cfg verifier.Config, set servicemain.Settings) (lifecycle.Component, error) {
		return verifier.New(cfg, verifier.Settings{Logger: set.Logger, Telemetry: set.Providers()})
	},
}

func main() { os.Exit(servicemain.Main(service)) }
