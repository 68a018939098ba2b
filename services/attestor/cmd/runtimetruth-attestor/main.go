// Command runtimetruth-attestor signs stored baselines with Sigstore on
// request over NATS (see services/attestor).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/services/attestor"
)

var version = "dev" // set by -ldflags "-X main.version=..."

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runtimetruth-attestor: error: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("runtimetruth-attestor", flag.ContinueOnError)
	path := fs.String("config", "", "config file (YAML, TOML or JSON); RUNTIMETRUTH_ATTESTOR_* variables override it")
	check := fs.Bool("check-config", false, "validate the configuration and exit")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *showVersion {
		fmt.Println(version)
		return nil
	}
	cfg := attestor.NewDefaultConfig()
	if err := config.Load(*path, "RUNTIMETRUTH_ATTESTOR", &cfg, nil); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "attestor", "version", version)
	a, err := attestor.New(cfg, attestor.Settings{Logger: log}) // loads the key: -check-config checks it too
	if err != nil || *check {
		return err
	}
	return lifecycle.Run(ctx, log, cfg.ShutdownTimeout, a)
}
