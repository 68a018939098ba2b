package collector_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/gittest"
)

// keyOf trusts pub alone, as a requester trusts a host's enrolled key.
func keyOf(pub ed25519.PublicKey) func(string) (ed25519.PublicKey, error) {
	return func(id string) (ed25519.PublicKey, error) {
		if id != dsse.KeyID(pub) {
			return nil, errors.New("not the host's key")
		}
		return pub, nil
	}
}

// TestCollectNowRequest: a JSON request with a nonce, or a target name as
// plain text, is answered with a reply signed by the collector's key that
// names the host, the request's target and nonce.
func TestCollectNowRequest(t *testing.T) {
	b := runBus(t, t.TempDir(), 0)
	repo := gittest.New(t)
	cfg := testConfig(t, b.url, gitTarget("repo", repo, time.Hour), gitTarget("broken", filepath.Join(t.TempDir(), "gone"), time.Hour))
	tel := telemetrytest.New(t)
	c, _ := newCollector(t, cfg, collector.Settings{Telemetry: tel.Providers})
	require.NoError(t, c.Start(t.Context()))
	b.waitStored(t, 2) // the first collections
	id, err := collector.LoadIdentity(cfg)
	require.NoError(t, err)

	subject := collector.CollectNowSubject(testHost)
	assert.Equal(t, "rt.ctl.collect.test-host=2Eexample", subject)
	request := func(payload string) collector.CollectNowReply {
		t.Helper()
		m, err := b.nc.Request(subject, []byte(payload), 30*time.Second)
		require.NoError(t, err)
		keyID, rep, err := collector.OpenCollectNowReply(m.Data, keyOf(id.PublicKey()))
		require.NoError(t, err, string(m.Data))
		assert.Equal(t, id.KeyID(), keyID)
		assert.Equal(t, testHost, rep.Host)
		assert.False(t, rep.Time.IsZero())
		return rep
	}

	rep := request(`{"target":"repo","nonce":"n-1"}`)
	require.Empty(t, rep.Error)
	assert.Equal(t, "n-1", rep.Nonce)
	assert.Equal(t, "repo", rep.Target)
	require.Len(t, rep.Results, 1)
	r := rep.Results[0]
	assert.Equal(t, collector.Result{Target: "repo", Kind: "git", Status: collector.StatusCollected,
		EventID: r.EventID, Digest: r.Digest}, r)
	msgs := b.waitStored(t, 3)
	assert.Equal(t, r.EventID, msgs[2].m.Header.Get(binding.HeaderMsgID))
	assert.Equal(t, r.Digest, evidence(t, msgs[2]).Digest)
	// The target is still collected every hour: its evidence says so, or
	// the verifier would take the host's silence after it for the end of
	// a one-off collection, and never call the target stale.
	assert.Equal(t, int64(3600), evidence(t, msgs[2]).IntervalSeconds)

	rep = request("") // plain text: every target, no nonce
	assert.Empty(t, rep.Nonce)
	assert.Empty(t, rep.Target)
	require.Len(t, rep.Results, 2)
	byName := map[string]collector.Result{}
	for _, r := range rep.Results {
		byName[r.Target] = r
	}
	assert.Equal(t, collector.StatusCollected, byName["repo"].Status)
	assert.Equal(t, collector.StatusFailed, byName["broken"].Status)
	assert.NotEmpty(t, byName["broken"].Error)
	b.waitStored(t, 5)

	rep = request("nope\n")
	assert.Equal(t, "nope", rep.Target)
	assert.Empty(t, rep.Results)
	assert.Contains(t, rep.Error, "unknown target \"nope\"")

	rep = request(`{"target":"repo","nonce":"n-2","extra":1}`)
	assert.Empty(t, rep.Results)
	assert.Empty(t, rep.Nonce, "a request that cannot be read has no nonce to sign")
	assert.Contains(t, rep.Error, collector.ErrBadRequest.Error())
	assert.Equal(t, int64(4), tel.Sum(t, collector.MetricControlRequests))
}

