package natstest

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// ProxyHooks see what crosses a Proxy, one direction each: a hook is
// called with each chunk read before it is forwarded, in order, and may
// block to delay it (and all that follows on that connection). A nil
// hook forwards at once. Hooks of several connections run concurrently;
// a hook that blocks must let go when its test ends (Proxy's clean-up
// waits for the copying to stop).
type ProxyHooks struct {
	ToServer func(chunk []byte)
	ToClient func(chunk []byte)
}

// StartProxy starts a TCP proxy in front of the NATS server at serverURL
// (nats://host:port), for tests that need what crosses the network late:
// clients connect to the returned URL. It stops when tb ends.
func StartProxy(tb testing.TB, serverURL string, hooks ProxyHooks) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("natstest: proxy: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	target := strings.TrimPrefix(serverURL, "nats://")
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", target)
			if err != nil {
				_ = client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			wg.Go(func() { forward(server, client, hooks.ToServer); _ = server.Close() })
			wg.Go(func() { forward(client, server, hooks.ToClient); _ = client.Close() })
		}
	})
	return "nats://" + ln.Addr().String()
}

// forward copies from to to, each chunk handed to hook first.
func forward(to, from net.Conn, hook func([]byte)) {
	if hook == nil {
		_, _ = io.Copy(to, from)
		return
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			hook(buf[:n])
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
