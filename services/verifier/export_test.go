package verifier

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
)

// WithView gives h a view of its bucket (hostsView), kept by a watch
// until stop is called, as a verifier keeps its registry's; revision is
// the revision of a host's record the view holds (0: none).
func WithView(h *Hosts) (revision func(host string) uint64, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	view := newHostsView(h.kv, slog.New(slog.DiscardHandler))
	h.view = view
	done := make(chan struct{})
	go func() { defer close(done); view.run(ctx, health.NewDuties(noop.NewMeterProvider().Meter(""))) }()
	return view.revision, func() { cancel(); <-done }
}

// CrashAt makes the running verifier stop its batches at point (a
// CrashBefore… constant), as a crash would, while crash returns true.
func (v *Verifier) CrashAt(crash func(point string) bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.handler.crash.Store(&crash)
}

// VerifyAll is verifyAll with the keys of expand (of some of sigs, or
// none) kept expanded.
func VerifyAll(sigs []*dsse.PendingSignature, expand ...*dsse.PendingSignature) []bool {
	keys := newExpandedKeys()
	for _, s := range expand {
		keys.add(s.PublicKey)
	}
	return verifyAll(sigs, keys)
}

// The verifier's record codec (records.go), for the tests outside the
// package.
var (
	EncodeRecord        = encodeRecord
	DecodeObservation   = decodeObservation
	DecodeVerdictRecord = decodeVerdictRecord
)
