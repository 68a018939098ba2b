package syslog_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/syslog"
)

// transport is a stream transport under test: how to listen on an
// address (again, after the first listener died) and the sink's options.
type transport struct {
	network string
	listen  func(t *testing.T, addr string) net.Listener
	addr    func(t *testing.T) string
	tls     *tls.Config
}

func streamTransports(t *testing.T) []transport {
	t.Helper()
	server, client := selfSigned(t)
	loopback := func(t *testing.T) string {
		t.Helper()
		ln := listenTCP(t)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		return addr
	}
	return []transport{
		{network: "tcp", listen: listenAt, addr: loopback},
		{network: "tls", tls: client, addr: loopback, listen: func(t *testing.T, addr string) net.Listener {
			return tls.NewListener(listenAt(t, addr), server)
		}},
		{network: "unixstream", addr: func(t *testing.T) string {
			// A short path: sun_path holds 108 bytes.
			dir, err := os.MkdirTemp("", "rtsl")
			require.NoError(t, err)
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
			return filepath.Join(dir, "s")
		}, listen: func(t *testing.T, addr string) net.Listener {
			t.Helper()
			ln, err := net.Listen("unix", addr)
			require.NoError(t, err)
			return ln
		}},
	}
}

// deaf accepts connections (completing a TLS handshake) and never reads.
type deaf struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func listenDeaf(ln net.Listener) *deaf {
	d := &deaf{ln: ln}
	acceptAll(ln, &d.wg, func(c net.Conn) {
		if tc, ok := c.(*tls.Conn); ok {
			_ = tc.Handshake()
		}
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	})
	return d
}

// die closes the listener and every connection with its data unread (a
// TCP receiver resets the connection): what the kernel accepted is lost.
func (d *deaf) die() {
	_ = d.ln.Close()
	d.wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		_ = c.Close()
	}
}

func (d *deaf) accepted() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

// serve starts a reading receiver on ln.
func serve(ln net.Listener) *receiver {
	r := &receiver{ln: ln}
	acceptAll(ln, &r.wg, func(c net.Conn) {
		r.mu.Lock()
		r.conns = append(r.conns, c)
		r.mu.Unlock()
		r.wg.Go(func() { r.read(c) })
	})
	return r
}

// acceptAll hands every connection ln accepts to keep, on a goroutine of
// wg that ends when ln closes.
func acceptAll(ln net.Listener, wg *sync.WaitGroup, keep func(net.Conn)) {
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			keep(c)
		}
	})
}

// key names a link or a checkpoint as received: kind, chain and seq.
func key(t *testing.T, m string) string {
	t.Helper()
	p, err := auditortest.ParseSyslog(m)
	require.NoError(t, err, m)
	if p.MsgID == "checkpoint" {
		c, ok, err := chain.ParseCheckpoint([]byte(m))
		require.NoError(t, err)
		require.True(t, ok)
		return "cp " + c.Chain + "#" + strconv.FormatUint(c.Seq, 10)
	}
	sd := p.SD["rtlink@32473"]
	return "link " + sd["chain"] + "#" + sd["seq"]
}

func linkKey(r link.Record) string { return "link " + r.Chain + "#" + strconv.FormatUint(r.Seq, 10) }

func signed(r link.Record) chain.Checkpoint {
	k := ed25519.NewKeyFromSeed(make([]byte, 32))
	return chain.Checkpoint{Chain: r.Chain, Seq: r.Seq, Head: r.Hash, Time: time.Now(), Auditor: "/auditor/t"}.Sign(k)
}