// TestCollectNowAnswersOnlyItsOwnHost: the collector subscribes to its
// own control subject and nothing else but its inbox, so a request to
// another host's subject has no responder; and a request on another
// subject that reached its handler anyway is dropped unanswered.
func TestCollectNowAnswersOnlyItsOwnHost(t *testing.T) {
	b := runBus(t, t.TempDir(), 0)
	tel := telemetrytest.New(t)
	c, _ := newCollector(t, testConfig(t, b.url, gitTarget("repo", gittest.New(t), time.Hour)), collector.Settings{Telemetry: tel.Providers})
	require.NoError(t, c.Start(t.Context()))
	b.waitStored(t, 1)

	cz, err := b.srv.Connz(&server.ConnzOptions{Subscriptions: true})
	require.NoError(t, err)
	var subs []string
	for _, conn := range cz.Conns {
		if conn.Name == "runtimetruth-collector/"+testHost {
			subs = append(subs, conn.Subs...)
		}
	}
	require.Contains(t, subs, collector.CollectNowSubject(testHost))
	for _, s := range subs {
		if s != collector.CollectNowSubject(testHost) {
			assert.True(t, strings.HasPrefix(s, nats.InboxPrefix), "the collector subscribes to %s", s)
		}
	}
	_, err = b.nc.Request(collector.CollectNowSubject("other-host"), []byte("repo"), 10*time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders)

	inbox := b.nc.NewRespInbox()
	replies, err := b.nc.SubscribeSync(inbox)
	require.NoError(t, err)
	bound, err := b.nc.SubscribeSync(collector.CollectNowSubject("other-host"))
	require.NoError(t, err)
	require.NoError(t, b.nc.PublishRequest(collector.CollectNowSubject("other-host"), inbox, []byte("repo")))
	m, err := bound.NextMsg(10 * time.Second)
	require.NoError(t, err)
	collector.HandleControl(c, m)
	assert.Equal(t, int64(1), tel.Sum(t, collector.MetricControlForeign))
	assert.Zero(t, tel.Sum(t, collector.MetricControlRequests), "nothing collected")
	// The handler is synchronous up to its decision: a reply would have
	// been published before HandleControl returned; a flush round trip
	// later the inbox holds none.
	require.NoError(t, b.nc.Flush())
	_, pending, err := replies.Pending()
	require.NoError(t, err)
	assert.Zero(t, pending)
}

