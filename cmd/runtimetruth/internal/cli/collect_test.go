package cli_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// victim is the host whose collect-now requests the impostor answers; its
// name has a dot, so its subject shows the token encoding.
const victim = "web-01.example"

// collectBus is a JetStream server with a verifier (which creates the
// host registry) and a real collector of victim with one git target,
// "repo", whose key is enrolled; the collector reaches the server through
// a gate the test can hold shut; tel is the collector's telemetry.
type collectBus struct {
	url  string
	nc   *nats.Conn
	col  *collector.Collector
	tel  *telemetrytest.Recorder
	id   *collector.Identity
	gate *gate
}

func startCollectBus(t *testing.T) *collectBus {
	t.Helper()
	b := startApproveBus(t)
	g := startGate(t, b.url)
	cfg := collector.NewDefaultConfig()
	cfg.Host = victim
	cfg.StateDir = t.TempDir()
	cfg.NATS.URL = g.url
	cfg.Targets = []collector.TargetConfig{{Name: "repo", Kind: collector.KindGit, Path: gitRepo(t), Interval: time.Hour}}
	tel := telemetrytest.New(t)
	col, err := collector.New(cfg, collector.Settings{Telemetry: tel.Providers})
	require.NoError(t, err)
	startComponent(t, col)
	id, err := collector.LoadIdentity(cfg)
	require.NoError(t, err)
	r := run(t, "host", "approve", victim, "--key", id.KeyID(), "--nats", b.url)
	require.Equal(t, 0, r.code, r.stderr)
	nc, _ := natstest.Connect(t, b.url)
	// The collector is subscribed once a request is answered.
	natstest.CheckFor(t, 30*time.Second, 25*time.Millisecond, func() error {
		_, err := nc.Request(collector.CollectNowSubject(victim), []byte(`{"target":"nope","nonce":"probe"}`), 10*time.Second)
		return err
	})
	return &collectBus{url: b.url, nc: nc, col: col, tel: tel, id: id, gate: g}
}

// collect runs `runtimetruth collect` against the bus.
func (b *collectBus) collect(t *testing.T, args ...string) result {
	t.Helper()
	return run(t, append(append([]string{"collect"}, args...), "--nats", b.url)...)
}

