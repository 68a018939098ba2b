package syslog_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
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

var hosts = []string{"web-01.example.com", `odd "host" \ with ]`}

func records(t *testing.T, n int) []link.Record {
	t.Helper()
	return auditortest.Records(t, chain.NewHasher(nil), n, hosts)
}

// TestFormatConforms parses every message strictly and checks its fields,
// escaping included.
func TestFormatConforms(t *testing.T) {
	s, err := syslog.New(syslog.Options{Network: "tcp", Address: "127.0.0.1:1", Hostname: "auditor 1", Facility: "local3"})
	require.NoError(t, err)
	for _, r := range records(t, 120) {
		m, err := auditortest.ParseSyslog(string(s.Format(r)))
		require.NoError(t, err, string(s.Format(r)))
		assert.Equal(t, 19, m.Facility)
		assert.Equal(t, "auditor_1", m.Hostname)
		assert.Equal(t, "runtimetruth-auditor", m.AppName)
		assert.Equal(t, syslog.MsgID(r.Meta), m.MsgID)
		sd := m.SD["rtlink@32473"]
		require.NotNil(t, sd)
		assert.Equal(t, r.Chain, sd["chain"])
		assert.Equal(t, strconv.FormatUint(r.Seq, 10), sd["seq"])
		assert.Equal(t, r.Hash, sd["hash"])
		assert.Equal(t, r.Prev, sd["prev"])
		assert.Equal(t, r.Meta.Type, sd["type"])
		assert.Equal(t, r.Meta.Subject, sd["subject"])
		_, err = time.Parse(time.RFC3339Nano, m.Timestamp)
		require.NoError(t, err)
		switch {
		case r.Meta.Rejected, r.Meta.Type == "dev.runtimetruth.runnable.modified.v1", r.Meta.Type == "dev.runtimetruth.verdict.drift.v2":
			assert.Equal(t, syslog.SevWarning, m.Severity, r.Meta.Type)
		case r.Meta.Type == "dev.runtimetruth.verdict.pass.v2":
			assert.Equal(t, syslog.SevInfo, m.Severity)
		}
	}
	// A verdict of the superseded v1 types (an older verifier's, during an
	// upgrade) is sent at its successor's severity.
	for typ, want := range map[string]int{
		"dev.runtimetruth.verdict.drift.v1": syslog.SevWarning, "dev.runtimetruth.verdict.drift.v2": syslog.SevWarning,
		"dev.runtimetruth.verdict.error.v1": syslog.SevNotice, "dev.runtimetruth.verdict.pass.v1": syslog.SevInfo,
	} {
		assert.Equal(t, want, syslog.Severity(link.Meta{Type: typ}), typ)
		assert.Equal(t, strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(typ, "dev.runtimetruth."), ".v1"), ".v2"), syslog.MsgID(link.Meta{Type: typ}))
	}
	_, err = syslog.New(syslog.Options{Network: "tcp", Address: "x:1", SDID: "bad id@1"})
	require.Error(t, err)
	_, err = syslog.New(syslog.Options{Network: "tcp", Address: "x:1", Facility: "nope"})
	require.Error(t, err)
}

// TestRsyslog sends links over every transport to the real rsyslog and
// finds each one, intact, in its output.
func TestRsyslog(t *testing.T) {
	rs := auditortest.RsyslogEnv(t)
	tlsCfg, err := syslog.TLSConfig(rs.TLSCA, "localhost")
	require.NoError(t, err)
	for _, tc := range []struct{ network, address string }{
		{"tcp", rs.TCP}, {"tls", rs.TLS}, {"udp", rs.UDP}, {"unixgram", rs.Unix},
	} {
		t.Run(tc.network, func(t *testing.T) {
			host := auditortest.UniqueHost("syslog-" + tc.network)
			s, err := syslog.New(syslog.Options{Network: tc.network, Address: tc.address, TLS: tlsCfg, Hostname: host})
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			recs := records(t, 60)
			for i := 0; i < len(recs); i += 25 {
				require.NoError(t, s.Write(context.Background(), recs[i:min(i+25, len(recs))]))
			}
			key := ed25519.NewKeyFromSeed(make([]byte, 32))
			cp := chain.Checkpoint{Chain: recs[0].Chain, Seq: recs[0].Seq, Head: recs[0].Hash,
				Time: time.Now(), Auditor: "/auditor/t"}.Sign(key)
			require.NoError(t, s.SendCheckpoints(context.Background(), []chain.Checkpoint{cp}))
			var lines []string
			natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
				lines = auditortest.SyslogLines(t, rs.File, host)
				if len(lines) < len(recs)+1 {
					return fmt.Errorf("%d of %d messages", len(lines), len(recs)+1)
				}
				return nil
			})
			got := map[string]string{}
			for _, ln := range lines {
				m, err := auditortest.ParseSyslog(ln)
				require.NoError(t, err, ln)
				if m.MsgID == "checkpoint" {
					c, ok, err := chain.ParseCheckpoint([]byte(ln))
					require.NoError(t, err)
					require.True(t, ok)
					require.NoError(t, c.Verify(key.Public().(ed25519.PublicKey)), "the checkpoint survives the trip")
					continue
				}
				sd := m.SD["rtlink@32473"]
				got[sd["chain"]+"#"+sd["seq"]] = sd["hash"]
			}
			for _, r := range recs {
				assert.Equal(t, r.Hash, got[r.Chain+"#"+strconv.FormatUint(r.Seq, 10)], "%s seq %d", r.Chain, r.Seq)
			}
		})
	}
}

