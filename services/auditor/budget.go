package auditor

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// Byte budget of the messages the auditor holds (Config.MaxInflightBytes):
// every pull asks the server for at most the bytes it took from the budget
// (jetstream.FetchMaxBytes), messages read back from a stream take theirs
// before each read, and a batch gives its bytes back once it is
// acknowledged or handed back. The stream loops share one budget.
const (
	// pullOverhead is room, beyond a message's headers and data, for the
	// subject and reply subject the server counts against a pull's max
	// bytes.
	pullOverhead = 4 << 10
	// minPull is the least a pull or a read asks for: the largest message
	// a stream stores (its MaxMsgSize, events.MaxEventSize) and its
	// subjects, so that every message fits some pull.
	minPull = events.MaxEventSize + pullOverhead
	// maxPull bounds one pull, whatever the budget: the server queues a
	// pull's messages for the connection at once, and drops a client whose
	// queue passes its max_pending (64 MiB by default) as a slow consumer.
	// Four streams pulling at once stay under half of that.
	maxPull = 8 << 20
	// DefaultMaxInflightBytes is the default Config.MaxInflightBytes.
	DefaultMaxInflightBytes = 64 << 20
	// MinInflightBytes is the least Config.MaxInflightBytes: room for a
	// pull of the largest message per default stream and for as much again
	// in the batches being written. More streams need more
	// (Config.Validate: a pull's worth per stream and one more).
	MinInflightBytes = 8 * minPull
)

// pullSize is the most one pull, or one batch's read-back, takes from a
// budget of size bytes shared by streams loops: half the budget split
// between the loops, between minPull and maxPull. A loop waiting for bytes
// holds at most that much that it cannot give back first (the rest of the
// pull it is sealing), so the loop first in line always gets its bytes once
// the batches being written are acknowledged, as long as size is at least
// (streams+1)*minPull.
func pullSize(size int64, streams int) int64 {
	return min(max(size/int64(2*max(streams, 1)), minPull), maxPull)
}

// budget is a byte semaphore whose waiters are served in order, so that a
// loop waiting for the bytes of a large read is not overtaken by smaller
// pulls.
type budget struct {
	mu      sync.Mutex
	size    int64
	used    int64
	waiters []*budgetWaiter
}

type budgetWaiter struct {
	min, max int64
	got      int64
	ready    chan struct{}
}

func newBudget(size int64) *budget { return &budget{size: size} }

// take waits until at least lo bytes are free (and nobody waits before
// it), then takes up to hi of them; it returns how many, or ctx's error.
func (b *budget) take(ctx context.Context, lo, hi int64) (int64, error) {
	b.mu.Lock()
	if len(b.waiters) == 0 && b.size-b.used >= lo {
		n := min(hi, b.size-b.used)
		b.used += n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{min: lo, max: hi, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return w.got, nil
	case <-ctx.Done():
		b.mu.Lock()
		defer b.mu.Unlock()
		select {
		case <-w.ready: // served meanwhile: give it back
			b.used -= w.got
			b.serve()
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.serve() // the next waiter may fit now
		}
		return 0, ctx.Err()
	}
}

// tryTake takes up to hi free bytes without waiting (none while others
// wait).
func (b *budget) tryTake(hi int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 || hi <= 0 {
		return 0
	}
	n := max(min(hi, b.size-b.used), 0)
	b.used += n
	return n
}

// settle turns a reservation of took bytes into the held bytes: it gives
// back what was not used, or takes the excess (a message larger than its
// estimate) without waiting.
func (b *budget) settle(took, held int64) {
	if took != held {
		b.give(took - held)
	}
}

// give returns n bytes (negative n takes them without waiting).
func (b *budget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.serve()
}

// serve hands free bytes to the waiters in order.
func (b *budget) serve() {
	for len(b.waiters) > 0 {
		w := b.waiters[0]
		free := b.size - b.used
		if free < w.min {
			return
		}
		w.got = min(w.max, free)
		b.used += w.got
		b.waiters = b.waiters[1:]
		close(w.ready)
	}
}

// held returns the bytes taken.
func (b *budget) held() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// msgBytes is the size of a message as the server counts it against a
// pull's max bytes: subject, reply subject, header block and data.
func msgBytes(subject, reply string, h nats.Header, data []byte) int64 {
	n := len(subject) + len(reply) + len(data)
	if len(h) > 0 {
		n += len("NATS/1.0\r\n\r\n")
		for k, vs := range h {
			for _, v := range vs {
				n += len(k) + len(v) + len(": \r\n")
			}
		}
	}
	return int64(n)
}
