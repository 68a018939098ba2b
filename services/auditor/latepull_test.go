package auditor_test

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
)

// lateChunk holds back, once, the first chunk a client sends that
// completes a match of pattern: it calls hit, waits delay, then lets it
// (and, the connection being a stream, all after it) through, as a slow
// network or a busy machine would. A natstest.ProxyHooks.ToServer hook.
type lateChunk struct {
	mu      sync.Mutex
	pattern *regexp.Regexp
	delay   time.Duration
	hit     func()
	tail    []byte // the end of what came before, for a request split across reads
}

func (l *lateChunk) toServer(chunk []byte) {
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
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := e.js.PublishMsg(ctx, msg)
		published <- err
	}}
	cfg := e.config()
	cfg.NATS.URL = natstest.StartProxy(t, e.url, natstest.ProxyHooks{ToServer: late.toServer})
	cfg.IdleWait = 50 * time.Millisecond
	a := start(t, cfg)
	select {
	case err := <-published:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("no idle pull of %s seen in 30s (does nats.go still write %s?)", stream, idle)
	}

	waitLinks(t, a, 1)
	e.waitConsumed(t, 30*time.Second, testConsumer)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := e.js.Consumer(ctx, stream, testConsumer)
	require.NoError(t, err)
	assert.Zero(t, c.CachedInfo().NumRedelivered, "delivered once")
	stop(t, a)
}
