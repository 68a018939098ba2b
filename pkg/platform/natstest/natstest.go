// Package natstest runs real NATS servers with JetStream inside a test
// process: one server (RunJetStream) or a cluster on loopback (RunCluster).
// Each server listens on 127.0.0.1 on a free port, stores in a t.TempDir(),
// logs nothing, traps no signal, and is shut down by t.Cleanup. A server
// that does not start fails the test; nothing is skipped.
package natstest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StartTimeout bounds how long a server or cluster may take to be ready.
// A cluster member is ready in well under a second on its own, but CI runs
// many test binaries at once on two cores, where one once took over 10 s.
const StartTimeout = 30 * time.Second

// Options returns the options of one test server: loopback, a random
// port, JetStream storing in dir, no logging, no signal handlers.
func Options(dir string) *server.Options {
	return &server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		NoLog:      true,
		NoSigs:     true,
		JetStream:  true,
		StoreDir:   dir,
		// The default max_payload, written out: events are sized to it.
		MaxPayload: 1 << 20,
	}
}

// RunJetStream starts one JetStream server and returns it with its client
// URL.
func RunJetStream(tb testing.TB) (*server.Server, string) {
	tb.Helper()
	return Run(tb, Options(tb.TempDir()))
}

// Run starts a server with opts, waits until it accepts clients, and shuts
// it down when the test ends.
func Run(tb testing.TB, opts *server.Options) (*server.Server, string) {
	tb.Helper()
	s := start(tb, opts, true)
	return s, s.ClientURL()
}

func start(tb testing.TB, opts *server.Options, wait bool) *server.Server {
	tb.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		tb.Fatalf("natstest: new server: %v", err)
	}
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	go s.Start()
	if wait && !s.ReadyForConnections(StartTimeout) {
		tb.Fatalf("natstest: server %s not ready within %s", opts.ServerName, StartTimeout)
	}
	return s
}

// Connect opens a client connection to url, closed when the test ends, and
// its JetStream API.
func Connect(tb testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(url, nats.Name(tb.Name()), nats.MaxReconnects(-1))
	if err != nil {
		tb.Fatalf("natstest: connect %s: %v", url, err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// RunCluster starts a JetStream cluster of n servers (3 for R3 streams) on
// loopback, and returns them with a client URL list (comma-separated, for
// nats.Connect). It returns once every server routes to every other and
// JetStream has a meta leader that every server follows.
//
// JetStream needs every server's routes configured before it starts, so
// the cluster ports are picked up front from free loopback ports.
func RunCluster(tb testing.TB, n int) ([]*server.Server, string) {
	tb.Helper()
	return RunClusterWith(tb, n, nil)
}

// RunClusterWith is RunCluster with each server's options (the i-th of n)
// passed to configure, when not nil, before it starts: the accounts and
// users of a rendered configuration, for example.
func RunClusterWith(tb testing.TB, n int, configure func(i int, opts *server.Options)) ([]*server.Server, string) {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("natstest: cluster of %d servers", n)
	}
	ports := freePorts(tb, n)
	routes := make([]*url.URL, n)
	for i, p := range ports {
		routes[i] = &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p))}
	}
	servers := make([]*server.Server, n)
	urls := make([]string, n)
	for i := range n {
		opts := Options(tb.TempDir())
		opts.ServerName = fmt.Sprintf("natstest-%d", i)
		opts.Cluster = server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: ports[i]}
		opts.Routes = routes
		if configure != nil {
			configure(i, opts)
		}
		servers[i] = start(tb, opts, false)
	}
	for i, s := range servers {
		if !s.ReadyForConnections(StartTimeout) {
			tb.Fatalf("natstest: server %s not ready within %s", s.Name(), StartTimeout)
		}
		urls[i] = s.ClientURL()
	}
	CheckFor(tb, StartTimeout, 20*time.Millisecond, func() error {
		leaders := 0
		for _, s := range servers {
			if got := Peers(s); got != n-1 {
				return fmt.Errorf("%s routes to %d servers, want %d", s.Name(), got, n-1)
			}
			if !s.JetStreamIsCurrent() {
				return fmt.Errorf("%s: JetStream meta group not current", s.Name())
			}
			if s.JetStreamIsLeader() {
				leaders++
				// Placement takes only the peers the leader has heard
				// from (online, with JetStream and stats): until then,
				// creating a replicated stream fails with "no suitable
				// peers for placement, peer offline".
				if got := len(s.JetStreamClusterPeers()); got != n {
					return fmt.Errorf("meta leader %s sees %d of %d peers online", s.Name(), got, n)
				}
			}
		}
		if leaders != 1 {
			return fmt.Errorf("%d JetStream meta leaders", leaders)
		}
		return nil
	})
	return servers, strings.Join(urls, ",")
}