// impostor answers every collect-now request to victim with what answer
// returns, before the collector sees the request: the collector's side of
// the gate opens only once the impostor's replies are on the server.
func (b *collectBus) impostor(t *testing.T, answer func(req collector.CollectNowRequest) [][]byte) {
	t.Helper()
	release := b.gate.hold()
	t.Cleanup(release)
	nc, _ := natstest.Connect(t, b.url)
	_, err := nc.Subscribe(collector.CollectNowSubject(victim), func(m *nats.Msg) {
		defer release()
		req, err := collector.ParseCollectNowRequest(m.Data)
		if err != nil {
			return
		}
		for _, r := range answer(req) {
			_ = m.Respond(r)
		}
		_ = nc.Flush()
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
}

// sign signs rep as a collect-now reply with s.
func sign(t *testing.T, s *dsse.Signer, rep collector.CollectNowReply) []byte {
	t.Helper()
	payload, err := json.Marshal(rep)
	require.NoError(t, err)
	env, err := s.SignEnvelope(collector.ReplyPayloadType, payload)
	require.NoError(t, err)
	return env
}

// forged is what an impostor claims: victim's repo collected, PASS-worthy.
func forged(req collector.CollectNowRequest) collector.CollectNowReply {
	return collector.CollectNowReply{Host: victim, Target: req.Target, Nonce: req.Nonce, Time: time.Now().UTC(),
		Results: []collector.Result{{Target: "repo", Kind: "git", Status: collector.StatusCollected,
			EventID: "0190f0c2-0000-7000-8000-000000000001", Digest: "sha256:" + strings.Repeat("0", 64)}}}
}

func newSigner(t *testing.T) *dsse.Signer {
	t.Helper()
	return signtest.Random()
}

var collectedRepo = regexp.MustCompile(`(?m)^COLLECTED\s+repo\s+git\s+sha256:[0-9a-f]{64}  event \S+$`)

// TestCollect: the happy path, human and JSON, every target or one; an
// unknown target is the collector's error, signed, and exits 1.
func TestCollect(t *testing.T) {
	b := startCollectBus(t)

	r := b.collect(t, victim)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "host "+victim+" replied at ")
	assert.Contains(t, r.stdout, "signed by its enrolled key "+b.id.KeyID()+"\n")
	assert.Regexp(t, collectedRepo, r.stdout)
	assert.NotContains(t, r.stdout, "REFUSED")

	r = b.collect(t, victim, "repo", "--json")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	var rep struct {
		Version  int    `json:"report_schema_version"`
		Host     string `json:"host"`
		Target   string `json:"target"`
		Nonce    string `json:"nonce"`
		Accepted *struct {
			Key   string                    `json:"key"`
			Reply collector.CollectNowReply `json:"reply"`
		} `json:"accepted"`
		Refused []any `json:"refused"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.Equal(t, 1, rep.Version)
	assert.Equal(t, victim, rep.Host)
	assert.Equal(t, "repo", rep.Target)
	assert.Regexp(t, `^[0-9a-f]{32}$`, rep.Nonce)
	require.NotNil(t, rep.Accepted)
	assert.Equal(t, b.id.KeyID(), rep.Accepted.Key)
	assert.Equal(t, rep.Nonce, rep.Accepted.Reply.Nonce)
	require.Len(t, rep.Accepted.Reply.Results, 1)
	assert.Equal(t, collector.StatusCollected, rep.Accepted.Reply.Results[0].Status)
	assert.Empty(t, rep.Refused)

	r = b.collect(t, victim, "nope")
	assert.Equal(t, 1, r.code, r.stdout)
	assert.Contains(t, r.stderr, `runtimetruth: error: host `+victim+`: unknown target "nope"`)
}

// TestCollectRefusesImpostors: whatever answers a request first (another
// collector's key, unsigned, a replay of an earlier reply, the host's own
// key relayed from another request, a flipped bit), its reply is refused
// with the reason, and the host's authentic reply is still accepted.
func TestCollectRefusesImpostors(t *testing.T) {
	b := startCollectBus(t)
	impostor := newSigner(t)
	host := b.id.Signer() // the victim's key, for replies relayed from other requests
	earlier, err := b.nc.Request(collector.CollectNowSubject(victim), []byte(`{"target":"repo","nonce":"earlier"}`), 30*time.Second)
	require.NoError(t, err)
	_, _, err = collector.OpenCollectNowReply(earlier.Data, func(string) (ed25519.PublicKey, error) { return b.id.PublicKey(), nil })
	require.NoError(t, err, "an authentic reply to replay")

	for _, tc := range []struct {
		name   string
		answer func(t *testing.T, req collector.CollectNowRequest) [][]byte
		says   string
	}{
		{name: "another collector's key", says: "not an enrolled key of the host",
			answer: func(t *testing.T, req collector.CollectNowRequest) [][]byte {
				return [][]byte{sign(t, impostor, forged(req))}
			}},
		{name: "unsigned", says: `unsigned: not a DSSE envelope: json: cannot decode JSON string into Go dsse.dsseEnvelope at "/host": unknown object member name`,
			answer: func(t *testing.T, req collector.CollectNowRequest) [][]byte {
				data, err := json.Marshal(forged(req))
				assert.NoError(t, err)
				return [][]byte{data}
			}},
		{name: "a replay of an earlier reply", says: `its nonce "earlier" is not the request's (a replay?)`,
			answer: func(*testing.T, collector.CollectNowRequest) [][]byte { return [][]byte{earlier.Data} }},
		{name: "the host's key, for another host", says: `signed for host "db-01", not "` + victim + `"`,
			answer: func(t *testing.T, req collector.CollectNowRequest) [][]byte {
				rep := forged(req)
				rep.Host = "db-01"
				return [][]byte{sign(t, host, rep)}
			}},
		{name: "the host's key, for another target", says: `it answers for target "", not "repo"`,
			answer: func(t *testing.T, req collector.CollectNowRequest) [][]byte {
				rep := forged(req)
				rep.Target = ""
				return [][]byte{sign(t, host, rep)}
			}},
		{name: "a flipped bit", says: "bad signature: by key " + b.id.KeyID(),
			answer: func(t *testing.T, req collector.CollectNowRequest) [][]byte {
				var env map[string]any
				assert.NoError(t, json.Unmarshal(sign(t, host, forged(req)), &env))
				payload, err := base64.StdEncoding.DecodeString(env["payload"].(string))
				assert.NoError(t, err)
				env["payload"] = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(payload), "repo", "rep0", 1)))
				data, err := json.Marshal(env)
				assert.NoError(t, err)
				return [][]byte{data}
			}},
		{name: "control characters", says: `key ed25519:\x1b]0;pwned\a: not an enrolled key of the host`,
			answer: func(t *testing.T, req collector.CollectNowRequest) [][]byte {
				var env map[string]any
				assert.NoError(t, json.Unmarshal(sign(t, impostor, forged(req)), &env))
				env["signatures"].([]any)[0].(map[string]any)["keyid"] = "ed25519:\x1b]0;pwned\a"
				data, err := json.Marshal(env)
				assert.NoError(t, err)
				return [][]byte{data}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b.impostor(t, func(req collector.CollectNowRequest) [][]byte { return tc.answer(t, req) })
			r := b.collect(t, victim, "repo", "--timeout", "60s")
			require.Equal(t, 0, r.code, r.stdout+r.stderr)
			assert.Regexp(t, `(?m)^REFUSED  a reply: (.*: )?`+regexp.QuoteMeta(tc.says)+`$`, r.stdout)
			assert.Equal(t, 1, strings.Count(r.stdout, "REFUSED"))
			assert.NotContains(t, r.stdout, "\x1b", "escaped")
			assert.Regexp(t, collectedRepo, r.stdout, "the authentic reply")
			assert.Contains(t, r.stdout, "signed by its enrolled key "+b.id.KeyID()+"\n")
		})
	}
}

