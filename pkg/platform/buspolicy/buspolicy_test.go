package buspolicy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const admin = "admin"

// intruder is a user of the collectors' account without permissions: a
// collector credential whose permissions are wider than its role (a
// misconfiguration, or a deployment's own account tooling), against which
// only the account's limits stand.
const intruder = "intruder"

// runServer starts a JetStream server from the rendered configuration (a
// user per service, named after it, password "<service>-pw", and the
// users of hosts, a user's password "<user>-pw"), plus an unrestricted
// admin user in the pipeline's account standing for the operator's CLI and
// the intruder in the collectors'.
func runServer(t *testing.T, hosts ...buspolicy.Host) string {
	t.Helper()
	users := map[string]string{}
	for _, r := range buspolicy.Roles() {
		users[r.Service] = r.Service
		t.Setenv(buspolicy.PasswordEnv(r.Service), r.Service+"-pw")
	}
	hostOf := map[string]string{}
	for _, h := range hosts {
		hostOf[h.User+h.NKey] = h.Name
		if h.User != "" {
			t.Setenv(buspolicy.PasswordEnv(h.User), h.User+"-pw")
		}
	}
	rendered, err := buspolicy.ServerConfig(users, hosts...)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "nats.conf")
	conf := fmt.Sprintf("host: 127.0.0.1\nport: -1\njetstream { store_dir: %q }\n", t.TempDir()) + rendered
	require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
	opts, err := server.ProcessConfigFile(path)
	require.NoError(t, err, "the rendered configuration is valid nats-server configuration")
	opts.NoLog, opts.NoSigs, opts.ServerName = true, true, "policy"
	assert.Equal(t, int32(buspolicy.MaxPayload), opts.MaxPayload, "max_payload")
	require.Len(t, opts.Users, len(buspolicy.Roles())+len(hosts)-len(opts.Nkeys))
	check := func(name string, perms *server.Permissions, account *server.Account) {
		r, ok := buspolicy.Lookup(name)
		wantAccount := buspolicy.AccountOf(r.Service)
		if host, isHost := hostOf[name]; isHost {
			r, ok, wantAccount = buspolicy.HostRole(host), true, buspolicy.AccountCollectors
		}
		require.True(t, ok, name)
		assert.Equal(t, r.PublishSubjects(), perms.Publish.Allow, "%s publish", name)
		assert.Equal(t, r.SubscribeSubjects(), perms.Subscribe.Allow, "%s subscribe", name)
		assert.Equal(t, r.Responds, perms.Response != nil, "%s responses", name)
		require.NotNil(t, account, "%s has an account", name)
		assert.Equal(t, wantAccount, account.Name, "%s account", name)
	}
	for _, u := range opts.Users {
		check(u.Username, u.Permissions, u.Account)
	}
	for _, u := range opts.Nkeys {
		check(u.Nkey, u.Permissions, u.Account)
	}
	accounts := map[string]*server.Account{}
	for _, a := range opts.Accounts {
		accounts[a.Name] = a
	}
	require.Contains(t, accounts, buspolicy.AccountPipeline)
	require.Contains(t, accounts, buspolicy.AccountCollectors)
	opts.Users = append(opts.Users,
		&server.User{Username: admin, Password: admin + "-pw", Account: accounts[buspolicy.AccountPipeline]},
		&server.User{Username: intruder, Password: intruder + "-pw", Account: accounts[buspolicy.AccountCollectors]})
	_, url := natstest.Run(t, opts)
	return url
}

// client is a connection as one user, with the asynchronous errors
// (permission violations) it receives.
type client struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	errs chan error
}

func connect(t *testing.T, url, user string) *client {
	t.Helper()
	return connectAs(t, natsbus.Config{URL: url, User: user, Password: user + "-pw"})
}

// connectAs is a connection with cfg's credentials.
func connectAs(t *testing.T, cfg natsbus.Config) *client {
	t.Helper()
	c := &client{errs: make(chan error, 64)}
	nc, err := natsbus.Connect(cfg, "policy-test", func(o *nats.Options) error {
		o.AsyncErrorCB = func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case c.errs <- err:
			default:
			}
		}
		return nil
	})
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	c.nc = nc
	c.js, err = jetstream.New(nc)
	require.NoError(t, err)
	return c
}

