package topology_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/eventstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// pipeline starts a JetStream server with the topology in place.
func pipeline(t *testing.T) (context.Context, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	require.NoError(t, topology.Ensure(ctx, js, 1))
	return ctx, nc, js
}

// fetch takes n messages from a durable consumer, failing after a few
// seconds without them.
func fetch(ctx context.Context, t *testing.T, js jetstream.JetStream, stream, consumer string, n int) []jetstream.Msg {
	t.Helper()
	c, err := js.Consumer(ctx, stream, consumer)
	require.NoError(t, err)
	var out []jetstream.Msg
	deadline := time.Now().Add(10 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		batch, err := c.Fetch(n-len(out), jetstream.FetchMaxWait(time.Second))
		require.NoError(t, err)
		for m := range batch.Messages() {
			out = append(out, m)
		}
		require.NoError(t, batch.Error())
	}
	require.Len(t, out, n, "messages from %s/%s", stream, consumer)
	return out
}

func TestPublishDeduplicatesOnTheID(t *testing.T) {
	ctx, _, js := pipeline(t)
	p := eventstest.Payloads(t)["evidence.collected.v1.golden.json"]
	m, e, err := binding.NewMsg(eventstest.Source, p)
	require.NoError(t, err)

	ack, err := js.PublishMsg(ctx, m)
	require.NoError(t, err)
	assert.Equal(t, topology.StreamEvidence, ack.Stream)
	assert.False(t, ack.Duplicate)

	again, err := js.PublishMsg(ctx, m)
	require.NoError(t, err)
	assert.True(t, again.Duplicate, "the same event published twice is stored once")
	assert.Equal(t, ack.Sequence, again.Sequence)

	// The same id set through WithMsgID on a message built without it.
	plain := &nats.Msg{Subject: m.Subject, Header: cloneHeader(m.Header), Data: m.Data}
	delete(plain.Header, binding.HeaderMsgID)
	third, err := js.PublishMsg(ctx, plain, jetstream.WithMsgID(e.ID()))
	require.NoError(t, err)
	assert.True(t, third.Duplicate)

	// Another event with the same payload is a new message.
	m2, _, err := binding.NewMsg(eventstest.Source, p)
	require.NoError(t, err)
	fourth, err := js.PublishMsg(ctx, m2)
	require.NoError(t, err)
	assert.False(t, fourth.Duplicate)

	s, err := js.Stream(ctx, topology.StreamEvidence)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), info.State.Msgs)
}

func TestConsumeAndDecodeEveryType(t *testing.T) {
	ctx, _, js := pipeline(t)
	fx := eventstest.Payloads(t)
	sent := map[string]events.Payload{} // by event id
	for _, p := range fx {
		m, e, err := binding.NewMsg(eventstest.Source, p, binding.WithTraceContext(eventstest.Traceparent, ""))
		require.NoError(t, err)
		_, err = js.PublishMsgAsync(m)
		require.NoError(t, err)
		sent[e.ID()] = p
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("async publish did not complete")
	}

	perStream := map[string]int{
		topology.StreamEvidence:  3, // evidence, runnable.modified, collection.failed
		topology.StreamVerdicts:  4,
		topology.StreamBaselines: 3, // baseline.changed, attestation.created, host.key.changed
		topology.StreamDLQ:       1,
	}
	got := 0
	for stream, n := range perStream {
		for _, m := range fetch(ctx, t, js, stream, topology.ConsumerAuditor, n) {
			e, p, err := binding.Read[events.Payload](m)
			require.NoError(t, err)
			assert.Equal(t, eventstest.Traceparent, binding.TraceCarrier(&e).Get("traceparent"))
			want, ok := sent[e.ID()]
			require.True(t, ok)
			assert.Equal(t, indent(t, want), indent(t, p))
			require.NoError(t, m.Ack())
			got++
		}
	}
	assert.Equal(t, len(fx), got)

	for _, m := range fetch(ctx, t, js, topology.StreamEvidence, topology.ConsumerVerifier, 1) {
		_, p, err := binding.Read[events.EvidenceCollected](m)
		require.NoError(t, err, "the verifier sees evidence only")
		s, err := p.ParseSnapshot()
		require.NoError(t, err)
		assert.Equal(t, "agent worker.service", s.Target.Identifier)
		require.NoError(t, m.DoubleAck(ctx))
	}

	// Interest retention: once every interested consumer acked, the
	// pipeline streams are empty.
	for _, name := range []string{topology.StreamEvidence, topology.StreamVerdicts} {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		natstest.CheckFor(t, 5*time.Second, 20*time.Millisecond, func() error {
			info, err := s.Info(ctx)
			if err != nil {
				return err
			}
			if info.State.Msgs != 0 {
				return errors.New(name + " still holds acknowledged messages")
			}
			return nil
		})
	}
}

