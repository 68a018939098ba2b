package lifecycle

import (
	"errors"
	"log/slog"
	"os"
)

// ErrStarted is returned by Start on a component that runs already.
var ErrStarted = errors.New("already started")

// State is where a component is in its life. It has no lock of its own:
// the component keeps it under the lock its Start and Shutdown hold.
type State uint8

// The states, in the only order a component goes through them.
const (
	New State = iota
	Running
	Stopping
	Stopped
)

// CanStart returns nil for a new component, errShutdown for one that was
// shut down (or is shutting down), and ErrStarted for one that runs.
func (s State) CanStart(errShutdown error) error {
	switch s {
	case New:
		return nil
	case Running:
		return ErrStarted
	}
	return errShutdown
}

// Stop begins a shutdown: a running component becomes Stopping and Stop
// reports true (there is work to stop); a new one becomes Stopped, and one
// stopping or stopped stays so, both reporting false.
func (s *State) Stop() bool {
	switch *s {
	case Running:
		*s = Stopping
		return true
	case New:
		*s = Stopped
	}
	return false
}

// Logger is the logger a component logs to: log, or one that discards
// when log is nil (a component's Settings.Logger left unset).
func Logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}

// Instance is the name a service instance goes by: name when set, else
// the host's name, else "unknown".
func Instance(name string) string {
	if name != "" {
		return name
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown"
}
