// Package lifecycle runs long-lived components: each starts quickly with
// Start(ctx) and drains on Shutdown(ctx); Run starts them in order, waits
// for the context to end (a signal in main), then shuts them down in
// reverse order within a deadline, collecting every error.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Component is a long-lived part of a service. Start must return quickly
// (background work uses its own context); Shutdown must drain in-flight
// work within ctx, be safe without Start and safe to call twice.
type Component interface {
	Start(ctx context.Context) error
	Shutdown(ctx context.Context) error
}

// Named is implemented by components that name themselves in logs.
type Named interface {
	Name() string
}

func name(c Component) string {
	if n, ok := c.(Named); ok {
		return n.Name()
	}
	return fmt.Sprintf("%T", c)
}

// Run starts comps in order, blocks until ctx is done, then shuts them down
// in reverse order, each with at most timeout. A start failure shuts down
// what already started and returns the error.
func Run(ctx context.Context, log *slog.Logger, timeout time.Duration, comps ...Component) error {
	var started []Component
	var err error
	for _, c := range comps {
		if err = c.Start(ctx); err != nil {
			err = fmt.Errorf("start %s: %w", name(c), err)
			break
		}
		log.Info("started", "component", name(c))
		started = append(started, c)
	}
	if err == nil {
		<-ctx.Done()
		log.Info("shutting down", "cause", context.Cause(ctx))
	}
	return errors.Join(err, Shutdown(context.WithoutCancel(ctx), log, timeout, started...))
}

// Shutdown shuts comps down in reverse order, each within timeout.
func Shutdown(ctx context.Context, log *slog.Logger, timeout time.Duration, comps ...Component) error {
	var errs []error
	for i := len(comps) - 1; i >= 0; i-- {
		c := comps[i]
		sctx, cancel := context.WithTimeout(ctx, timeout)
		if err := c.Shutdown(sctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown %s: %w", name(c), err))
		} else {
			log.Info("stopped", "component", name(c))
		}
		cancel()
	}
	return errors.Join(errs...)
}
