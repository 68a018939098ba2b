package auditor_test

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
)

// lateChunk holds back, once, the first chunk that completes a match of
// pattern: it calls hit, waits delay, then lets it (and, the connection
// being a stream, all after it) through, as a slow network or a busy
// machine would. Its hold is a natstest.ProxyHooks hook, for either
// direction.
type lateChunk struct {
	mu      sync.Mutex
	pattern *regexp.Regexp
	delay   time.Duration
	hit     func()
	tail    []byte // the end of what came before, for a request split across reads
}

func (l *lateChunk) hold(chunk []byte) {
	l.mu.Lock()
	window := slices.Concat(l.tail, chunk)
	l.tail = bytes.Clone(window[max(0, len(window)-4096):])
	hit := l.hit
	if l.pattern == nil || !l.pattern.Match(window) {
		hit = nil
	} else {
		l.pattern = nil
	}
	l.mu.Unlock()
	if hit != nil {
		hit()
		time.Sleep(l.delay)
	}
}

// TestIdlePullLateAtTheServer has an idle pull reach the server after
// the wait the auditor gave it has passed on the auditor's clock, as on a
// busy machine or network, with a message in the stream by then: the
// server fills the pull at once. The auditor takes that message and links
// it: it never gives up a pull before the server ends it. One that did
// (a client deadline, as with jetstream.FetchContext) left the message
// delivered to nobody, unlinked and unacknowledged until the consumer's
// ack wait (an hour here) redelivered it.
func TestIdlePullLateAtTheServer(t *testing.T) {
	e := newEnv(t, time.Hour)
	msg := auditortest.Msg(t, auditortest.DeadLetter(0), 1)
	stream := auditortest.StreamOf(msg.Subject)
	// An idle pull of the stream: one message, no byte limit.
	idle := regexp.MustCompile(`PUB \$JS\.API\.CONSUMER\.MSG\.NEXT\.` + regexp.QuoteMeta(stream+"."+testConsumer) +
		` \S+ \d+\r\n\{"expires":\d+,"batch":1\}\r\n`)
	published := make(chan error, 1)
	// The pull reaches the server well after the auditor's wait (50 ms,
	// below) and well before nats.go gives up a pull the server ends (the
	// wait and a second).
	late := &lateChunk{pattern: idle, delay: 500 * time.Millisecond, hit: func() {
		published <- publishDirect(e, msg)
	}}
	a := startBehind(t, e, natstest.ProxyHooks{ToServer: late.hold})
	select {
	case err := <-published:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no idle pull of %s seen in 30s (does nats.go still write %s?)", stream, idle)
	}

	waitLinks(t, a, 1)
	e.waitConsumed(t, 30*time.Second, testConsumer)
	info := consumerInfo(t, e, stream)
	assert.Zero(t, info.NumRedelivered, "delivered once")
	stop(t, a)
}

// TestPullGivenUpByTheClient has the message that fills a pull reach the
// auditor more than a second after the pull's wait, as over a slow
// network: nats.go has given the pull up by then and drops the message,
// which the server counts as delivered and leaves unacknowledged until the
// consumer's ack wait (an hour here). The auditor links it all the same,
// read from the stream once an empty pull shows that the consumer
// delivered past what it linked; the redelivery, after the ack wait, is
// a duplicate. Without that, the message stayed unlinked for the hour (0
// links).
func TestPullGivenUpByTheClient(t *testing.T) {
	e := newEnv(t, time.Hour)
	msg := auditortest.Msg(t, auditortest.DeadLetter(0), 1)
	stream := auditortest.StreamOf(msg.Subject)
	// A message of the stream delivered to a pull of the auditor's
	// consumer (its reply is the consumer's acknowledgement subject).
	delivery := regexp.MustCompile(`MSG \S+ \d+ \$JS\.ACK\.` + regexp.QuoteMeta(stream+"."+testConsumer) + `\.`)
	held := make(chan struct{})
	// The auditor waits 50 ms for a message (below); nats.go gives a pull
	// up that long and a second after it was sent.
	late := &lateChunk{pattern: delivery, delay: 1500 * time.Millisecond, hit: func() { close(held) }}
	a := startBehind(t, e, natstest.ProxyHooks{ToClient: late.hold})
	require.NoError(t, publishDirect(e, msg))
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("no delivery of %s seen in 30s (does nats-server still write %s?)", stream, delivery)
	}

	waitLinks(t, a, 1)
	info := consumerInfo(t, e, stream)
	assert.Equal(t, uint64(1), info.Delivered.Stream, "delivered, to the pull given up")
	assert.Equal(t, 1, info.NumAckPending, "acknowledged when redelivered, after the ack wait")
	// Linked once, read from the stream.
	assert.Equal(t, int64(1), counted(t, a, auditor.MetricRecovered))
	stop(t, a)
}

// startBehind starts an auditor of e (an idle wait of 50 ms) connected
// through a proxy with hooks.
func startBehind(t *testing.T, e *env, hooks natstest.ProxyHooks) *auditor.Auditor {
	t.Helper()
	cfg := e.config()
	cfg.NATS.URL = natstest.StartProxy(t, e.url, hooks)
	cfg.IdleWait = 50 * time.Millisecond
	return start(t, cfg)
}

// publishDirect publishes msg to e's server directly (not through the
// proxy).
func publishDirect(e *env, msg *nats.Msg) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := e.js.PublishMsg(ctx, msg)
	return err
}

// consumerInfo is the state of the auditor's consumer of stream.
func consumerInfo(t *testing.T, e *env, stream string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, stream, testConsumer)
	require.NoError(t, err)
	return c.CachedInfo()
}