// receiver is a TCP syslog receiver that can go away and come back on the
// same port.
type receiver struct {
	ln    net.Listener
	mu    sync.Mutex
	msgs  []string
	conns []net.Conn
	wg    sync.WaitGroup
}

func listen(t *testing.T, addr string) *receiver {
	t.Helper()
	return serve(listenAt(t, addr))
}

// listenAt listens on the TCP address addr, retrying while the port is
// still held (by a listener that just closed).
func listenAt(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	natstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln
}

func (r *receiver) read(c net.Conn) {
	defer func() { _ = c.Close() }()
	br := bufio.NewReader(c)
	for {
		n, err := br.ReadString(' ')
		if err != nil {
			return
		}
		size, err := strconv.Atoi(strings.TrimSpace(n))
		if err != nil {
			return
		}
		buf := make([]byte, size)
		if _, err := io.ReadFull(br, buf); err != nil {
			return
		}
		r.mu.Lock()
		r.msgs = append(r.msgs, string(buf))
		r.mu.Unlock()
	}
}

func (r *receiver) stop() {
	_ = r.ln.Close()
	r.mu.Lock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

// TestReconnectLosesNothing stops the receiver between batches (it closes
// the connection as a restarted rsyslog would): the sink reconnects and
// sends the batch the old connection may have lost again.
func TestReconnectLosesNothing(t *testing.T) {
	r1 := listen(t, "127.0.0.1:0")
	addr := r1.ln.Addr().String()
	s, err := syslog.New(syslog.Options{Network: "tcp", Address: addr, Hostname: "h"})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	recs := records(t, 30)
	require.NoError(t, s.Write(context.Background(), recs[:10]))
	natstest.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		if r1.count() != 10 {
			return fmt.Errorf("%d", r1.count())
		}
		return nil
	})
	r1.stop() // the server goes away: connections closed
	// While it is down, a write fails (the auditor retries the batch).
	require.Error(t, s.Write(context.Background(), recs[10:20]))
	r2 := listen(t, addr)
	defer r2.stop()
	require.NoError(t, s.Write(context.Background(), recs[10:20]))
	require.NoError(t, s.Write(context.Background(), recs[20:30]))
	seen := func() map[string]bool {
		out := map[string]bool{}
		for _, rcv := range []*receiver{r1, r2} {
			for _, m := range rcv.messages() {
				p, err := auditortest.ParseSyslog(m)
				require.NoError(t, err)
				sd := p.SD["rtlink@32473"]
				out[sd["chain"]+"#"+sd["seq"]] = true
			}
		}
		return out
	}
	natstest.CheckFor(t, 5*time.Second, 5*time.Millisecond, func() error {
		got := seen()
		for _, r := range recs {
			if !got[r.Chain+"#"+strconv.FormatUint(r.Seq, 10)] {
				return fmt.Errorf("%s seq %d not delivered", r.Chain, r.Seq)
			}
		}
		return nil
	})
}

func (r *receiver) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

func TestCursorFile(t *testing.T) {
	r := listen(t, "127.0.0.1:0")
	defer r.stop()
	path := t.TempDir() + "/cursor.json"
	s, err := syslog.New(syslog.Options{Network: "tcp", Address: r.ln.Addr().String(), CursorFile: path})
	require.NoError(t, err)
	heads, err := s.Heads(context.Background())
	require.NoError(t, err)
	assert.Empty(t, heads)
	recs := records(t, 20)
	require.NoError(t, s.Write(context.Background(), recs))
	require.NoError(t, s.Close())
	s, err = syslog.New(syslog.Options{Network: "tcp", Address: r.ln.Addr().String(), CursorFile: path})
	require.NoError(t, err)
	heads, err = s.Heads(context.Background())
	require.NoError(t, err)
	want := map[string]link.Head{}
	for _, r := range recs {
		want[r.Chain] = r.Head()
	}
	assert.Equal(t, want, heads)
}

var _ = rand.Reader
