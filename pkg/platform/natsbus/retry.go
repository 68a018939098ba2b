package natsbus

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/platform/retry"
)

// AttemptTimeout bounds one JetStream request made through Retry. A request
// that reaches a stream or consumer leader that just went away gets no
// answer; a short attempt lets the next one find the new leader.
const AttemptTimeout = 2 * time.Second

// Retry runs op until it succeeds, fails with an error that is not
// Transient, or ctx ends; each attempt gets at most AttemptTimeout. op must
// be safe to repeat: a publish with a Nats-Msg-Id, a read, an ack, a
// compare-and-set write.
func Retry(ctx context.Context, op func(ctx context.Context) error) error {
	return retryPolicy.Do(ctx, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, AttemptTimeout)
		defer cancel()
		return op(actx)
	}, Transient, nil)
}

// The waits between attempts: of Retry's requests; of the consume loop's
// pulls after a failed or empty one; of a dead letter's publish.
var (
	retryPolicy    = retry.Policy{First: 10 * time.Millisecond, Max: 500 * time.Millisecond}
	pullPolicy     = retry.Policy{First: 50 * time.Millisecond, Max: 5 * time.Second}
	deadPostPolicy = retry.Policy{First: 20 * time.Millisecond, Max: time.Second}
)

// StreamFull reports whether a publish failed because its stream is full
// (its bytes, messages or a subject's messages at their limit, with new
// messages discarded): it passes only when something is removed, which
// for a stream kept by age (DLQ: 30 days) is not soon.
func StreamFull(err error) bool {
	apiErr, ok := errors.AsType[*jetstream.APIError](err)
	return ok && apiErr.ErrorCode == jetstream.ErrorCode(10077) && strings.HasPrefix(apiErr.Description, "maximum ")
}

// Transient reports whether err may go away by itself: a timeout, no
// responders (no leader yet), a connection reconnecting, or a JetStream
// API error with a 5xx code (temporarily unavailable), but not a full
// stream (StreamFull), which the caller decides about: it does not pass
// within a retry's wait.
func Transient(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, nats.ErrConnectionReconnecting), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, jetstream.ErrConsumerLeadershipChanged):
		return true
	}
	if apiErr, ok := errors.AsType[*jetstream.APIError](err); ok {
		return apiErr.Code >= 500 && !StreamFull(err)
	}
	return false
}
