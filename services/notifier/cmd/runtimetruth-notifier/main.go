// Command runtimetruth-notifier turns verdicts and runnable.modified events
// into alerts that fire and resolve in Prometheus Alertmanager (see
// services/notifier).
package main

import (
	"os"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
	"github.com/runtimetruth/runtimetruth/services/notifier"
)

var version = "dev" // set by -ldflags "-X main.version=..."

var service = servicemain.Service[notifier.Config]{
	Name:            "notifier",
	Version:         version,
	DefaultConfig:   notifier.NewDefaultConfig,
	ShutdownTimeout: func(c notifier.Config) time.Duration { return c.ShutdownTimeout },
	New: func(cfg notifier.Config, set servicemain.Settings) (lifecycle.Component, error) {
		return notifier.New(cfg, notifier.Settings{Logger: set.Logger, Telemetry: set.Providers()})
	},
}

func main() { os.Exit(servicemain.Main(service)) }
