// Command runtimetruth-collector collects evidence snapshots of this host's
// targets and publishes them as CloudEvents onto NATS JetStream.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/services/collector"
)

var version = "dev" // set with -ldflags "-X main.version=…"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runtimetruth-collector: error: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("runtimetruth-collector", flag.ContinueOnError)
	path := fs.String("config", "", "config file (YAML, TOML or JSON); RUNTIMETRUTH_COLLECTOR_* variables override it")
	check := fs.Bool("check-config", false, "validate the configuration and exit")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		fmt.Println(version)
		return nil
	}
	cfg := collector.NewDefaultConfig()
	if err := config.Load(*path, "RUNTIMETRUTH_COLLECTOR", &cfg, nil); err != nil {
		return err
	}
	if *check {
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "collector", "version", version)
	slog.SetDefault(log)
	c, err := collector.New(cfg, collector.Settings{Logger: log})
	if err != nil {
		return err
	}
	return lifecycle.Run(ctx, log, cfg.ShutdownTimeout, c)
}