func TestParseCollectNowRequest(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       collector.CollectNowRequest
		bad        string
	}{
		{name: "plain text", data: " repo\n", want: collector.CollectNowRequest{Target: "repo"}},
		{name: "plain text, every target", data: "", want: collector.CollectNowRequest{}},
		{name: "JSON", data: `{"target":"repo","nonce":"0f1e"}`, want: collector.CollectNowRequest{Target: "repo", Nonce: "0f1e"}},
		{name: "JSON, every target", data: `{"nonce":"0f1e"}`, want: collector.CollectNowRequest{Nonce: "0f1e"}},
		{name: "JSON without a nonce", data: `{"target":"repo"}`, bad: "nonce"},
		{name: "a nonce with a space", data: `{"nonce":"a b"}`, bad: "nonce"},
		{name: "a nonce with a control character", data: `{"nonce":"a\u001bb"}`, bad: "nonce"},
		{name: "a long nonce", data: `{"nonce":"` + strings.Repeat("a", collector.MaxNonceLength+1) + `"}`, bad: "nonce"},
		{name: "an unknown field", data: `{"nonce":"a","host":"x"}`, bad: `at "/host": unknown object member name`},
		{name: "two values", data: `{"nonce":"a"}{"nonce":"b"}`, bad: "after top-level value"},
		{name: "malformed JSON", data: `{"nonce":`, bad: "EOF"},
		{name: "too long", data: strings.Repeat("a", collector.MaxRequestSize+1), bad: "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := collector.ParseCollectNowRequest([]byte(tc.data))
			if tc.bad != "" {
				require.ErrorIs(t, err, collector.ErrBadRequest)
				assert.Contains(t, err.Error(), tc.bad)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// replySigner is a signer with a fresh key, standing for a collector's.
func replySigner(t testing.TB) (*dsse.Signer, ed25519.PublicKey) {
	t.Helper()
	s := signtest.Random()
	pub, err := dsse.ParseKeyID(s.KeyID())
	require.NoError(t, err)
	return s, pub
}

func signReply(t testing.TB, s *dsse.Signer, rep collector.CollectNowReply) []byte {
	t.Helper()
	payload, err := json.Marshal(rep)
	require.NoError(t, err)
	env, err := s.SignEnvelope(collector.ReplyPayloadType, payload)
	require.NoError(t, err)
	return env
}

// TestVerifyCollectNowReply: a reply is accepted only when signed by the
// host's key, as a reply, for the host, nonce and target of the request.
func TestVerifyCollectNowReply(t *testing.T) {
	host, pub := replySigner(t)
	impostor, _ := replySigner(t)
	req := collector.CollectNowRequest{Target: "repo", Nonce: "n-1"}
	good := collector.CollectNowReply{Host: testHost, Target: "repo", Nonce: "n-1", Time: time.Unix(1700000000, 0).UTC(),
		Results: []collector.Result{{Target: "repo", Kind: "git", Status: collector.StatusCollected}}}
	with := func(f func(r *collector.CollectNowReply)) collector.CollectNowReply {
		r := good
		f(&r)
		return r
	}
	unsigned, err := json.Marshal(good)
	require.NoError(t, err)
	extra := func() []byte {
		payload := []byte(strings.Replace(string(unsigned), `"host"`, `"verdict":"PASS","host"`, 1))
		env, err := host.SignEnvelope(collector.ReplyPayloadType, payload)
		require.NoError(t, err)
		return env
	}()
	claimType := func() []byte {
		env, err := host.SignEnvelope(collector.ReplyPayloadType+".x", unsigned)
		require.NoError(t, err)
		return env
	}()

	keyID, rep, err := collector.VerifyCollectNowReply(signReply(t, host, good), testHost, req, keyOf(pub))
	require.NoError(t, err)
	assert.Equal(t, host.KeyID(), keyID)
	assert.Equal(t, good, rep)

	for _, tc := range []struct {
		name string
		data []byte
		want error
		says string
	}{
		{name: "unsigned", data: unsigned, want: dsse.ErrUnsigned},
		{name: "another key", data: signReply(t, impostor, good), says: "not the host's key"},
		{name: "another payload type", data: claimType, want: dsse.ErrBadSignature},
		{name: "another host", data: signReply(t, host, with(func(r *collector.CollectNowReply) { r.Host = "other" })), want: collector.ErrReplyMismatch, says: "host"},
		{name: "another nonce", data: signReply(t, host, with(func(r *collector.CollectNowReply) { r.Nonce = "n-0" })), want: collector.ErrReplyMismatch, says: "nonce"},
		{name: "another target", data: signReply(t, host, with(func(r *collector.CollectNowReply) { r.Target = "" })), want: collector.ErrReplyMismatch, says: "target"},
		{name: "an unknown field", data: extra, want: collector.ErrBadReply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := collector.VerifyCollectNowReply(tc.data, testHost, req, keyOf(pub))
			require.Error(t, err)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			assert.Contains(t, err.Error(), tc.says)
		})
	}
}

// FuzzVerifyCollectNowReply: whatever the bytes, the reply decoder returns
// an error or a reply the host's key signed for this request, never
// panics.
func FuzzVerifyCollectNowReply(f *testing.F) {
	host, pub := replySigner(f)
	req := collector.CollectNowRequest{Target: "repo", Nonce: "n-1"}
	good := collector.CollectNowReply{Host: testHost, Target: "repo", Nonce: "n-1", Time: time.Unix(1700000000, 0).UTC(),
		Results: []collector.Result{{Target: "repo", Kind: "git", Status: collector.StatusCollected}}}
	env := signReply(f, host, good)
	f.Add(env)
	unsigned, err := json.Marshal(good)
	require.NoError(f, err)
	f.Add(unsigned)
	f.Add(signReply(f, host, collector.CollectNowReply{Host: "other", Nonce: "n-1", Target: "repo"}))
	f.Add([]byte(`{"payloadType":"` + collector.ReplyPayloadType + `","payload":"e30=","signatures":[{"keyid":"k","sig":""}]}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		keyID, rep, err := collector.VerifyCollectNowReply(data, testHost, req, keyOf(pub))
		if err != nil {
			return
		}
		assert.Equal(t, host.KeyID(), keyID)
		assert.Equal(t, testHost, rep.Host)
		assert.Equal(t, req.Nonce, rep.Nonce)
		assert.Equal(t, good, rep, "only the reply the key signed verifies")
	})
}

// FuzzParseCollectNowRequest: whatever the bytes, a request is refused or
// read with a bounded, printable nonce, never a panic.
func FuzzParseCollectNowRequest(f *testing.F) {
	for _, s := range []string{"", "repo", `{"target":"repo","nonce":"0f1e"}`, `{"nonce":""}`, `{"nonce":"a","x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := collector.ParseCollectNowRequest(data)
		if err != nil {
			return
		}
		assert.LessOrEqual(t, len(req.Nonce), collector.MaxNonceLength)
		assert.False(t, strings.ContainsFunc(req.Nonce, func(r rune) bool { return r <= ' ' || r > '~' }))
	})
}
