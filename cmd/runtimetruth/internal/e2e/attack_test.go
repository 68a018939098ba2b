package e2e_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// policyServer is a nats-server running the configuration buspolicy
// renders (a user per service, password "<service>-pw"), plus an operator
// user in the pipeline's account, on a fixed port so that it can restart
// with its store.
type policyServer struct {
	opts *server.Options
	srv  *server.Server
	url  string
}

func runPolicyServer(t *testing.T) *policyServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	opts := policyOptions(t, fmt.Sprintf("host: 127.0.0.1\nport: %d\njetstream { store_dir: %q }\n", port, t.TempDir()))
	opts.ServerName = "attack"
	p := &policyServer{opts: opts}
	p.srv, p.url = natstest.Run(t, opts)
	return p
}

// policyOptions are the options of a nats-server whose configuration is
// head followed by what buspolicy renders (a user per service, password
// "<service>-pw"), plus an operator user in the pipeline's account.
func policyOptions(t *testing.T, head string) *server.Options {
	t.Helper()
	users := map[string]string{}
	for _, r := range buspolicy.Roles() {
		users[r.Service] = r.Service
		t.Setenv(strings.ToUpper(r.Service)+"_PASSWORD", r.Service+"-pw")
	}
	policy, err := buspolicy.ServerConfig(users)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "nats.conf")
	require.NoError(t, os.WriteFile(path, []byte(head+policy), 0o600))
	opts, err := server.ProcessConfigFile(path)
	require.NoError(t, err)
	opts.NoLog, opts.NoSigs = true, true
	for _, a := range opts.Accounts {
		if a.Name == buspolicy.AccountPipeline {
			opts.Users = append(opts.Users, &server.User{Username: "operator", Password: "operator-pw", Account: a})
		}
	}
	return opts
}

// policyCluster makes each server of a natstest cluster take the
// configuration buspolicy renders (policyOptions): its accounts, users
// and limits, each server its own.
func policyCluster(t *testing.T) func(int, *server.Options) {
	return func(_ int, opts *server.Options) {
		p := policyOptions(t, "")
		opts.Accounts, opts.Users, opts.Nkeys = p.Accounts, p.Users, p.Nkeys
		opts.SystemAccount, opts.NoAuthUser = p.SystemAccount, p.NoAuthUser
		if p.MaxPayload > 0 {
			opts.MaxPayload = p.MaxPayload
		}
	}
}

