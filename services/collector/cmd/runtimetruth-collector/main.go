// Command runtimetruth-collector collects evidence snapshots of this host's
// targets and publishes them as CloudEvents onto NATS JetStream.
package main

import (
	"os"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
	"github.com/runtimetruth/runtimetruth/services/collector"
)

var version = "dev" // set with -ldflags "-X main.version=…"

var service = servicemain.Service[collector.Config]{
	Name:            "collector",
	Version:         version,
	DefaultConfig:   collector.NewDefaultConfig,
	ShutdownTimeout: func(c collector.Config) time.Duration { return c.ShutdownTimeout },
	New: func(cfg collector.Config, set servicemain.Settings) (lifecycle.Component, error) {
		return collector.New(cfg, collector.Settings{Logger: set.Logger, Telemetry: set.Providers()})
	},
	Actions: map[string]servicemain.Action[collector.Config]{
		"print-identity": {
			Usage: "print this host's name and the public key it signs events with (generating the key on first use), then exit",
			Run:   collector.PrintIdentity,
		},
	},
}

func main() { os.Exit(servicemain.Main(service)) }
