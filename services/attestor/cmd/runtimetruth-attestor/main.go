// Command runtimetruth-attestor signs stored baselines with Sigstore on
// request over NATS (see services/attestor).
package main

import (
	"os"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
	"github.com/runtimetruth/runtimetruth/services/attestor"
)

var version = "dev" // set by -ldflags "-X main.version=..."

var service = servicemain.Service[attestor.Config]{
	Name:            "attestor",
	Version:         version,
	DefaultConfig:   attestor.NewDefaultConfig,
	ShutdownTimeout: func(c attestor.Config) time.Duration { return c.ShutdownTimeout },
	// New loads the signing key without connecting: --check-config checks
	// the key too.
	Check: func(c attestor.Config) error { _, err := attestor.New(c, attestor.Settings{}); return err },
	New: func(cfg attestor.Config, set servicemain.Settings) (lifecycle.Component, error) {
		return attestor.New(cfg, attestor.Settings{Logger: set.Logger, Telemetry: set.Providers()})
	},
}

func main() { os.Exit(servicemain.Main(service)) }