func TestBadEventIsDeadLettered(t *testing.T) {
	ctx, _, js := pipeline(t)
	good, _, err := binding.NewMsg(eventstest.Source, eventstest.Payloads(t)["evidence.collected.v1.golden.json"])
	require.NoError(t, err)
	bad := &nats.Msg{Subject: good.Subject, Header: cloneHeader(good.Header), Data: good.Data}
	bad.Header.Set("ce-type", events.TypePrefix+"evidence.collected.v9")
	ack, err := js.PublishMsg(ctx, bad)
	require.NoError(t, err)

	m := fetch(ctx, t, js, topology.StreamEvidence, topology.ConsumerVerifier, 1)[0]
	_, _, readErr := binding.Read[events.EvidenceCollected](m)
	require.ErrorIs(t, readErr, events.ErrInvalid)
	assert.Equal(t, events.ReasonUnknownType, events.ReasonOf(readErr))

	rec, err := binding.Reject(m, readErr)
	require.NoError(t, err)
	dlq, _, err := binding.NewMsg(events.Source("verifier", "test"), rec)
	require.NoError(t, err)
	_, err = js.PublishMsg(ctx, dlq)
	require.NoError(t, err)
	require.NoError(t, m.Term())

	d := fetch(ctx, t, js, topology.StreamDLQ, topology.ConsumerAuditor, 1)[0]
	assert.Equal(t, "rt.dlq.EVIDENCE.web-01=2Eexample=2Ecom", d.Subject(), "the host's own dead letters")
	_, got, err := binding.Read[events.EventRejected](d)
	require.NoError(t, err)
	assert.Equal(t, topology.StreamEvidence, got.Stream)
	assert.Equal(t, topology.ConsumerVerifier, got.Consumer)
	assert.Equal(t, ack.Sequence, got.StreamSequence)
	assert.Equal(t, uint64(1), got.Deliveries)
	assert.Equal(t, events.ReasonUnknownType, got.Reason)
	assert.Equal(t, events.TypePrefix+"evidence.collected.v9", got.Envelope.Type)
	assert.Equal(t, len(good.Data), got.DataSize)
	assert.Contains(t, got.Error, "not in the catalog")
	require.NoError(t, d.Ack())

	// A handler's own permanent failure keeps its text.
	rec2 := binding.Rejected("EVIDENCE", "verifier", good.Subject, 7, 10, good.Header, good.Data, errors.New("baseline store refused the update"))
	assert.Equal(t, events.ReasonPermanent, rec2.Reason)
	_, _, err = binding.NewMsg(events.Source("verifier", "test"), rec2)
	require.NoError(t, err)
}

func TestLimitsFitTheServer(t *testing.T) {
	ctx, _, js := pipeline(t)
	_, e, err := binding.NewMsg(eventstest.Source, eventstest.Payloads(t)["verdict.drift.v2.golden.json"])
	require.NoError(t, err)
	big := e.Clone()
	big.DataEncoded = make([]byte, events.MaxDataSize)
	m, err := binding.ToNATS(events.VerdictSubject("web-01", events.StatusDrift), big)
	require.NoError(t, err)
	_, err = js.PublishMsg(ctx, m)
	require.NoError(t, err, "an event at the size limit fits max_payload and the stream's MaxMsgSize")

	over := &nats.Msg{Subject: m.Subject, Header: m.Header, Data: make([]byte, events.MaxEventSize)}
	_, err = js.PublishMsg(ctx, over)
	require.Error(t, err, "the server refuses a message over the limit")
}

// cloneHeader copies h, so that a message built from a copy leaves the
// original as it was.
func cloneHeader(h nats.Header) nats.Header {
	out := make(nats.Header, len(h))
	for k, v := range h {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// indent renders a payload as indented JSON, to compare two in a
// readable diff.
func indent(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	return string(b)
}