// Peers counts the distinct servers s has routes to (a route pool opens
// several connections to each).
func Peers(s *server.Server) int {
	rz, err := s.Routez(&server.RoutezOptions{})
	if err != nil {
		return 0
	}
	ids := map[string]bool{}
	for _, r := range rz.Routes {
		ids[r.RemoteID] = true
	}
	return len(ids)
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("natstest: free port: %v", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// CheckFor calls f every interval until it returns nil, and fails the test
// with f's last error if that takes longer than timeout.
func CheckFor(tb testing.TB, timeout, interval time.Duration, f func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("natstest: not within %s: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}

// Member remembers how to start a server of a RunCluster cluster again, on
// its ports and its data, after it was shut down.
type Member struct {
	name        string
	storeDir    string
	port, route int
}

// Members remembers every server of a cluster (call it while they run).
func Members(servers []*server.Server) []Member {
	out := make([]Member, len(servers))
	for i, s := range servers {
		out[i] = Member{
			name:     s.Name(),
			storeDir: filepath.Dir(s.StoreDir()), // StoreDir ends in "jetstream"
			port:     s.Addr().(*net.TCPAddr).Port,
			route:    s.ClusterAddr().Port,
		}
	}
	return out
}

// Name is the server's name.
func (m Member) Name() string { return m.name }

// Restart starts m again in the cluster of members, and returns it once it
// accepts connections.
func (m Member) Restart(tb testing.TB, members []Member) *server.Server {
	tb.Helper()
	return m.RestartWith(tb, members, nil)
}

// RestartWith is Restart with the server's options passed to configure,
// when not nil, before it starts (as RunClusterWith's were).
func (m Member) RestartWith(tb testing.TB, members []Member, configure func(opts *server.Options)) *server.Server {
	tb.Helper()
	routes := make([]*url.URL, len(members))
	for i, o := range members {
		routes[i] = &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(o.route))}
	}
	opts := Options(m.storeDir)
	opts.ServerName = m.name
	opts.Port = m.port
	opts.Cluster = server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: m.route}
	opts.Routes = routes
	if configure != nil {
		configure(opts)
	}
	s, _ := Run(tb, opts)
	return s
}

// WaitConverged waits (up to a minute) until every named stream is
// replicated on every server: its configured replicas are len(servers), it
// has a leader and len(servers)-1 current replicas without lag, and every
// server holds the same messages of it as the leader.
func WaitConverged(ctx context.Context, tb testing.TB, js jetstream.JetStream, servers []*server.Server, names []string) {
	tb.Helper()
	CheckFor(tb, time.Minute, 50*time.Millisecond, func() error {
		for _, name := range names {
			s, err := js.Stream(ctx, name)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			info, err := s.Info(ctx)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			ci := info.Cluster
			if info.Config.Replicas != len(servers) || ci == nil || ci.Leader == "" || len(ci.Replicas) != len(servers)-1 {
				return fmt.Errorf("%s: %d replicas, cluster %+v", name, info.Config.Replicas, ci)
			}
			for _, r := range ci.Replicas {
				if !r.Current || r.Offline || r.Lag != 0 {
					return fmt.Errorf("%s: replica %s current %t, offline %t, lag %d", name, r.Name, r.Current, r.Offline, r.Lag)
				}
			}
			for _, srv := range servers {
				// The stream in whichever account holds it (the global
				// one, or a configured account such as buspolicy's).
				jsz, err := srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
				if err != nil {
					return fmt.Errorf("%s: %w", srv.Name(), err)
				}
				var detail *server.StreamDetail
				for _, acc := range jsz.AccountDetails {
					if i := slices.IndexFunc(acc.Streams, func(d server.StreamDetail) bool { return d.Name == name }); i >= 0 {
						detail = &acc.Streams[i]
					}
				}
				if detail == nil {
					return fmt.Errorf("%s: no replica on %s", name, srv.Name())
				}
				if st := detail.State; st.Msgs != info.State.Msgs || st.LastSeq != info.State.LastSeq {
					return fmt.Errorf("%s on %s: %d messages to %d, the leader %s has %d to %d",
						name, srv.Name(), st.Msgs, st.LastSeq, ci.Leader, info.State.Msgs, info.State.LastSeq)
				}
			}
		}
		return nil
	})
}

// ForgetWindow is the duplicate window ForgetMessageIDs leaves a stream
// with.
const ForgetWindow = 100 * time.Millisecond

// forgetTimeout bounds how long ForgetMessageIDs waits for the server to
// forget.
const forgetTimeout = 30 * time.Second

// probeLastMsgID is the Nats-Expected-Last-Msg-Id of ForgetMessageIDs'
// probes: no message has it, so the server refuses every probe it does not
// drop as a duplicate.
const probeLastMsgID = "natstest: no message has this id"

// ForgetMessageIDs makes a stream forget the message ids it has seen, as
// it does after its duplicate window and, for an interest stream's
// consumed messages, after a restart: it shrinks the window to
// ForgetWindow and returns once the server holds neither the id of any
// message the stream stores nor any of ids (give those of messages the
// stream may no longer store). On one server, not a cluster.
//
// The server forgets on a timer (stream.go purgeMsgIds), which a change
// of the window fires at once; but it fires that timer before it stores
// the new window (updateWithAdvisory), so the purge can still run with the
// old window and keep the ids that long (2 minutes for the topology's
// streams). So each round changes the window again, between two short
// ones, until the server confirms: a probe is an empty message on a
// subject of the stream with the id and a Nats-Expected-Last-Msg-Id no
// message has, which the server drops as a duplicate while it holds the
// id (it checks that first) and refuses otherwise. A probe is never
// stored, so no consumer sees it; a core subscriber of its subject
// (the stream's first subject, wildcards replaced by _natstest) would.
func ForgetMessageIDs(ctx context.Context, tb testing.TB, js jetstream.JetStream, stream string, ids ...string) {
	tb.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatalf("natstest: stream %s: %v", stream, err)
	}
	cfg := s.CachedInfo().Config
	held := map[string]bool{}
	for _, id := range ids {
		held[id] = true
	}
	for _, m := range Stored(ctx, tb, js, stream) {
		if id := m.Header.Get(jetstream.MsgIDHeader); id != "" {
			held[id] = true
		}
	}
	subject := probeSubject(cfg)
	windows := [2]time.Duration{ForgetWindow, ForgetWindow + time.Millisecond}
	round := 0
	CheckFor(tb, forgetTimeout, ForgetWindow, func() error {
		cfg.Duplicates = windows[round%2]
		round++
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("update stream %s: %w", stream, err)
		}
		for id := range held {
			forgotten, err := forgot(ctx, js, subject, id)
			if err != nil {
				return fmt.Errorf("stream %s, probe of %s: %w", stream, id, err)
			}
			if forgotten {
				delete(held, id)
			}
		}
		if len(held) > 0 {
			return fmt.Errorf("stream %s still holds %d message ids, %v", stream, len(held), slices.Sorted(maps.Keys(held)))
		}
		return nil
	})
	if cfg.Duplicates != ForgetWindow {
		cfg.Duplicates = ForgetWindow
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			tb.Fatalf("natstest: update stream %s: %v", stream, err)
		}
	}
}

