package buspolicy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// headerSize is the size of h's header block as NATS counts it.
func headerSize(h nats.Header) int {
	n := len("NATS/1.0\r\n\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": \r\n") + len(v)
		}
	}
	return n
}

// sized is an evidence message of exactly size bytes (headers and data).
func sized(t *testing.T, size int) *nats.Msg {
	t.Helper()
	m := evidenceMsg(t, size)
	m.Data = []byte(strings.Repeat("x", size-headerSize(m.Header)))
	return m
}

// stored counts the messages of a stream, as the operator sees them.
func stored(t *testing.T, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	s, err := js.Stream(ctx(t), stream)
	require.NoError(t, err)
	info, err := s.Info(ctx(t))
	require.NoError(t, err)
	return info.State.Msgs
}

// rawClient is a protocol connection that ignores the max_payload the
// server announces, as a client other than nats.go may.
type rawClient struct {
	conn net.Conn
	r    *bufio.Reader
	info map[string]any
}

func dialRaw(t *testing.T, serverURL, user string) *rawClient {
	t.Helper()
	u, err := url.Parse(serverURL)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	c := &rawClient{conn: conn, r: bufio.NewReader(conn)}
	line, err := c.r.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "INFO "), line)
	require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "INFO ")), &c.info))
	_, err = fmt.Fprintf(conn, "CONNECT {\"user\":%q,\"pass\":%q,\"verbose\":false,\"pedantic\":false,\"headers\":true,\"protocol\":1}\r\nPING\r\n",
		user, user+"-pw")
	require.NoError(t, err)
	c.expect(t, "PONG")
	return c
}

// expect reads lines until one starts with prefix and returns it.
func (c *rawClient) expect(t *testing.T, prefix string) string {
	t.Helper()
	for {
		line, err := c.r.ReadString('\n')
		require.NoError(t, err, "waiting for %s", prefix)
		if strings.HasPrefix(line, prefix) {
			return strings.TrimSpace(line)
		}
		require.False(t, strings.HasPrefix(line, "-ERR"), "unexpected %s", line)
	}
}

// TestMaxPayload runs the rendered max_payload against the server: an
// event at the codec's limit is stored; nats.go refuses a larger one
// itself (the server told it the limit); the server refuses one over
// max_payload from a client that ignores the limit, and drops that
// client; and what passes max_payload but not the streams' MaxMsgSize is
// refused by the stream.
func TestMaxPayload(t *testing.T) {
	url := runServer(t)
	ctx := ctx(t)
	collector := connect(t, url, buspolicy.Collector)
	operator := connect(t, url, admin)
	require.NoError(t, topology.Ensure(ctx, operator.js, 1))
	assert.Equal(t, int64(buspolicy.MaxPayload), collector.nc.MaxPayload(), "the server announces max_payload")
	assert.Greater(t, buspolicy.MaxPayload, events.MaxEventSize)

	ack, err := collector.js.PublishMsg(ctx, sized(t, events.MaxEventSize))
	require.NoError(t, err, "an event at events.MaxEventSize reaches the pipeline's stream from the collectors' account")
	assert.Equal(t, topology.StreamEvidence, ack.Stream)
	require.Equal(t, uint64(1), stored(t, operator.js, topology.StreamEvidence))

	_, err = collector.js.PublishMsg(ctx, sized(t, buspolicy.MaxPayload+1))
	require.ErrorIs(t, err, nats.ErrMaxPayload, "nats.go refuses it unsent")

	_, err = collector.js.PublishMsg(ctx, sized(t, buspolicy.MaxPayload))
	var apiErr *jetstream.APIError
	require.ErrorAs(t, err, &apiErr, "within max_payload, over the stream's MaxMsgSize")
	assert.Equal(t, jetstream.JSErrCodeStreamMessageExceedsMaximum, apiErr.ErrorCode)

	raw := dialRaw(t, url, buspolicy.Collector)
	assert.EqualValues(t, buspolicy.MaxPayload, raw.info["max_payload"])
	m := sized(t, buspolicy.MaxPayload+1)
	var hdr strings.Builder
	hdr.WriteString("NATS/1.0\r\n")
	for k, vs := range m.Header {
		for _, v := range vs {
			fmt.Fprintf(&hdr, "%s: %s\r\n", k, v)
		}
	}
	hdr.WriteString("\r\n")
	// The size is in the control line: the server refuses the message
	// there, before its bytes.
	_, err = fmt.Fprintf(raw.conn, "HPUB %s %d %d\r\n", m.Subject, hdr.Len(), hdr.Len()+len(m.Data))
	require.NoError(t, err)
	assert.Equal(t, "-ERR 'Maximum Payload Violation'", raw.expect(t, "-ERR"))
	_, err = raw.r.ReadString('\n')
	require.Error(t, err, "the server closed the connection")
	assert.Equal(t, uint64(1), stored(t, operator.js, topology.StreamEvidence), "nothing more was stored")
}

