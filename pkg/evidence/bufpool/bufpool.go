// Package bufpool keeps scratch byte buffers for reuse across goroutines:
// the buffers that canonical forms and hash bodies are written into before
// they are hashed or copied out at their size. The events of most messages
// (a few KiB) fit a pooled buffer; the buffer of a large one (up to 1 MiB
// and what the auditor adds to it) is left to the garbage collector rather
// than kept, one per core, after a burst of large events.
package bufpool

import "sync"

// MaxPooled is the largest capacity Put keeps.
const MaxPooled = 64 << 10

var buffers = sync.Pool{New: func() any { return new([]byte) }}

// Get returns an empty buffer, with the capacity an earlier user left it.
func Get() *[]byte { return buffers.Get().(*[]byte) }

// Put gives b back for reuse unless it grew past MaxPooled. b must not be
// used after.
func Put(b *[]byte) {
	if cap(*b) <= MaxPooled {
		*b = (*b)[:0]
		buffers.Put(b)
	}
}
