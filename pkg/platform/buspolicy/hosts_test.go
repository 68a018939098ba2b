package buspolicy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Two hosts whose tokens are alike: events.Token("web-01.example.com") is
// "web-01=2Eexample=2Ecom", and rt.evidence.web-01.example.com would be
// the evidence of host web-01 (target kind "example").
const (
	hostA = "web-01.example.com"
	hostB = "web-01"
)

// hostEvidence is an evidence.collected message of host, as its collector
// publishes it.
func hostEvidence(t *testing.T, host string) *nats.Msg {
	t.Helper()
	s := snapshot.New(snapshot.Target{Kind: "systemd.unit", Identifier: "agent.service"}, snapshot.Record{
		Plane: snapshot.Live, Kind: "systemd.unit",
		Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
		Data:   snapshot.Data{"main_pid": snapshot.Int(1)},
	})
	p, err := events.NewEvidenceCollected(host, s, time.Minute)
	require.NoError(t, err)
	m, _, err := binding.NewMsg(events.Source("collector", host), p)
	require.NoError(t, err)
	require.Equal(t, events.EvidenceSubject(host, "systemd.unit"), m.Subject)
	return m
}

// rawMsg is a message to subject with a fresh message id (the stream
// de-duplicates on it; its content does not matter to permissions).
func rawMsg(subject string) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(binding.HeaderMsgID, uuid.NewString())
	m.Data = []byte(`{}`)
	return m
}

// hostMsgs are the three kinds of message a host's collector publishes.
func hostMsgs(t *testing.T, host string) []*nats.Msg {
	t.Helper()
	return []*nats.Msg{
		hostEvidence(t, host),
		rawMsg(events.IntegritySubject(host)),
		rawMsg(events.CollectFailedSubject(host)),
	}
}

// checkHostIsolation shows, against a running server, that c (the
// credential of host own) publishes its own events and takes its own
// collect-now requests, and can do neither for host other; operator
// stands for the CLI in the pipeline's account.
func checkHostIsolation(t *testing.T, c, operator *client, own, other string) {
	t.Helper()
	ctx := ctx(t)
	before := stored(t, operator.js, topology.StreamEvidence)

	for _, m := range hostMsgs(t, other) {
		require.NoError(t, c.nc.PublishMsg(m))
		c.violation(t, m.Subject)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := c.js.PublishMsg(short, hostEvidence(t, other), jetstream.WithRetryAttempts(0))
	require.Error(t, err, "no acknowledgement for another host's evidence")

	for _, m := range hostMsgs(t, own) {
		ack, err := c.js.PublishMsg(ctx, m)
		require.NoError(t, err, "%s publishes %s", own, m.Subject)
		assert.Equal(t, topology.StreamEvidence, ack.Stream)
	}
	assert.Equal(t, before+3, stored(t, operator.js, topology.StreamEvidence),
		"its own three events are stored, none in the other host's name")

	// Collect-now: its own subject only.
	for _, subject := range []string{events.CollectNowSubject(other), buspolicy.CollectNowSubject} {
		_, err := c.nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte("impostor")) })
		require.NoError(t, err, "refused asynchronously")
		c.violation(t, subject)
	}
	sub, err := c.nc.Subscribe(events.CollectNowSubject(own), func(m *nats.Msg) { _ = m.Respond([]byte("ok " + own)) })
	require.NoError(t, err)
	defer func() { require.NoError(t, sub.Unsubscribe()) }()
	require.NoError(t, c.nc.Flush())
	reply, err := operator.nc.RequestWithContext(ctx, events.CollectNowSubject(own), []byte("all"))
	require.NoError(t, err)
	assert.Equal(t, "ok "+own, string(reply.Data))
	short2, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	_, err = operator.nc.RequestWithContext(short2, events.CollectNowSubject(other), []byte("all"))
	require.Error(t, err, "nobody answers for the other host: its request never reached %s", own)

	// No JetStream API (the collectors' account has no storage, and a
	// host's credential no grant).
	short3, cancel3 := context.WithTimeout(ctx, time.Second)
	defer cancel3()
	_, err = c.js.Stream(short3, topology.StreamEvidence)
	require.Error(t, err)
}

