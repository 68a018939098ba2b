package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/retry"
)

func TestBackoffDoublesToItsCap(t *testing.T) {
	b := retry.Policy{First: time.Millisecond, Max: 5 * time.Millisecond}.Backoff()
	var got []time.Duration
	for range 5 {
		got = append(got, b.Next())
	}
	assert.Equal(t, []time.Duration{1, 2, 4, 5, 5}, scale(got, time.Millisecond))
	assert.Equal(t, 5, b.Failures())
	b.Reset()
	assert.Zero(t, b.Failures())
	assert.Equal(t, time.Millisecond, b.Next(), "Reset starts from the first wait")
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / unit
	}
	return out
}

func TestDo(t *testing.T) {
	p := retry.Policy{First: time.Microsecond, Max: 4 * time.Microsecond}
	errTransient, errFinal := errors.New("transient"), errors.New("final")
	for _, tc := range []struct {
		name      string
		results   []error
		again     func(error) bool
		wantErr   error
		wantCalls int
		wantFails []int
	}{
		{name: "at once", results: []error{nil}, wantCalls: 1},
		{name: "after failures", results: []error{errTransient, errTransient, nil}, wantCalls: 3, wantFails: []int{1, 2}},
		{name: "every error again", results: []error{errFinal, nil}, wantCalls: 2, wantFails: []int{1}},
		{name: "refused by again", results: []error{errTransient, errFinal, nil}, again: func(err error) bool { return errors.Is(err, errTransient) },
			wantErr: errFinal, wantCalls: 2, wantFails: []int{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			var fails []int
			err := p.Do(context.Background(), func(context.Context) error {
				calls++
				return tc.results[calls-1]
			}, tc.again, func(attempt int, wait time.Duration, err error) {
				fails = append(fails, attempt)
				assert.Positive(t, wait)
				assert.Error(t, err)
			})
			assert.Equal(t, tc.wantErr, err)
			assert.Equal(t, tc.wantCalls, calls)
			assert.Equal(t, tc.wantFails, fails)
		})
	}
}

func TestDoStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	boom := errors.New("down")
	calls := 0
	err := retry.Policy{First: time.Hour, Max: time.Hour}.Do(ctx, func(context.Context) error {
		calls++
		return boom
	}, nil, func(int, time.Duration, error) { cancel() })
	require.ErrorIs(t, err, boom, "the last error, not a hang for an hour")
	assert.Equal(t, 1, calls)
}

func TestSleep(t *testing.T) {
	assert.True(t, retry.Sleep(context.Background(), time.Microsecond))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, retry.Sleep(ctx, time.Hour))
}
