package auditor

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// idSink is a sink that holds event ids only and counts the lookups.
type idSink struct {
	ids    map[idKey]bool
	asked  int
	broken error
}

func (s *idSink) Name() string                                        { return "ids" }
func (s *idSink) Write(context.Context, []link.Record) error          { return nil }
func (s *idSink) Close() error                                        { return nil }
func (s *idSink) Heads(context.Context) (map[string]link.Head, error) { return nil, nil }
func (s *idSink) EventIDs(_ context.Context, fn func(chain, id string) error) error {
	for k := range s.ids {
		if err := fn(k.chain, k.id); err != nil {
			return err
		}
	}
	return nil
}

func (s *idSink) Linked(_ context.Context, chain string, ids []string) (map[string]bool, error) {
	s.asked++
	if s.broken != nil {
		return nil, s.broken
	}
	out := map[string]bool{}
	for _, id := range ids {
		if s.ids[idKey{chain, id}] {
			out[id] = true
		}
	}
	return out, nil
}

// TestSealAllLinksEachIDOnce: ids the sink holds (found through the
// filter and a lookup), ids sealed before (found in memory, no lookup) and
// ids twice in one batch are left out and counted; the same id in another
// chain is not; a sink that cannot answer fails the batch unsealed.
func TestSealAllLinksEachIDOnce(t *testing.T) {
	ctx := context.Background()
	hosts := []string{"a", "b"}
	msgs := make([]*link.Message, 20)
	for i := range msgs {
		m := auditortest.Msg(t, auditortest.Payload(t, hosts, i), i)
		msgs[i] = auditortest.Message(t, "VERDICTS", uint64(i+1), m)
	}
	sink := &idSink{ids: map[idKey]bool{}}
	var inSink []string
	for _, m := range msgs[:10] {
		p := link.Prepare(m, "/auditor/t", false)
		sink.ids[idKey{p.Chain, p.Meta.ID}] = true
		inSink = append(inSink, p.Meta.ID)
	}
	// The first id in another chain: not a copy there.
	sink.ids[idKey{"VERDICTS/elsewhere", "unrelated"}] = true
	w := NewWriter(chain.NewHasher(nil), []SinkSpec{{Sink: sink, Required: true}}, nil, telemetry.Providers{})
	require.NoError(t, w.Recover(ctx))

	var b Batch
	require.NoError(t, w.SealAll(ctx, &b, append(msgs, msgs[15]), "/auditor/t"))
	assert.Len(t, b.Recs, 10, "the ten new events")
	assert.Equal(t, 11, b.Duplicates, "ten in the sink, one twice in the batch")
	assert.Positive(t, sink.asked, "the sink's ids are looked up")
	for _, r := range b.Recs {
		assert.NotContains(t, inSink, r.Meta.ID)
	}

	asked := sink.asked
	var again Batch
	require.NoError(t, w.SealAll(ctx, &again, msgs[10:], "/auditor/t"))
	assert.Empty(t, again.Recs)
	assert.Equal(t, 10, again.Duplicates)
	assert.Equal(t, asked, sink.asked, "ids sealed before are known without a lookup")
	assert.Equal(t, 21, b.Duplicates+again.Duplicates, "every copy counted once (the loop adds them to MetricDuplicateIDs)")

	sink.broken = errors.New("down")
	var failed Batch
	require.Error(t, w.SealAll(ctx, &failed, msgs[:1], "/auditor/t"))
	assert.Empty(t, failed.Recs)
	assert.Zero(t, failed.Duplicates)
}

// TestIDFilter: no id added is ever missed, across layers, and few ids
// not added are "maybe".
func TestIDFilter(t *testing.T) {
	f := newIDFilter()
	f.layers[0].limit = 1000 // grow soon
	for i := range 5000 {
		f.add("c", string(rune(i)))
	}
	require.Greater(t, len(f.layers), 1)
	for i := range 5000 {
		require.True(t, f.has("c", string(rune(i))))
	}
	maybe := 0
	for i := range 100000 {
		if f.has("d", string(rune(i))) {
			maybe++
		}
	}
	assert.Less(t, maybe, 100, "false maybes")
}

// BenchmarkSealAllIDs measures what the id check adds to sealing: SealAll
// of a batch of the auditor's default size (the check included, the filter
// loaded from a sink) against the check alone on the same ids.
func BenchmarkSealAllIDs(b *testing.B) {
	const n = 2048
	hosts := []string{"h00", "h01", "h02", "h03", "h04", "h05", "h06", "h07"}
	msgs := make([]*link.Message, n)
	for i := range msgs {
		m := auditortest.Msg(b, auditortest.Payload(b, hosts, i), i)
		msgs[i] = auditortest.Message(b, "VERDICTS", uint64(i+1), m)
	}
	ctx := context.Background()
	newWriter := func() *Writer {
		w := NewWriter(chain.NewHasher(nil), []SinkSpec{{Sink: &idSink{ids: map[idKey]bool{}}, Required: true}}, nil, telemetry.Providers{})
		if err := w.Recover(ctx); err != nil {
			b.Fatal(err)
		}
		return w
	}
	b.Run("seal-all", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			w := newWriter()
			b.StartTimer()
			var bt Batch
			if err := w.SealAll(ctx, &bt, msgs, "/auditor/bench"); err != nil || len(bt.Recs) != n {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "links/s")
	})
	keys := make([]idKey, n)
	for i, m := range msgs {
		p := link.Prepare(m, "/auditor/bench", false)
		keys[i] = idKey{p.Chain, p.Meta.ID}
	}
	b.Run("id-check", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			w := newWriter()
			b.StartTimer()
			if _, err := w.ids.known(ctx, keys); err != nil {
				b.Fatal(err)
			}
			w.ids.add(keys)
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "ids/s")
	})
}
