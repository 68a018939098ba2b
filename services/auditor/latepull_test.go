package auditor_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
)

// lateProxy forwards NATS connections to a server. Armed, it holds back
// the first chunk a client sends that completes a pull request matching
// the pattern it was armed with: it calls the arming callback, waits the
// delay it was given, then forwards that chunk and everything after it in
// order, as a slow network or a busy machine would. What the server sends
// is forwarded at once.
type lateProxy struct {
	url string

	mu      sync.Mutex
	pattern *regexp.Regexp
	delay   time.Duration
	hit     func()
}

func newLateProxy(t *testing.T, serverURL string) *lateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &lateProxy{url: "nats://" + ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", strings.TrimPrefix(serverURL, "nats://"))
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			wg.Go(func() { p.clientToServer(c, up) })
			wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
		}
	})
	return p
}

// arm makes the proxy hold back the next pull request matching pattern
// by delay, calling hit (before the wait) once it has it.
func (p *lateProxy) arm(pattern *regexp.Regexp, delay time.Duration, hit func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pattern, p.delay, p.hit = pattern, delay, hit
}

func (p *lateProxy) clientToServer(c, up net.Conn) {
	defer func() { _ = up.Close() }()
	buf := make([]byte, 64<<10)
	var tail []byte // the end of what came before, for a request split across reads
	for {
		n, err := c.Read(buf)
		if n > 0 {
			window := append(tail, buf[:n]...)
			p.mu.Lock()
			pattern, delay, hit := p.pattern, p.delay, p.hit
			if pattern != nil && pattern.Match(window) {
				p.pattern = nil
			} else {
				hit = nil
			}
			p.mu.Unlock()
			if hit != nil {
				hit()
				time.Sleep(delay)
			}
			if _, err := up.Write(buf[:n]); err != nil {
				return
			}
			tail = bytes.Clone(window[max(0, len(window)-4096):])
		}
		if err != nil {
			return
		}
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
	proxy := newLateProxy(t, e.url)
	cfg := e.config()
	cfg.NATS.URL = proxy.url
	// The pull reaches the server well after the auditor's wait (50 ms)
	// and well before nats.go gives up a pull the server ends (the wait
	// and a second).
	cfg.IdleWait = 50 * time.Millisecond
	const late = 500 * time.Millisecond

	msg := auditortest.Msg(t, auditortest.DeadLetter(0), 1)
	stream := auditortest.StreamOf(msg.Subject)
	// An idle pull of the stream: one message, no byte limit.
	idle := regexp.MustCompile(`PUB \$JS\.API\.CONSUMER\.MSG\.NEXT\.` + regexp.QuoteMeta(stream+"."+testConsumer) +
		` \S+ \d+\r\n\{"expires":\d+,"batch":1\}\r\n`)
	published := make(chan error, 1)
	proxy.arm(idle, late, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := e.js.PublishMsg(ctx, msg)
		published <- err
	})
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