// violation waits for a permissions violation naming subject.
func (c *client) violation(t *testing.T, subject string) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case err := <-c.errs:
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), subject) {
				return
			}
		case <-deadline:
			t.Fatalf("no permissions violation for %s", subject)
		}
	}
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func target() events.Target { return events.Target{Kind: "systemd.unit", Identifier: "agent.service"} }

func evidenceMsg(t *testing.T, n int) *nats.Msg {
	t.Helper()
	s := snapshot.New(snapshot.Target{Kind: "systemd.unit", Identifier: "agent.service"}, snapshot.Record{
		Plane: snapshot.Live, Kind: "systemd.unit",
		Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
		Data:   snapshot.Data{"main_pid": snapshot.Int(int64(n))},
	})
	p, err := events.NewEvidenceCollected("web-01", s, time.Minute)
	require.NoError(t, err)
	m, _, err := binding.NewMsg(events.Source("collector", "web-01"), p)
	require.NoError(t, err)
	return m
}

func verdictMsg(t *testing.T, evidenceID string) *nats.Msg {
	t.Helper()
	digest := "sha256:" + strings.Repeat("ab", 32)
	p := events.Verdict{
		Host: "web-01", Target: target(), Status: events.StatusError,
		SnapshotDigest: digest, EvidenceID: evidenceID, Error: "no baseline",
	}
	m, _, err := binding.NewMsg(events.Source("verifier", "v-0"), p)
	require.NoError(t, err)
	return m
}

// hostKeyMsg is a host.key.changed of host web-01 by actor.
func hostKeyMsg(t *testing.T, actor string) *nats.Msg {
	t.Helper()
	p := events.HostKeyChanged{Host: "web-01", Actor: actor, Keys: []events.KeyChange{
		{Key: signtest.KeyID("web-01"), State: events.KeyEnrolled, Previous: events.KeyPending},
	}}
	m, _, err := binding.NewMsg(events.Source("console", actor), p)
	require.NoError(t, err)
	return m
}

// verifierTopology is what the verifier ensures: the default topology and
// its own evidence-latest bucket.
func verifierTopology() topology.Topology {
	return topology.Verifier(1, topology.ConsumerVerifier)
}