// forgot probes whether the server has forgotten id: a publish it drops
// as a duplicate says it holds id, and the refusal of a publish whose
// expected last message id no message has says it does not.
func forgot(ctx context.Context, js jetstream.JetStream, subject, id string) (bool, error) {
	ack, err := js.PublishMsg(ctx, nats.NewMsg(subject), jetstream.WithMsgID(id), jetstream.WithExpectLastMsgID(probeLastMsgID))
	var api *jetstream.APIError
	switch {
	case errors.As(err, &api) && api.ErrorCode == codeWrongLastMsgID:
		return true, nil
	case err != nil:
		return false, err
	case !ack.Duplicate:
		return false, fmt.Errorf("probe stored as message %d", ack.Sequence)
	}
	return false, nil
}

// codeWrongLastMsgID is the JetStream API error code of a publish whose
// Nats-Expected-Last-Msg-Id is not the stream's last (nats-server
// errors.json, JSStreamWrongLastMsgIDErrF); nats.go names no constant.
const codeWrongLastMsgID jetstream.ErrorCode = 10070

// probeSubject is a subject the stream takes: its first subject with each
// wildcard token replaced by _natstest (its name when it has none).
func probeSubject(cfg jetstream.StreamConfig) string {
	if len(cfg.Subjects) == 0 {
		return cfg.Name
	}
	tokens := strings.Split(cfg.Subjects[0], ".")
	for i, t := range tokens {
		if t == "*" || t == ">" {
			tokens[i] = "_natstest"
		}
	}
	return strings.Join(tokens, ".")
}

// Stored returns every message stored in a stream, in stream order
// (deleted ones skipped).
func Stored(ctx context.Context, tb testing.TB, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	tb.Helper()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatalf("natstest: stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatalf("natstest: stream %s: %v", stream, err)
	}
	var out []*jetstream.RawStreamMsg
	if info.State.Msgs == 0 {
		return out
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			tb.Fatalf("natstest: stream %s message %d: %v", stream, seq, err)
		}
		out = append(out, m)
	}
	return out
}