// TestReconnectResendsUnread: the receiver accepts, reads nothing, and
// dies with two batches and two checkpoints unread — all reported
// written. After the reconnect, the new receiver gets every one of them,
// and the next batch, in order (duplicates allowed, none missing): over
// TCP, TLS and a unix stream socket.
func TestReconnectResendsUnread(t *testing.T) {
	for _, tr := range streamTransports(t) {
		t.Run(tr.network, func(t *testing.T) {
			ctx := context.Background()
			addr := tr.addr(t)
			d := listenDeaf(tr.listen(t, addr))
			s, err := syslog.New(syslog.Options{Network: tr.network, Address: addr, TLS: tr.tls, Hostname: "h", Timeout: 2 * time.Second})
			require.NoError(t, err)
			defer func() { _ = s.Close() }()
			recs := records(t, 30)
			var want []string
			for i, part := range [][]link.Record{recs[:10], recs[10:20]} {
				require.NoError(t, s.Write(ctx, part), "batch %d", i)
				cp := signed(part[len(part)-1])
				require.NoError(t, s.SendCheckpoints(ctx, []chain.Checkpoint{cp}), "checkpoint %d", i)
				for _, r := range part {
					want = append(want, linkKey(r))
				}
				want = append(want, "cp "+cp.Chain+"#"+strconv.FormatUint(cp.Seq, 10))
			}
			// The receiver counts a TLS connection once its side of the
			// handshake is done, which can be after the writer's.
			natstest.CheckFor(t, 5*time.Second, time.Millisecond, func() error {
				if n := d.accepted(); n != 1 {
					return fmt.Errorf("%d connections accepted", n)
				}
				return nil
			})
			d.die()
			r := serve(tr.listen(t, addr))
			defer r.stop()
			require.NoError(t, s.Write(ctx, recs[20:30]))
			for _, rec := range recs[20:30] {
				want = append(want, linkKey(rec))
			}
			var got []string
			natstest.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
				got = got[:0]
				seen := map[string]bool{}
				for _, m := range r.messages() {
					if k := key(t, m); !seen[k] {
						seen[k] = true
						got = append(got, k)
					}
				}
				for _, k := range want {
					if !seen[k] {
						return fmt.Errorf("%s not delivered (%d of %d)", k, len(got), len(want))
					}
				}
				return nil
			})
			assert.Equal(t, want, got, "first deliveries in the order sent")
		})
	}
}

// TestResendWindowBounded: the window keeps the newest ResendWindow bytes
// (and always the last batch), so a reconnect resends a bounded tail.
func TestResendWindowBounded(t *testing.T) {
	t.Run("last batch", func(t *testing.T) {
		recs := records(t, 30)
		sent, _ := writeAcrossRestart(t, 1, recs[:20], recs[20:30])
		assert.Equal(t, 20, sent, "a window smaller than a batch still keeps the batch")
	})
	recs := records(t, 60)
	sent, r := writeAcrossRestart(t, 12000, recs[:50], recs[50:60])
	resent := sent - 10
	assert.Greater(t, resent, 10, "the window holds more than the last batch")
	assert.Less(t, resent, 50, "older messages beyond the window are not kept")
	natstest.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := r.count(); n != resent+10 {
			return fmt.Errorf("%d of %d", n, resent+10)
		}
		return nil
	})
	msgs := r.messages()
	assert.Equal(t, linkKey(recs[50-resent]), key(t, msgs[0]), "the window is the newest messages")
}

// writeAcrossRestart writes before, in batches of 10, through a TCP sink
// with the given resend window to a receiver that never reads; then
// replaces that receiver by a reading one on the same address and writes
// last. It returns how many messages the last write sent (what it resent
// included) and the reading receiver, both stopped when the test ends.
func writeAcrossRestart(t *testing.T, window int, before, last []link.Record) (int, *receiver) {
	t.Helper()
	ctx := context.Background()
	d := listenDeaf(listenTCP(t))
	addr := d.ln.Addr().String()
	s, err := syslog.New(syslog.Options{Network: "tcp", Address: addr, Hostname: "h", ResendWindow: window})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for i := 0; i < len(before); i += 10 {
		require.NoError(t, s.Write(ctx, before[i:i+10]))
	}
	written := s.Written()
	d.die()
	r := listen(t, addr)
	t.Cleanup(r.stop)
	require.NoError(t, s.Write(ctx, last))
	return s.Written() - written, r
}

func listenTCP(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return ln
}

// selfSigned makes a TLS server configuration for localhost and
// 127.0.0.1, and a client configuration that trusts it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: priv}}}
	client = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool, ServerName: "localhost"}
	return server, client
}
