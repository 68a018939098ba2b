package natsbus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

func TestTransient(t *testing.T) {
	for err, want := range map[error]bool{
		nil:                      false,
		context.DeadlineExceeded: true,
		nats.ErrTimeout:          true,
		fmt.Errorf("x: %w", nats.ErrNoResponders): true,
		jetstream.ErrNoStreamResponse:             true,
		&jetstream.APIError{Code: 503}:            true,
		&jetstream.APIError{Code: 400}:            false,
		jetstream.ErrKeyRevisionMismatch:          false,
		nats.ErrConnectionClosed:                  false,
		errors.New("bad"):                         false,
	} {
		assert.Equal(t, want, natsbus.Transient(err), "%v", err)
	}
}

func TestRetry(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	calls := 0
	err := natsbus.Retry(ctx, func(actx context.Context) error {
		calls++
		deadline, ok := actx.Deadline()
		require.True(t, ok)
		assert.LessOrEqual(t, time.Until(deadline), natsbus.AttemptTimeout)
		if calls < 3 {
			return nats.ErrTimeout
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, 3, calls)

	calls = 0
	bad := errors.New("bad request")
	require.ErrorIs(t, natsbus.Retry(ctx, func(context.Context) error { calls++; return bad }), bad)
	assert.Equal(t, 1, calls, "a permanent error is not retried")

	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	require.ErrorIs(t, natsbus.Retry(short, func(context.Context) error { return nats.ErrTimeout }), nats.ErrTimeout, "gives up when ctx ends")
}
