// Command runtimetruth-auditor appends every event of the pipeline's
// JetStream streams to tamper-evident hash chains in ClickHouse, JSONL and
// syslog.
package main

import (
	"os"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
	"github.com/runtimetruth/runtimetruth/services/auditor"
)

var version = "dev" // set by -ldflags "-X main.version=..."

var service = servicemain.Service[auditor.Config]{
	Name:            "auditor",
	Version:         version,
	DefaultConfig:   auditor.NewDefaultConfig,
	ShutdownTimeout: func(c auditor.Config) time.Duration { return c.ShutdownTimeout },
	New: func(cfg auditor.Config, set servicemain.Settings) (lifecycle.Component, error) {
		return auditor.New(cfg, auditor.Settings{Logger: set.Logger, Telemetry: set.Providers(), Version: version})
	},
}

func main() { os.Exit(servicemain.Main(service)) }