// TestCollectReportsAFloodBounded: replies refused beyond the first 16
// are counted, not listed.
func TestCollectReportsAFloodBounded(t *testing.T) {
	b := startCollectBus(t)
	impostor := newSigner(t)
	b.impostor(t, func(req collector.CollectNowRequest) [][]byte {
		out := make([][]byte, 20)
		for i := range out {
			out[i] = sign(t, impostor, forged(req))
		}
		return out
	})
	r := b.collect(t, victim, "repo", "--json")
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	var rep struct {
		Accepted *struct {
			Key string `json:"key"`
		} `json:"accepted"`
		Refused []struct {
			Key    string `json:"key"`
			Reason string `json:"reason"`
		} `json:"refused"`
		More int `json:"refused_more"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.NotNil(t, rep.Accepted)
	assert.Equal(t, b.id.KeyID(), rep.Accepted.Key)
	require.Len(t, rep.Refused, 16)
	assert.Equal(t, 4, rep.More)
	assert.Equal(t, impostor.KeyID(), rep.Refused[0].Key)
	assert.Contains(t, rep.Refused[0].Reason, "not an enrolled key of the host")
}

// TestCollectWithoutAnAuthenticReply: when only an impostor answers, the
// command waits out --timeout, reports what it refused and exits 1.
func TestCollectWithoutAnAuthenticReply(t *testing.T) {
	b := startCollectBus(t)
	shutdownCtx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	require.NoError(t, b.col.Shutdown(shutdownCtx))
	impostor := newSigner(t)
	nc, _ := natstest.Connect(t, b.url)
	_, err := nc.Subscribe(collector.CollectNowSubject(victim), func(m *nats.Msg) {
		req, err := collector.ParseCollectNowRequest(m.Data)
		if err == nil {
			_ = m.Respond(sign(t, impostor, forged(req)))
		}
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())

	r := b.collect(t, victim, "repo", "--timeout", "1s")
	assert.Equal(t, 1, r.code, r.stdout)
	assert.Contains(t, r.stdout, "REFUSED  a reply: key "+impostor.KeyID()+": not an enrolled key of the host\n")
	assert.NotContains(t, r.stdout, "COLLECTED")
	assert.Contains(t, r.stderr, "runtimetruth: error: no authentic reply from host "+victim+" within the timeout (1 refused; see --timeout)")

	r = b.collect(t, victim, "repo", "--timeout", "1s", "--json")
	assert.Equal(t, 1, r.code)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.Nil(t, rep["accepted"])
	assert.Len(t, rep["refused"], 1)
}

// TestCollectNeedsAnEnrolledHost: a host the registry does not hold, or
// holds only a pending key of, is refused before any request is sent; a
// host nothing listens for fails at once.
func TestCollectNeedsAnEnrolledHost(t *testing.T) {
	b := startCollectBus(t)
	before := b.tel.Sum(t, collector.MetricControlRequests)

	r := b.collect(t, "nowhere.example")
	assert.Equal(t, 1, r.code, r.stdout)
	assert.Contains(t, r.stderr, "runtimetruth: error: host nowhere.example is not enrolled: the registry has no key to check its reply with (runtimetruth host approve nowhere.example --key KEY)")

	reg := hostsOf(t, b.url)
	require.ErrorIs(t, reg.Admit(t.Context(), victim+"-pending", newSigner(t).KeyID()), verifier.ErrNotEnrolled)
	r = b.collect(t, victim+"-pending")
	assert.Equal(t, 1, r.code, r.stdout)
	assert.Contains(t, r.stderr, "none of its 1 key(s) is enrolled (1 pending; runtimetruth host approve "+victim+"-pending)")
	assert.Equal(t, before, b.tel.Sum(t, collector.MetricControlRequests), "no request sent")

	r = run(t, "host", "approve", "silent.example", "--key", newSigner(t).KeyID(), "--nats", b.url)
	require.Equal(t, 0, r.code, r.stderr)
	r = b.collect(t, "silent.example")
	assert.Equal(t, 1, r.code, r.stdout)
	assert.Contains(t, r.stderr, "no collector is listening on rt.ctl.collect.silent=2Eexample")

	r = b.collect(t, victim, "--timeout", "0s")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "want a positive duration")
	r = b.collect(t)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "usage: runtimetruth collect HOST [TARGET]")
}

// hostsOf opens the host registry on url.
func hostsOf(t *testing.T, url string) *verifier.Hosts {
	t.Helper()
	_, js := natstest.Connect(t, url)
	kv, err := js.KeyValue(t.Context(), topology.BucketHosts)
	require.NoError(t, err)
	return verifier.NewHosts(kv, verifier.EnrollManual)
}

// gate is a TCP proxy to a NATS server (natstest.StartProxy) whose
// server-to-client direction the test can hold shut (hold), so that what
// the server sends a client behind it (a request) arrives only after
// whatever the test does first.
type gate struct {
	url  string
	done chan struct{}

	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func startGate(t *testing.T, serverURL string) *gate {
	t.Helper()
	g := &gate{done: make(chan struct{}), open: make(chan struct{})}
	close(g.open)
	g.url = natstest.StartProxy(t, serverURL, natstest.ProxyHooks{ToClient: g.pass})
	t.Cleanup(func() { close(g.done) }) // before the proxy's: lets a held chunk go
	return g
}

// pass returns once the gate is open (or the test is over).
func (g *gate) pass([]byte) {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-g.done:
	}
}

// hold shuts the gate until release is called (once or more).
func (g *gate) hold() (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.open = ch
	g.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}