// connectAs connects to urls as user of a policy server or cluster.
func connectAs(t *testing.T, urls, user string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsbus.Connect(natsbus.Config{URL: urls, User: user, Password: user + "-pw"}, "e2e-"+user)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// restart stops the server and starts it again on its store.
func (p *policyServer) restart(t *testing.T) {
	t.Helper()
	p.srv.Shutdown()
	p.srv.WaitForShutdown()
	p.srv, _ = natstest.Run(t, p.opts)
}

// as connects as user.
func (p *policyServer) as(t *testing.T, user string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return connectAs(t, p.url, user)
}

var attackClock atomic.Int64

func unitSnapshot(pid int64) *snapshot.Snapshot {
	s := snapshot.New(snapshot.Target{Kind: "systemd.unit", Identifier: "agent.service"}, snapshot.Record{
		Plane: snapshot.Live, Kind: "systemd.unit",
		Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
		Data:   snapshot.Data{"active_state": snapshot.String("active"), "main_pid": snapshot.Int(pid), "user": snapshot.String("agent")},
	})
	s.CapturedAt = snapshot.FormatTime(time.Now().UTC().Add(time.Duration(attackClock.Add(1)) * time.Millisecond))
	return s
}

// TestAttacksOnTheEvidence runs, against a nats-server with the rendered
// permissions and a verifier with the default (manual) enrollment, what an
// attacker holding the shared collector credential can send in another
// host's name (a host's own credential cannot publish on another host's
// subjects at all: buspolicy's TestHostPermissions and TestOperatorMode). Each attack leaves the victim's true verdict (DRIFT) in place and
// is dead-lettered, and logged in the victim's name, with its reason.
// (The collect-now impostor: services/collector and the CLI's collect
// tests; a rewritten up log: the CLI's audit tests.)
func TestAttacksOnTheEvidence(t *testing.T) {
	ctx := t.Context()
	ps := runPolicyServer(t)
	_, op := ps.as(t, "operator")
	_, bus := ps.as(t, "collector") // every collector's credential, the attacker's too

	vcfg := verifier.NewDefaultConfig()
	vcfg.Instance = "attack"
	vcfg.NATS = natsbus.Config{URL: ps.url, User: "verifier", Password: "verifier-pw"}
	verTel := telemetrytest.New(t)
	ver, err := verifier.New(vcfg, verifier.Settings{Telemetry: verTel.Providers})
	require.NoError(t, err)
	startComponent(ctx, t, ver)
	require.Equal(t, string(verifier.EnrollManual), vcfg.Enrollment, "the services' default")

	kv, err := op.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	hosts := verifier.NewHosts(kv, verifier.EnrollManual)
	for _, h := range []string{"victim", "other"} {
		_, err := hosts.Approve(ctx, h, signtest.KeyID(h), "operator")
		require.NoError(t, err)
	}
	base := unitSnapshot(1)
	raw, err := base.Canonical()
	require.NoError(t, err)
	_, err = verifier.NewBaselines(op, "/cli/operator").Put(ctx, events.Baseline{Snapshot: raw, ApprovedBy: "operator"})
	require.NoError(t, err)
	target := events.Target{Kind: "systemd.unit", Identifier: "agent.service"}

	build := func(host string, s *snapshot.Snapshot, opts ...binding.Option) (*nats.Msg, string) {
		p, err := events.NewEvidenceCollected(host, s, time.Minute)
		require.NoError(t, err)
		m, e, err := binding.NewMsg(events.Source("collector", host), p, opts...)
		require.NoError(t, err)
		return m, e.ID()
	}
	// publish stores m in the stream. A copy of a stored event within
	// the stream's duplicate window would be dropped, so each attack
	// that reuses an id is made after ForgetMessageIDs, which returns
	// once the server has forgotten that id.
	publish := func(m *nats.Msg) {
		ack, err := bus.PublishMsg(ctx, m)
		require.NoError(t, err)
		require.False(t, ack.Duplicate, "%s dropped as a duplicate", m.Header.Get("ce-id"))
	}
	status := verifier.NewStatus(op)
	verdictOf := func(host, id string) *verifier.VerdictRecord {
		var rec *verifier.VerdictRecord
		natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
			r, err := status.Get(ctx, host, target)
			if err != nil {
				return err
			}
			if r.EvidenceID != id {
				return fmt.Errorf("verdict of %s, want %s", r.EvidenceID, id)
			}
			rec = r
			return nil
		})
		return rec
	}

	// The victim's history: a PASS (kept by the attacker), then a DRIFT,
	// the true verdict.
	passMsg, passID := build("victim", unitSnapshot(1), signtest.Sign("victim"))
	passData := append([]byte(nil), passMsg.Data...)
	passHeader := nats.Header{}
	for k, v := range passMsg.Header {
		passHeader[k] = append([]string(nil), v...)
	}
	publish(passMsg)
	require.Equal(t, events.StatusPass, verdictOf("victim", passID).Verdict.Status)
	driftMsg, driftID := build("victim", unitSnapshot(2), signtest.Sign("victim"))
	publish(driftMsg)
	require.Equal(t, events.StatusDrift, verdictOf("victim", driftID).Verdict.Status)
	copyOfPass := func() *nats.Msg {
		m := nats.NewMsg(events.EvidenceSubject("victim", target.Kind))
		for k, v := range passHeader {
			m.Header[k] = append([]string(nil), v...)
		}
		m.Data = append([]byte(nil), passData...)
		return m
	}
	impostor := signtest.Random()

	type attack struct {
		name   string
		msg    func() (*nats.Msg, string)
		reason string
	}
	attacks := []attack{
		{"another host's name, the attacker's key", func() (*nats.Msg, string) {
			return build("victim", unitSnapshot(1), binding.WithSigner(impostor))
		}, "key_changed"},
		{"another host's enrolled key", func() (*nats.Msg, string) {
			return build("victim", unitSnapshot(1), signtest.Sign("other"))
		}, "key_changed"},
		{"unsigned", func() (*nats.Msg, string) { return build("victim", unitSnapshot(1)) }, "unsigned"},
		{"a flipped payload bit", func() (*nats.Msg, string) {
			natstest.ForgetMessageIDs(ctx, t, op, topology.StreamEvidence, passID) // else the stream drops it as a copy of the PASS
			m := copyOfPass()
			i := strings.Index(string(m.Data), `"interval_seconds":60`)
			require.GreaterOrEqual(t, i, 0)
			m.Data[i+len(`"interval_seconds":6`)] ^= 0x01 // 60 → 61
			return m, passID
		}, "claim_mismatch"},
		{"a replay under a new id", func() (*nats.Msg, string) {
			m := copyOfPass()
			m.Header.Set("ce-id", "01930000-0000-7000-8000-00000000dead")
			m.Header.Set("Nats-Msg-Id", "01930000-0000-7000-8000-00000000dead")
			return m, "01930000-0000-7000-8000-00000000dead"
		}, "claim_mismatch"},
		{"a time far in the past", func() (*nats.Msg, string) {
			return build("victim", unitSnapshot(1), signtest.Sign("victim"), binding.WithTime(time.Now().Add(-2*time.Hour)))
		}, "clock_skew"},
		{"a time far in the future", func() (*nats.Msg, string) {
			return build("victim", unitSnapshot(1), signtest.Sign("victim"), binding.WithTime(time.Now().Add(2*time.Hour)))
		}, "clock_skew"},
		{"the victim's key, an old sequence, a new event", func() (*nats.Msg, string) {
			return build("victim", unitSnapshot(1), binding.WithSigner(dsse.NewSigner(signtest.Key("victim"),
				func() (uint64, error) { return 1, nil })))
		}, "replayed"},
	}
	// A byte-exact copy of an event the verifier handled is that event,
	// whoever sends it (a collector's honest re-send after a NATS restart
	// or past the duplicate window, or an attacker): a duplicate, which
	// changes nothing and is no rejection.
	copies := []struct {
		name    string
		prepare func()
	}{
		{"a byte-exact copy after the duplicate window", func() {
			natstest.ForgetMessageIDs(ctx, t, op, topology.StreamEvidence, passID)
		}},
		{"a byte-exact copy after a NATS restart", func() {
			ps.restart(t)
			natstest.ForgetMessageIDs(ctx, t, op, topology.StreamEvidence, passID)
		}},
	}
	dlq := dlqReasons(t, op)
	// refused waits for a dead-letter record of evidence id, after the
	// first n, whose error names reason.
	refused := func(what string, n int, id, reason string) {
		t.Helper()
		natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
			recs := dlq()
			for _, r := range recs[min(n, len(recs)):] {
				if r.id == id && strings.Contains(r.err, "rejected evidence ("+reason+")") {
					return nil
				}
			}
			return fmt.Errorf("%s: no dead letter of %s with reason %s in %v", what, id, reason, recs[min(n, len(recs)):])
		})
	}
	for _, a := range attacks {
		m, id := a.msg()
		n := len(dlq())
		publish(m)
		refused(a.name, n, id, a.reason)
		rec, err := status.Get(ctx, "victim", target)
		require.NoError(t, err, a.name)
		assert.Equal(t, driftID, rec.EvidenceID, "%s: the victim's verdict stands", a.name)
		assert.Equal(t, events.StatusDrift, rec.Verdict.Status, a.name)
	}

	for i, c := range copies {
		c.prepare()
		n := len(dlq())
		publish(copyOfPass())
		natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
			if d := verTel.Sum(t, verifier.MetricDuplicates); d < int64(i+1) {
				return fmt.Errorf("%s: %d duplicates counted", c.name, d)
			}
			return nil
		})
		assert.Len(t, dlq(), n, "%s: not dead-lettered", c.name)
		rec, err := status.Get(ctx, "victim", target)
		require.NoError(t, err, c.name)
		assert.Equal(t, driftID, rec.EvidenceID, "%s: the victim's verdict stands", c.name)
	}

	// An invented host gets no verdict, so status shows no PASS for it;
	// a revoked host's own evidence is refused.
	n := len(dlq())
	ghost, ghostID := build("ghost", unitSnapshot(1), binding.WithSigner(impostor))
	publish(ghost)
	refused("an invented host", n, ghostID, "not_enrolled")
	require.NoError(t, hosts.Revoke(ctx, "other", "operator"))
	// The revocation takes effect once the verifier's view of the
	// registry has it: within milliseconds, but after the NATS restart
	// above only once nats.go has noticed the watch's consumer gone (its
	// missed heartbeats) and made it again, seconds later.
	e, err := kv.Get(ctx, "other")
	require.NoError(t, err)
	natstest.CheckFor(t, 60*time.Second, 10*time.Millisecond, func() error {
		if got := ver.ViewRevision("other"); got < e.Revision() {
			return fmt.Errorf("the verifier's view holds revision %d of other's record, not %d", got, e.Revision())
		}
		return nil
	})
	revoked, revokedID := build("other", unitSnapshot(1), signtest.Sign("other"))
	publish(revoked)
	refused("a revoked key", n, revokedID, "revoked")
	recs, err := status.List(ctx)
	require.NoError(t, err)
	for _, r := range recs {
		assert.NotEqual(t, "ghost", r.Verdict.Host, "an invented host has no verdict")
		assert.NotEqual(t, "other", r.Verdict.Host)
	}

	// Stopped before the cleanups stop the restarted server.
	require.NoError(t, ver.Shutdown(ctx))

	// Each refusal in the victim's name is in its rejection log, counted
	// since its last authentic evidence.
	logs, err := hosts.Rejections(ctx)
	require.NoError(t, err)
	counted := false
	for _, r := range verifier.RejectedSinceAuthentic(recs, logs) {
		if r.Host == "victim" {
			counted = true
			assert.Equal(t, uint64(len(attacks)), r.SinceAuthentic)
		}
	}
	assert.True(t, counted, "the victim's rejection log")
}

