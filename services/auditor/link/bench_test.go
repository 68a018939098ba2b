package link_test

import (
	"testing"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// BenchmarkPrepare measures preparing one event for its chain (the
// envelope check, the event's canonical form and its meta), the part of an
// append that does not depend on the chain's head, over the auditor
// benchmark's verdict mix.
func BenchmarkPrepare(b *testing.B) {
	const n = 64
	msgs := make([]*link.Message, n)
	for i := range n {
		m := auditortest.Msg(b, auditortest.Payload(b, hosts, i), i)
		msgs[i] = auditortest.Message(b, "VERDICTS", uint64(i+1), m)
	}
	source := events.Source("auditor", "bench")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		link.Prepare(msgs[i%n], source, false)
		i++
	}
}
