package lifecycle_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
)

type rec struct {
	name     string
	log      *[]string
	startErr error
	stopErr  error
}

func (r rec) Name() string { return r.name }
func (r rec) Start(context.Context) error {
	*r.log = append(*r.log, "start "+r.name)
	return r.startErr
}
func (r rec) Shutdown(context.Context) error {
	*r.log = append(*r.log, "stop "+r.name)
	return r.stopErr
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestRunOrdersStartAndShutdown(t *testing.T) {
	var log []string
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	boom := errors.New("boom")
	err := lifecycle.Run(ctx, quiet, time.Second, rec{"a", &log, nil, nil}, rec{"b", &log, nil, boom}, rec{"c", &log, nil, nil})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, []string{"start a", "start b", "start c", "stop c", "stop b", "stop a"}, log)
}

func TestRunStopsStartedOnStartFailure(t *testing.T) {
	var log []string
	boom := errors.New("boom")
	err := lifecycle.Run(context.Background(), quiet, time.Second, rec{"a", &log, nil, nil}, rec{"b", &log, boom, nil}, rec{"c", &log, nil, nil})
	require.ErrorIs(t, err, boom)
	assert.Equal(t, []string{"start a", "start b", "stop a"}, log)
}
