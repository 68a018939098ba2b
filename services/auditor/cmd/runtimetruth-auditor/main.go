// Command runtimetruth-auditor appends every event of the pipeline's
// JetStream streams to tamper-evident hash chains in ClickHouse, JSONL and
// syslog.
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
	"github.com/runtimetruth/runtimetruth/services/auditor"
)

var version = "dev" // set by -ldflags "-X main.version=..."

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "runtimetruth-auditor: error: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("runtimetruth-auditor", flag.ContinueOnError)
	path := fs.String("config", "", "config file (YAML, TOML or JSON); RUNTIMETRUTH_AUDITOR_* variables override it")
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
	cfg := auditor.NewDefaultConfig()
	if err := config.Load(*path, "RUNTIMETRUTH_AUDITOR", &cfg, nil); err != nil {
		return err
	}
	if *check {
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "auditor", "version", version)
	a, err := auditor.New(cfg, auditor.Settings{Logger: log})
	if err != nil {
		return err
	}
	return lifecycle.Run(ctx, log, cfg.ShutdownTimeout, a)
}