// TestCollectorAccountLimits runs the collectors' account limits against
// the server with a user of that account that has no permissions at all
// (the intruder): it can create no stream, memory or file, of any size,
// sees none of the pipeline's streams (so creates no consumer on them),
// and reaches the pipeline only as a collector does, by publishing an
// event.
func TestCollectorAccountLimits(t *testing.T) {
	url := runServer(t)
	ctx := ctx(t)
	operator := connect(t, url, admin)
	require.NoError(t, topology.Ensure(ctx, operator.js, 1))
	in := connect(t, url, intruder)

	info, err := in.js.AccountInfo(ctx)
	require.NoError(t, err, "the account has JetStream, with limits")
	l := buspolicy.CollectorJetStream
	assert.Equal(t, l.MaxMemory, info.Limits.MaxMemory)
	assert.Equal(t, l.MaxStore, info.Limits.MaxStore)
	assert.Equal(t, l.MaxStreams, info.Limits.MaxStreams)
	assert.Equal(t, l.MaxConsumers, info.Limits.MaxConsumers)

	for _, cfg := range []jetstream.StreamConfig{
		{Name: "GRAB", Subjects: []string{"rt.evidence.>"}, Storage: jetstream.FileStorage},
		{Name: "GRAB", Subjects: []string{"grab.>"}, Storage: jetstream.FileStorage, MaxBytes: 1},
		{Name: "GRAB", Subjects: []string{"grab.>"}, Storage: jetstream.MemoryStorage},
		{Name: "GRAB", Subjects: []string{"grab.>"}, Storage: jetstream.MemoryStorage, MaxBytes: 1},
	} {
		_, err := in.js.CreateStream(ctx, cfg)
		var apiErr *jetstream.APIError
		require.ErrorAs(t, err, &apiErr, "%s storage, max bytes %d", cfg.Storage, cfg.MaxBytes)
		// nats-server's JSMemoryResourcesExceededErr and
		// JSStorageResourcesExceededErr.
		want := map[jetstream.StorageType]jetstream.ErrorCode{jetstream.MemoryStorage: 10028, jetstream.FileStorage: 10047}[cfg.Storage]
		assert.Equal(t, want, apiErr.ErrorCode, "refused for want of storage: %v", apiErr)
	}
	names := in.js.StreamNames(ctx)
	var seen []string
	for n := range names.Name() {
		seen = append(seen, n)
	}
	require.NoError(t, names.Err())
	assert.Empty(t, seen, "no stream, and none of the pipeline's in sight")

	_, err = in.js.CreateOrUpdateConsumer(ctx, topology.StreamEvidence, jetstream.ConsumerConfig{Durable: "grab", AckPolicy: jetstream.AckExplicitPolicy})
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "no consumer on the pipeline's streams")
	_, err = in.js.Stream(ctx, topology.StreamEvidence)
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	for _, s := range topology.New(1).Streams {
		c, err := operator.js.Stream(ctx, s.Name)
		require.NoError(t, err)
		for name := range c.ConsumerNames(ctx).Name() {
			assert.NotEqual(t, "grab", name)
		}
	}

	ack, err := in.js.PublishMsg(ctx, evidenceMsg(t, 1))
	require.NoError(t, err, "publishing an event is the way in")
	assert.Equal(t, topology.StreamEvidence, ack.Stream)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = in.js.PublishMsg(short, verdictMsg(t, "0198d5c4-0000-7000-8000-000000000009"), jetstream.WithRetryAttempts(0))
	require.Error(t, err, "the account imports only the collectors' subjects")
	assert.Zero(t, stored(t, operator.js, topology.StreamVerdicts))
}
