package auditor

import (
	"context"

	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
)

// WrapSinks makes Start wrap every sink it opens (fault injection).
func (a *Auditor) WrapSinks(f func(Sink) Sink) { a.wrapSink = f }

// DropAcks makes the stream loops skip acknowledging a committed batch
// whenever f returns true (lost acknowledgements).
func (a *Auditor) DropAcks(f func() bool) { a.dropAcks = f }

// Abort stops the auditor as a crash would: the stream loops stop at
// once, in-flight messages are neither finished nor given back, no last
// checkpoint is sent; the sinks are closed and the connection too.
func (a *Auditor) Abort() {
	a.mu.Lock()
	a.aborting = true
	a.state = lifecycle.Stopped
	cancel, done, c, ls := a.cancel, a.done, a.client, a.leases
	a.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	a.drains.stop()
	<-done
	ls.abandon()
	a.mu.Lock()
	w, sinks := a.w, a.sinks
	a.mu.Unlock()
	if w != nil {
		_ = w.Close()
	} else {
		_ = sinks.close()
	}
	c.Close()
}

var _ = context.Background
