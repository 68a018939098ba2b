package topology

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
)

// TestEnsureCallRetriesTransient checks that a call failing the way a
// forming or recovering cluster does is retried until it succeeds, that
// any other failure is returned at once, and that the retries stop with
// ctx, returning the last failure.
func TestEnsureCallRetriesTransient(t *testing.T) {
	noPeers := &jetstream.APIError{Code: 500, ErrorCode: codeClusterNoPeers, Description: "no suitable peers for placement, peer offline"}
	for _, tc := range []struct {
		name      string
		errs      []error // returned by the attempts in turn; then nil
		wantCalls int
		wantErr   error
	}{
		{"success", nil, 1, nil},
		{"no peers, then placed", []error{noPeers, noPeers}, 3, nil},
		{"no responders, timeout, then answered", []error{fmt.Errorf("create: %w", nats.ErrNoResponders), context.DeadlineExceeded}, 3, nil},
		{"not available", []error{&jetstream.APIError{ErrorCode: codeClusterNotAvail}}, 2, nil},
		{"for good", []error{jetstream.ErrStreamNotFound, noPeers}, 1, jetstream.ErrStreamNotFound},
		{"lost races, made again at once", []error{jetstream.ErrStreamNameAlreadyInUse, jetstream.ErrConsumerExists}, 3, nil},
		{"lost four races in a row", []error{jetstream.ErrConsumerExists, jetstream.ErrConsumerExists, jetstream.ErrConsumerExists, jetstream.ErrConsumerExists}, 4, jetstream.ErrConsumerExists},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := ensureCall(t.Context(), func(ctx context.Context) error {
				calls++
				_, ok := ctx.Deadline()
				assert.True(t, ok, "each attempt has its own deadline")
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			assert.Equal(t, tc.wantCalls, calls)
			if tc.wantErr == nil {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, tc.wantErr)
			}
		})
	}

	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	calls := 0
	err := ensureCall(ctx, func(context.Context) error { calls++; return noPeers })
	var api *jetstream.APIError
	assert.True(t, errors.As(err, &api), "the last failure: %v", err)
	assert.Greater(t, calls, 1)
}
