// Package retry is the one retry policy of runtimetruth: an exponential
// backoff (a first wait, doubling up to a cap) that every loop which tries
// something again uses, either whole (Policy.Do) or step by step
// (Backoff, for loops that interleave their own work), and Sleep, a wait
// that ends with its context.
package retry

import (
	"context"
	"time"
)

// Policy is an exponential backoff: the wait after the first failure is
// First, and each further failure doubles it, up to Max.
type Policy struct {
	First, Max time.Duration
}

// Backoff is the state of a policy across the failures of one loop.
func (p Policy) Backoff() *Backoff { return &Backoff{p: p, cur: p.First} }

// Backoff is a policy's wait over consecutive failures; Reset after a
// success. It is not safe for concurrent use.
type Backoff struct {
	p       Policy
	cur     time.Duration
	attempt int
}

// Next counts a failure and returns the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	d := b.cur
	b.cur = min(2*b.cur, b.p.Max)
	b.attempt++
	return d
}

// Failures is how many failures Next counted since the last Reset.
func (b *Backoff) Failures() int { return b.attempt }

// Reset starts over from the first wait.
func (b *Backoff) Reset() { b.cur, b.attempt = b.p.First, 0 }

// Wait counts a failure and sleeps the wait before the next attempt, or
// until ctx ends; it reports whether ctx is still live.
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Do runs op until it returns nil, an error again rejects (again nil:
// every error is tried again), or ctx ends, waiting by p between attempts.
// onFail, when set, sees each failure that is tried again: its number
// (from 1), the wait before the next attempt and the error. Do returns
// op's last error: nil on success, else the error it gave up on (or the one
// before ctx ended).
func (p Policy) Do(ctx context.Context, op func(ctx context.Context) error, again func(error) bool,
	onFail func(attempt int, wait time.Duration, err error)) error {
	b := p.Backoff()
	for {
		err := op(ctx)
		if err == nil || ctx.Err() != nil || again != nil && !again(err) {
			return err
		}
		wait := b.Next()
		if onFail != nil {
			onFail(b.Failures(), wait, err)
		}
		if !Sleep(ctx, wait) {
			return err
		}
	}
}

// Sleep waits d, or until ctx ends; it reports whether ctx is still live.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
