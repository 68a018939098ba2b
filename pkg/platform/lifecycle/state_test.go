package lifecycle_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
)

func TestState(t *testing.T) {
	errShutdown := errors.New("shut down")
	for _, tc := range []struct {
		from      lifecycle.State
		startErr  error
		stopWork  bool
		afterStop lifecycle.State
	}{
		{from: lifecycle.New, startErr: nil, stopWork: false, afterStop: lifecycle.Stopped},
		{from: lifecycle.Running, startErr: lifecycle.ErrStarted, stopWork: true, afterStop: lifecycle.Stopping},
		{from: lifecycle.Stopping, startErr: errShutdown, stopWork: false, afterStop: lifecycle.Stopping},
		{from: lifecycle.Stopped, startErr: errShutdown, stopWork: false, afterStop: lifecycle.Stopped},
	} {
		s := tc.from
		assert.Equal(t, tc.startErr, s.CanStart(errShutdown), "CanStart from %d", tc.from)
		assert.Equal(t, tc.stopWork, s.Stop(), "Stop from %d", tc.from)
		assert.Equal(t, tc.afterStop, s, "state after Stop from %d", tc.from)
		assert.False(t, s.Stop(), "a second Stop from %d has nothing to stop", tc.from)
	}
}

func TestInstance(t *testing.T) {
	assert.Equal(t, "verifier-1", lifecycle.Instance("verifier-1"))
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	assert.Equal(t, host, lifecycle.Instance(""))
}

func TestLogger(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	assert.Same(t, log, lifecycle.Logger(log))
	nop := lifecycle.Logger(nil)
	require.NotNil(t, nop)
	assert.False(t, nop.Enabled(context.Background(), slog.LevelError), "a nil logger discards")
}
