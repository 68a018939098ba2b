// Package logtest is a log sink for tests: a Buffer that a logger (or any
// writer used from other goroutines, such as a command's output) writes to
// while the test reads it back.
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use: an io.Writer to give
// to slog or a command, read with String. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