func TestPermissions(t *testing.T) {
	url := runServer(t)
	ctx := ctx(t)
	collector := connect(t, url, buspolicy.Collector)
	verifier := connect(t, url, buspolicy.Verifier)
	auditor := connect(t, url, buspolicy.Auditor)
	attestor := connect(t, url, buspolicy.Attestor)
	console := connect(t, url, buspolicy.Console)
	notifier := connect(t, url, buspolicy.Notifier)
	operator := connect(t, url, admin)

	// The services that ensure the topology at start can, each its part.
	require.NoError(t, verifierTopology().Ensure(ctx, verifier.js), "verifier ensures the topology")
	require.NoError(t, topology.Ensure(ctx, auditor.js, 1), "auditor ensures the topology")
	attestorTopology := topology.Topology{Streams: []jetstream.StreamConfig{topology.New(1).Streams[2]}, Buckets: topology.New(1).Buckets[:1]}
	require.Equal(t, topology.StreamBaselines, attestorTopology.Streams[0].Name)
	require.NoError(t, attestorTopology.Ensure(ctx, attestor.js), "attestor ensures its stream and bucket")

	t.Run("collector publishes evidence", func(t *testing.T) {
		ack, err := collector.js.PublishMsg(ctx, evidenceMsg(t, 1))
		require.NoError(t, err)
		assert.Equal(t, topology.StreamEvidence, ack.Stream)
	})

	t.Run("collector may not publish a verdict", func(t *testing.T) {
		m := verdictMsg(t, "0198d5c4-0000-7000-8000-000000000001")
		require.NoError(t, collector.nc.PublishMsg(m))
		collector.violation(t, m.Subject)
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := collector.js.PublishMsg(short, verdictMsg(t, "0198d5c4-0000-7000-8000-000000000002"), jetstream.WithRetryAttempts(0))
		require.Error(t, err, "no acknowledgement: the server dropped it")
		s, err := operator.js.Stream(ctx, topology.StreamVerdicts)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		assert.Zero(t, info.State.Msgs, "nothing reached the VERDICTS stream")
	})

	// A key change in the audit chain comes from the registry's writers
	// only: a host may not record its own key as enrolled.
	t.Run("collector may not announce a host key", func(t *testing.T) {
		m := hostKeyMsg(t, "first-use")
		require.NoError(t, collector.nc.PublishMsg(m))
		collector.violation(t, m.Subject)
		for _, c := range []*client{verifier, console} {
			ack, err := c.js.PublishMsg(ctx, hostKeyMsg(t, "alice"))
			require.NoError(t, err, "the registry's writers announce its changes")
			assert.Equal(t, topology.StreamBaselines, ack.Stream)
		}
		s, err := operator.js.Stream(ctx, topology.StreamBaselines)
		require.NoError(t, err)
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.FilterHostKey))
		require.NoError(t, err)
		assert.Equal(t, uint64(2), info.State.Msgs, "the collector's did not reach the stream")
	})

	t.Run("collector may not use the JetStream API", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := collector.js.Stream(short, topology.StreamEvidence)
		require.Error(t, err)
		collector.violation(t, "$JS.API.STREAM.INFO.EVIDENCE")
	})

	t.Run("verifier consumes evidence and publishes a verdict", func(t *testing.T) {
		cons, err := verifier.js.Consumer(ctx, topology.StreamEvidence, topology.ConsumerVerifier)
		require.NoError(t, err)
		baselines, err := verifier.js.KeyValue(ctx, topology.BucketBaselines)
		require.NoError(t, err)
		latest, err := verifier.js.KeyValue(ctx, buspolicy.BucketEvidenceLatest)
		require.NoError(t, err)
		verdicts, err := verifier.js.KeyValue(ctx, topology.BucketVerdicts)
		require.NoError(t, err)
		okv, err := operator.js.KeyValue(ctx, topology.BucketBaselines)
		require.NoError(t, err)
		_, err = okv.Put(ctx, topology.BaselineKey(target()), []byte(`{}`))
		require.NoError(t, err)

		st := telemetrytest.New(t)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- natsbus.Consume(cctx, cons, func(hctx context.Context, m jetstream.Msg) error {
				if _, err := baselines.Get(hctx, topology.BaselineKey(target())); err != nil {
					return natsbus.Permanent(err)
				}
				key := topology.VerdictKey("web-01", target())
				if _, err := latest.Put(hctx, key, []byte(`{}`)); err != nil {
					return err
				}
				if _, err := verdicts.Put(hctx, key, []byte(`{}`)); err != nil {
					return err
				}
				_, err := natsbus.NewPublisher(verifier.js, telemetry.Providers{}).Publish(hctx, verdictMsg(t, m.Headers().Get(binding.HeaderMsgID)))
				return err
			}, natsbus.Options{JetStream: verifier.js, Source: "/verifier/v-0", Telemetry: st.Providers})
		}()
		natstest.CheckFor(t, 15*time.Second, 10*time.Millisecond, func() error {
			if n := st.Sum(t, natsbus.MetricAcked); n != 1 {
				return fmt.Errorf("acked %d, nacked %d, dead-lettered %d", n, st.Sum(t, natsbus.MetricNacked), st.Sum(t, natsbus.MetricDeadLettered))
			}
			return nil
		})
		cancel()
		require.NoError(t, <-done)
		assert.Zero(t, st.Sum(t, natsbus.MetricConsumeErrors, natsbus.AttrReason.String(natsbus.ReasonAck))+
			st.Sum(t, natsbus.MetricConsumeErrors, natsbus.AttrReason.String(natsbus.ReasonFetch)))
		s, err := operator.js.Stream(ctx, topology.StreamVerdicts)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), info.State.Msgs, "the verdict is stored")
		// The verifier looks a verdict up by sequence and subject (one
		// verdict per evidence across a stop: services/verifier stored).
		vs, err := verifier.js.Stream(ctx, topology.StreamVerdicts)
		require.NoError(t, err)
		got, err := vs.GetMsg(ctx, 1, jetstream.WithGetMsgSubject("rt.verdict.web-01.*"))
		require.NoError(t, err, "the verifier reads VERDICTS by sequence")
		assert.Equal(t, "rt.verdict.web-01.error", got.Subject)

		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = verifier.js.PublishMsg(short, evidenceMsg(t, 9), jetstream.WithRetryAttempts(0))
		require.Error(t, err, "the verifier publishes no evidence")
		verifier.violation(t, "rt.evidence.")
		short2, cancel2 := context.WithTimeout(ctx, time.Second)
		defer cancel2()
		_, err = baselines.Put(short2, topology.BaselineKey(target()), []byte(`{}`))
		require.Error(t, err, "the verifier does not write baselines")
		verifier.violation(t, "$KV.baselines.")
	})

	// The silence sweep lists the latest verdicts and the registry's view
	// follows the host records: key-value watches, each an ephemeral
	// ordered consumer the verifier creates, answers the flow control of
	// and deletes when it stops. Without their grants the watch is
	// refused, and silence never becomes STALE as deployed.
	t.Run("verifier watches its buckets", func(t *testing.T) {
		for _, bucket := range []string{topology.BucketVerdicts, topology.BucketHosts} {
			okv, err := operator.js.KeyValue(ctx, bucket)
			require.NoError(t, err)
			for i := range 3 {
				_, err := okv.Put(ctx, fmt.Sprintf("web-%02d", i), []byte(`{}`))
				require.NoError(t, err)
			}
			kv, err := verifier.js.KeyValue(ctx, bucket)
			require.NoError(t, err)
			for _, opts := range [][]jetstream.WatchOpt{{jetstream.MetaOnly(), jetstream.IgnoreDeletes()}, nil} {
				w, err := kv.WatchAll(ctx, opts...)
				require.NoError(t, err, "watch %s", bucket)
				n := 0
				for e := range w.Updates() {
					if e == nil {
						break
					}
					n++
				}
				assert.GreaterOrEqual(t, n, 3, bucket)
				require.NoError(t, w.Stop(), "stop the watch of %s (its consumer deleted)", bucket)
			}
			keys, err := kv.ListKeys(ctx)
			require.NoError(t, err)
			n := 0
			for range keys.Keys() {
				n++
			}
			assert.GreaterOrEqual(t, n, 3, bucket)
		}
		select {
		case err := <-verifier.errs:
			t.Fatalf("the verifier's watches: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		kv, err := verifier.js.KeyValue(ctx, topology.BucketBaselines)
		require.NoError(t, err)
		_, err = kv.WatchAll(short)
		require.Error(t, err, "the verifier watches only its own buckets")
		verifier.violation(t, "$JS.API.CONSUMER.CREATE.KV_baselines")
	})

	t.Run("auditor reads every stream", func(t *testing.T) {
		for _, s := range []string{topology.StreamEvidence, topology.StreamVerdicts} {
			st, err := auditor.js.Stream(ctx, s)
			require.NoError(t, err)
			info, err := st.Info(ctx)
			require.NoError(t, err)
			_, err = st.GetMsg(ctx, info.State.FirstSeq)
			require.NoError(t, err, "re-read %s", s)
			cons, err := auditor.js.Consumer(ctx, s, topology.ConsumerAuditor)
			require.NoError(t, err, s)
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			require.NoError(t, err)
			n := 0
			for m := range batch.Messages() {
				require.NoError(t, m.DoubleAck(ctx))
				n++
			}
			require.NoError(t, batch.Error())
			assert.Equal(t, 1, n, s)
		}
		// The writer leases: the bucket ensured, a lease taken, renewed,
		// read and released, as the auditor does at start and shutdown.
		kv, err := auditor.js.CreateOrUpdateKeyValue(ctx, topology.AuditorLeases(1, 30*time.Second))
		require.NoError(t, err, "auditor ensures its lease bucket")
		key := topology.ConsumerAuditor + "." + topology.StreamEvidence
		rev, err := kv.Create(ctx, key, []byte(`{"instance":"a"}`))
		require.NoError(t, err)
		rev, err = kv.Update(ctx, key, []byte(`{"instance":"a"}`), rev)
		require.NoError(t, err)
		_, err = kv.Get(ctx, key)
		require.NoError(t, err)
		require.NoError(t, kv.Delete(ctx, key, jetstream.LastRevision(rev)))

		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		err = auditor.js.DeleteStream(short, topology.StreamEvidence)
		require.Error(t, err, "no service deletes a stream")
		auditor.violation(t, "$JS.API.STREAM.DELETE.EVIDENCE")
		require.NoError(t, auditor.nc.Publish(events.EvidenceSubject("web-01", "git"), nil))
		auditor.violation(t, "rt.evidence.web-01.git")
	})

	t.Run("attestor answers sign requests, nobody else can", func(t *testing.T) {
		sub, err := attestor.nc.QueueSubscribe(buspolicy.AttestSubject, "attestor", func(m *nats.Msg) {
			_ = m.Respond([]byte(`{"signed":true}`))
		})
		require.NoError(t, err)
		defer func() { require.NoError(t, sub.Unsubscribe()) }()
		require.NoError(t, attestor.nc.Flush())

		reply, err := operator.nc.RequestWithContext(ctx, buspolicy.AttestSubject, []byte(`{}`))
		require.NoError(t, err)
		assert.JSONEq(t, `{"signed":true}`, string(reply.Data))

		_, err = collector.nc.Subscribe(buspolicy.AttestSubject, func(*nats.Msg) {})
		require.NoError(t, err, "refused asynchronously")
		collector.violation(t, buspolicy.AttestSubject)
		_, err = verifier.nc.QueueSubscribe(buspolicy.AttestSubject, "attestor", func(*nats.Msg) {})
		require.NoError(t, err)
		verifier.violation(t, buspolicy.AttestSubject)

		kv, err := attestor.js.KeyValue(ctx, topology.BucketBaselines)
		require.NoError(t, err)
		_, err = kv.Get(ctx, topology.BaselineKey(target()))
		require.NoError(t, err, "the attestor reads the baseline it signs")
		_, err = kv.Put(ctx, events.AttestationKey(target()), []byte(`{}`))
		require.NoError(t, err, "the attestor writes the baseline's attestation record")
		refused, cancel := context.WithTimeout(ctx, time.Second) // no acknowledgement comes
		defer cancel()
		_, err = kv.Put(refused, topology.BaselineKey(target()), []byte(`{}`))
		require.Error(t, err, "but not a baseline")
		attestor.violation(t, "$KV."+topology.BucketBaselines+"."+topology.BaselineKey(target()))
		require.NoError(t, attestor.nc.Publish(events.FilterVerdict[:len(events.FilterVerdict)-1]+"web-01.pass", nil))
		attestor.violation(t, "rt.verdict.web-01.pass")
	})

	t.Run("console approves a baseline and a key, and judges nothing", func(t *testing.T) {
		kv, err := console.js.KeyValue(ctx, topology.BucketBaselines)
		require.NoError(t, err)
		_, err = kv.Put(ctx, topology.BaselineKey(target()), []byte(`{}`))
		require.NoError(t, err, "the console writes a baseline")
		refused, cancel := context.WithTimeout(ctx, time.Second) // no acknowledgement comes
		defer cancel()
		_, err = kv.Put(refused, events.AttestationKey(target()), []byte(`{}`))
		require.Error(t, err, "but not its attestation record")
		console.violation(t, "$KV."+topology.BucketBaselines+"."+events.AttestationKey(target()))
		hosts, err := console.js.KeyValue(ctx, topology.BucketHosts)
		require.NoError(t, err)
		_, err = hosts.Put(ctx, "web-01", []byte(`{}`))
		require.NoError(t, err, "the console enrolls a host's key")
		w, err := console.js.KeyValue(ctx, topology.BucketVerdicts)
		require.NoError(t, err)
		watch, err := w.WatchAll(ctx)
		require.NoError(t, err, "the console watches the latest verdicts")
		require.NoError(t, watch.Stop())
		refused, cancel = context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = w.Put(refused, "web-01.x", []byte(`{}`))
		require.Error(t, err, "but writes none")
		console.violation(t, "$KV."+topology.BucketVerdicts+".web-01.x")
		for _, subject := range []string{"rt.verdict.web-01.pass", "rt.evidence.web-01.git"} {
			require.NoError(t, console.nc.Publish(subject, nil))
			console.violation(t, subject)
		}
	})

	// The notifier reads verdicts and runnable.modified through its own
	// consumers, filtered as created, and nothing else: no other filter,
	// no other consumer, no publish.
	t.Run("notifier reads verdicts and integrity events only", func(t *testing.T) {
		consumer := func(name, filter string) jetstream.ConsumerConfig {
			return jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: filter}
		}
		cons, err := notifier.js.CreateOrUpdateConsumer(ctx, topology.StreamVerdicts, consumer(buspolicy.NotifierConsumer, events.FilterVerdict))
		require.NoError(t, err, "its verdicts consumer")
		_, err = notifier.js.CreateOrUpdateConsumer(ctx, topology.StreamEvidence, consumer(buspolicy.NotifierConsumer, events.FilterIntegrity))
		require.NoError(t, err, "its runnable.modified consumer")
		_, err = verifier.js.PublishMsg(ctx, verdictMsg(t, "0198d5c4-0000-7000-8000-000000000009"))
		require.NoError(t, err)
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			require.NoError(t, m.DoubleAck(ctx))
			n++
		}
		require.NoError(t, batch.Error())
		assert.Equal(t, 1, n, "it reads a verdict")

		for _, c := range []struct{ stream, name, filter string }{
			{topology.StreamEvidence, buspolicy.NotifierConsumer, events.FilterEvidence}, // the evidence itself
			{topology.StreamEvidence, "notifier-2", events.FilterIntegrity},
			{topology.StreamDLQ, buspolicy.NotifierConsumer, events.FilterDeadLetter},
		} {
			short, cancel := context.WithTimeout(ctx, time.Second)
			_, err := notifier.js.CreateOrUpdateConsumer(short, c.stream, consumer(c.name, c.filter))
			cancel()
			require.Error(t, err, "%s %s %s", c.stream, c.name, c.filter)
			notifier.violation(t, "$JS.API.CONSUMER.CREATE."+c.stream+"."+c.name)
		}
		for _, subject := range []string{"rt.verdict.web-01.pass", events.DeadLetterSubject("VERDICTS", "rt.verdict.web-01.pass")} {
			require.NoError(t, notifier.nc.Publish(subject, nil))
			notifier.violation(t, subject)
		}
		alerts, err := notifier.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: buspolicy.BucketNotifierAlerts, History: 1})
		require.NoError(t, err, "its alerts bucket")
		_, err = alerts.Put(ctx, "web-01.x", []byte(`{}`))
		require.NoError(t, err)
		keys, err := alerts.ListKeys(ctx)
		require.NoError(t, err)
		for range keys.Keys() {
		}
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		verdicts, err := notifier.js.KeyValue(short, topology.BucketVerdicts)
		if err == nil {
			_, err = verdicts.Get(short, "web-01.x")
		}
		require.Error(t, err, "no other bucket")
	})

	t.Run("collector answers collect-now requests", func(t *testing.T) {
		subject := events.CollectNowSubject("web-01")
		sub, err := collector.nc.Subscribe(subject, func(m *nats.Msg) { _ = m.Respond([]byte("ok")) })
		require.NoError(t, err)
		defer func() { require.NoError(t, sub.Unsubscribe()) }()
		require.NoError(t, collector.nc.Flush())
		reply, err := operator.nc.RequestWithContext(ctx, subject, []byte("all"))
		require.NoError(t, err)
		assert.Equal(t, "ok", string(reply.Data))
	})
}