type deadLetter struct{ id, err string }

// dlqReasons returns a function reading the DLQ stream: each dead-letter
// record's evidence id (the raw ce-id) and error, in stream order.
func dlqReasons(t *testing.T, js jetstream.JetStream) func() []deadLetter {
	return func() []deadLetter {
		var out []deadLetter
		for _, e := range storedEvents(t.Context(), t, js, topology.StreamDLQ) {
			if r, ok := e.Payload.(events.EventRejected); ok {
				out = append(out, deadLetter{r.Envelope.ID, r.Error})
			}
		}
		return out
	}
}

// TestOneVerdictAfterACrashAndARestart: a verifier stops right after
// storing its verdicts, NATS restarts (and so forgets the message ids of
// consumed messages), and every snapshot is delivered again (as a
// redelivery after a crash
// before the acknowledgement does: the verifier's consumer is created
// again): the verdict records, not JetStream's
// duplicate window, make it one verdict per snapshot in the end.
func TestOneVerdictAfterACrashAndARestart(t *testing.T) {
	ctx := t.Context()
	ps := runPolicyServer(t)
	_, op := ps.as(t, "operator")
	_, bus := ps.as(t, "collector")
	startVerifier := func(consumer string) (*verifier.Verifier, *telemetrytest.Recorder) {
		cfg := verifier.NewDefaultConfig()
		cfg.Instance, cfg.Consumer = "chaos-"+consumer, consumer
		cfg.NATS = natsbus.Config{URL: ps.url, User: "verifier", Password: "verifier-pw"}
		rec := telemetrytest.New(t)
		v, err := verifier.New(cfg, verifier.Settings{Telemetry: rec.Providers})
		require.NoError(t, err)
		require.NoError(t, v.Start(ctx))
		return v, rec
	}
	first, _ := startVerifier(topology.ConsumerVerifier)
	kv, err := op.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	_, err = verifier.NewHosts(kv, verifier.EnrollManual).Approve(ctx, "web-01", signtest.KeyID("web-01"), "operator")
	require.NoError(t, err)

	const n = 12
	ids := map[string]bool{}
	for i := range n {
		p, err := events.NewEvidenceCollected("web-01", unitSnapshot(int64(i)), time.Minute)
		require.NoError(t, err)
		m, e, err := binding.NewMsg(events.Source("collector", "web-01"), p, signtest.Sign("web-01"))
		require.NoError(t, err)
		_, err = bus.PublishMsg(ctx, m)
		require.NoError(t, err)
		ids[e.ID()] = true
	}
	verdictsByEvidence := func() map[string]int {
		out := map[string]int{}
		for _, e := range storedEvents(ctx, t, op, topology.StreamVerdicts) {
			out[e.Payload.(events.Verdict).EvidenceID]++
		}
		return out
	}
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if got := len(verdictsByEvidence()); got < n {
			return fmt.Errorf("%d verdicts", got)
		}
		return nil
	})
	require.NoError(t, first.Shutdown(ctx))
	ps.restart(t)
	natstest.ForgetMessageIDs(ctx, t, op, topology.StreamVerdicts)

	// The consumer starts over: every stored snapshot is delivered again.
	require.NoError(t, op.DeleteConsumer(ctx, topology.StreamEvidence, topology.ConsumerVerifier))
	second, secondTel := startVerifier(topology.ConsumerVerifier)
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		if dups := secondTel.Sum(t, verifier.MetricDuplicates); dups < int64(n) {
			return fmt.Errorf("%d duplicates of %d", dups, n)
		}
		return nil
	})
	require.NoError(t, second.Shutdown(ctx))
	got := verdictsByEvidence()
	assert.Len(t, got, n)
	for id := range ids {
		assert.Equal(t, 1, got[id], "verdicts of %s", id)
	}
	assert.Zero(t, secondTel.Sum(t, natsbus.MetricDeadLettered), "a redelivery is a duplicate, not a replay")
}