func seedFile(t *testing.T) (pub, path string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err = kp.PublicKey()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	path = filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(path, seed, 0o600))
	return pub, path
}

// TestHostPermissions runs per-host users (host A an nkey user, host B a
// user with a password) against a server started with the rendered
// configuration: each publishes and answers for itself only, while the
// shared collector user still publishes for any host.
func TestHostPermissions(t *testing.T) {
	pubA, seedA := seedFile(t)
	url := runServer(t,
		buspolicy.Host{Name: hostA, NKey: pubA},
		buspolicy.Host{Name: hostB, User: "collector-web-01"})
	operator := connect(t, url, admin)
	require.NoError(t, topology.Ensure(ctx(t), operator.js, 1))
	a := connectAs(t, natsbus.Config{URL: url, NKeySeedFile: seedA})
	b := connect(t, url, "collector-web-01")

	t.Run("A", func(t *testing.T) { checkHostIsolation(t, a, operator, hostA, hostB) })
	t.Run("B", func(t *testing.T) { checkHostIsolation(t, b, operator, hostB, hostA) })
	t.Run("the shared collector user publishes for any host", func(t *testing.T) {
		shared := connect(t, url, buspolicy.Collector)
		for _, h := range []string{hostA, hostB} {
			_, err := shared.js.PublishMsg(ctx(t), hostEvidence(t, h))
			require.NoError(t, err, "only evidence signing tells %s from an impostor here", h)
		}
	})
}

// TestHostRoleSubjects checks that a host's grants are the subjects its
// collector publishes to and is asked on (events.Token encodes the host in
// both), for host names that Token escapes or shortens.
func TestHostRoleSubjects(t *testing.T) {
	for _, host := range []string{"web-01", "web-01.example.com", "Web 01/*>", "", string(make([]byte, 200))} {
		t.Run(fmt.Sprintf("%q", host), func(t *testing.T) {
			r := buspolicy.HostRole(host)
			pub, sub := r.PublishSubjects(), r.SubscribeSubjects()
			require.Len(t, pub, 3)
			assert.True(t, matches(pub[0], events.EvidenceSubject(host, "git.repository")))
			assert.Equal(t, events.IntegritySubject(host), pub[1])
			assert.Equal(t, events.CollectFailedSubject(host), pub[2])
			assert.Equal(t, []string{events.CollectNowSubject(host), buspolicy.Inbox}, sub)
			assert.True(t, r.Responds)
			for _, s := range append(pub, sub[0]) {
				literal := strings.TrimSuffix(s, ".>")
				assert.True(t, events.ValidSubject(literal), "%s: no wildcard, no empty token from the host name", s)
			}
			assert.False(t, matches(pub[0], events.EvidenceSubject(host+"x", "git")))
		})
	}
}

func TestServerConfigRefusesBadHosts(t *testing.T) {
	pub, _ := seedFile(t)
	for name, hosts := range map[string][]buspolicy.Host{
		"no name":           {{User: "u"}},
		"no credential":     {{Name: "web-01"}},
		"both credentials":  {{Name: "web-01", User: "u", NKey: pub}},
		"not a user nkey":   {{Name: "web-01", NKey: "AAAA"}},
		"user with a space": {{Name: "web-01", User: "web 01"}},
		"a service's user":  {{Name: "web-01", User: buspolicy.Verifier}},
		"a user twice":      {{Name: "web-01", User: "u"}, {Name: "web-02", User: "u"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := buspolicy.ServerConfig(map[string]string{buspolicy.Verifier: buspolicy.Verifier}, hosts...)
			require.ErrorIs(t, err, buspolicy.ErrHost)
		})
	}
}