// TestRolesAreClosed checks properties of the policy itself.
func TestRolesAreClosed(t *testing.T) {
	roles := buspolicy.Roles()
	require.Len(t, roles, 6)
	publishes := func(service, subject string) bool {
		r, _ := buspolicy.Lookup(service)
		return slices.ContainsFunc(r.PublishSubjects(), func(s string) bool { return matches(s, subject) })
	}
	for _, r := range roles {
		for _, s := range append(r.PublishSubjects(), r.SubscribeSubjects()...) {
			assert.NotEqual(t, ">", s, "%s has a catch-all grant", r.Service)
			if strings.Contains(s, ".DELETE.") {
				// Only the ephemeral consumers of a key-value watch, on a
				// bucket's stream: never a stream, a bucket or a durable.
				assert.Regexp(t, `^\$JS\.API\.CONSUMER\.DELETE\.KV_[a-z-]+\.>$`, s, "%s may delete", r.Service)
				assert.Contains(t, []string{buspolicy.Verifier, buspolicy.Console, buspolicy.Notifier}, r.Service, "%s may delete", r.Service)
			}
			assert.NotContains(t, s, ".PURGE.", "%s may purge", r.Service)
		}
		assert.Equal(t, r.Service == buspolicy.Verifier, publishes(r.Service, "rt.verdict.web-01.pass"), "only the verifier publishes verdicts (%s)", r.Service)
		assert.Equal(t, r.Service == buspolicy.Collector, publishes(r.Service, "rt.evidence.web-01.git"), "only the collector publishes evidence (%s)", r.Service)
		assert.Equal(t, r.Service == buspolicy.Attestor, slices.Contains(r.SubscribeSubjects(), buspolicy.AttestSubject), "only the attestor takes sign requests (%s)", r.Service)
	}
	_, ok := buspolicy.Lookup("nobody")
	assert.False(t, ok)
}

// matches reports whether a permission subject (with wildcards) matches a
// literal subject.
func matches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(p) == len(s)
}
