// Command runtimetruth inspects the effective runtime of a target, verifies
// it against a reviewed baseline (exit 0 pass, 2 drift, 1 error), and
// computes baseline digests.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, cli.IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}, version, os.Args[1:])
	stop()
	os.Exit(code)
}
