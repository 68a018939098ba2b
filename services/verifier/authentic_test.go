package verifier_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// signer is a collector's key.
func signer(t *testing.T) (*dsse.Signer, string) {
	t.Helper()
	s := signtest.Random()
	return s, s.KeyID()
}

// signedMsg is the evidence of s collected on host, signed by s.
func signedMsg(t *testing.T, host string, snap *snapshot.Snapshot, s *dsse.Signer, opts ...binding.Option) (*nats.Msg, string) {
	t.Helper()
	p, err := events.NewEvidenceCollected(host, snap, time.Minute)
	require.NoError(t, err)
	if s != nil {
		opts = append(opts, binding.WithSigner(s))
	}
	m, e, err := binding.NewMsg(events.Source("collector", host), p, opts...)
	require.NoError(t, err)
	return m, e.ID()
}

// rejections waits for n dead-letter records of EVIDENCE and returns
// their errors by evidence id.
func rejections(ctx context.Context, t *testing.T, js jetstream.JetStream, n int) map[string]string {
	t.Helper()
	out := map[string]string{}
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		out = map[string]string{}
		for _, p := range streamEvents(ctx, t, js, topology.StreamDLQ) {
			r := p.Payload.(events.EventRejected)
			out[r.Envelope.ID] = r.Error
		}
		if len(out) < n {
			return fmt.Errorf("%d dead-letter records, want %d", len(out), n)
		}
		return nil
	})
	return out
}

// TestEvidenceMustBeAuthentic: with enrollment on, only evidence signed
// by the host's enrolled key, with a time near the verifier's clock, gets
// a verdict; each other message is dead-lettered with its reason and
// changes nothing.
func TestEvidenceMustBeAuthentic(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, func(c *verifier.Config) { c.Enrollment = "first-use" })
	host := "web-01"
	owner, ownerKey := signer(t)
	impostor, _ := signer(t)

	m, first := signedMsg(t, host, snap(unit(1)), owner)
	_, err := js.PublishMsg(ctx, m)
	require.NoError(t, err)
	assert.Equal(t, host, verdictOf(ctx, t, js, first).Host, "the first key is pinned and its evidence verified")

	type attack struct {
		name, reason string
		msg          func() (*nats.Msg, string)
	}
	attacks := []attack{
		{"another key for the host", "key_changed", func() (*nats.Msg, string) { return signedMsg(t, host, snap(unit(2)), impostor) }},
		{"unsigned", "unsigned", func() (*nats.Msg, string) { return signedMsg(t, host, snap(unit(3)), nil) }},
		{"an hour old", "clock_skew", func() (*nats.Msg, string) {
			return signedMsg(t, host, snap(unit(4)), owner, binding.WithTime(time.Now().Add(-time.Hour)))
		}},
		{"from the future", "clock_skew", func() (*nats.Msg, string) {
			return signedMsg(t, host, snap(unit(5)), owner, binding.WithTime(time.Now().Add(time.Hour)))
		}},
		{"a flipped bit of the data", "claim_mismatch", func() (*nats.Msg, string) {
			m, id := signedMsg(t, host, snap(unit(6)), owner)
			m.Data = []byte(strings.Replace(string(m.Data), `"interval_seconds":60`, `"interval_seconds":61`, 1))
			return m, id
		}},
		{"a replay with a new id", "claim_mismatch", func() (*nats.Msg, string) {
			m, _ := signedMsg(t, host, snap(unit(7)), owner)
			id := "0190f0c2-0000-7000-8000-0000000000aa"
			m.Header.Set("ce-id", id)
			m.Header.Set(nats.MsgIdHdr, id)
			return m, id
		}},
	}
	ids := map[string]attack{}
	for _, a := range attacks {
		m, id := a.msg()
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err, a.name)
		ids[id] = a
	}
	got := rejections(ctx, t, js, len(attacks))
	for id, a := range ids {
		assert.Contains(t, got[id], "rejected evidence ("+a.reason+")", a.name)
	}
	settled(ctx, t, js, topology.ConsumerVerifier)
	all, n := verdicts(ctx, t, js)
	assert.Equal(t, 1, n, "no verdict but the authentic one: %v", all)

	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	rec, err := verifier.NewHosts(kv, verifier.EnrollManual).Get(ctx, host)
	require.NoError(t, err)
	assert.Equal(t, events.KeyEnrolled, rec.KeyOf(ownerKey).State)
	assert.Len(t, rec.Keys, 2, "the impostor's key is recorded, pending")
}

// TestManualEnrollment: a new host's evidence waits for an operator: it
// is refused (not_enrolled) until its key is approved, then verified.
func TestManualEnrollment(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, func(c *verifier.Config) { c.Enrollment = "manual" })
	s, key := signer(t)
	m, id := signedMsg(t, "db-01", snap(unit(1)), s)
	_, err := js.PublishMsg(ctx, m)
	require.NoError(t, err)
	assert.Contains(t, rejections(ctx, t, js, 1)[id], "rejected evidence (not_enrolled)")

	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	_, err = verifier.NewHosts(kv, verifier.EnrollManual).Approve(ctx, "db-01", key, "alice")
	require.NoError(t, err)
	m, id = signedMsg(t, "db-01", snap(unit(2)), s)
	_, err = js.PublishMsg(ctx, m)
	require.NoError(t, err)
	assert.Equal(t, "db-01", verdictOf(ctx, t, js, id).Host)
}

func TestEnrollmentConfig(t *testing.T) {
	cfg := verifier.NewDefaultConfig()
	assert.Equal(t, "manual", cfg.Enrollment)
	cfg.Enrollment = "sometimes"
	require.ErrorContains(t, cfg.Validate(), `enrollment: "sometimes"`)
	cfg = verifier.NewDefaultConfig()
	cfg.MaxClockSkew = 0
	require.ErrorContains(t, cfg.Validate(), "max_clock_skew")
}

// TestAuthenticReplayIsRefused: authentic evidence published again (a
// copy of the message under a new stream sequence, past the server's
// duplicate window, or re-signed history) is refused when its signature's
// sequence number is not above the last verified one of its host and
// target: an old PASS cannot replace a newer DRIFT.
func TestAuthenticReplayIsRefused(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, func(c *verifier.Config) { c.Enrollment = "first-use" })
	s, key := signer(t)
	old, oldID := signedMsg(t, "web-01", snap(unit(1)), s)
	newer, newerID := signedMsg(t, "web-01", snap(unit(2)), s)
	_, err := js.PublishMsg(ctx, newer)
	require.NoError(t, err)
	verdictOf(ctx, t, js, newerID)
	// The older message, which the server has not seen: its id is new to
	// the duplicate window, its signature genuine, its sequence lower.
	_, err = js.PublishMsg(ctx, old)
	require.NoError(t, err)
	assert.Contains(t, rejections(ctx, t, js, 1)[oldID], "rejected evidence (replayed)")

	kv, err := js.KeyValue(ctx, topology.BucketVerdicts)
	require.NoError(t, err)
	e, err := kv.Get(ctx, topology.VerdictKey("web-01", testTarget))
	require.NoError(t, err)
	var rec verifier.VerdictRecord
	require.NoError(t, json.Unmarshal(e.Value(), &rec))
	assert.Equal(t, newerID, rec.EvidenceID, "the newer verdict stands")
	assert.Equal(t, key, rec.SignedBy)
	assert.Equal(t, uint64(2), rec.SignedSeq)
	again, err := json.Marshal(rec)
	require.NoError(t, err)
	assert.JSONEq(t, string(e.Value()), string(again))
	assert.Equal(t, string(e.Value()), string(again), "the record is json.Marshal's bytes")
}

// Every refusal is logged in the name of the host the evidence claims,
// and status counts those since the host's last authentic evidence.
func TestRejectionsAreCountedPerHost(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, nil)
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	hosts := verifier.NewHosts(kv, verifier.EnrollManual)
	since := func() map[string]verifier.HostRejections {
		recs, err := verifier.NewStatus(js).List(ctx)
		require.NoError(t, err)
		logs, err := hosts.Rejections(ctx)
		require.NoError(t, err)
		out := map[string]verifier.HostRejections{}
		for _, r := range verifier.RejectedSinceAuthentic(recs, logs) {
			out[r.Host] = r
		}
		return out
	}
	recorded := func(id string) { // the verdict record, written after the verdict's publish
		natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
			rec, err := verifier.NewStatus(js).Get(ctx, "web-01", testTarget)
			if err != nil {
				return err
			}
			if rec.EvidenceID != id {
				return fmt.Errorf("record of %s, want %s", rec.EvidenceID, id)
			}
			return nil
		})
	}
	first := publishSnapshot(ctx, t, js, "web-01", snap(unit(1)))
	recorded(first)
	impostor, _ := signer(t)
	for i := range 3 {
		m, _ := signedMsg(t, "web-01", snap(unit(int64(10+i))), impostor)
		_, err := js.PublishMsg(ctx, m)
		require.NoError(t, err)
	}
	m, _ := signedMsg(t, "invented", snap(unit(20)), nil) // unsigned, an invented host
	_, err = js.PublishMsg(ctx, m)
	require.NoError(t, err)
	rejections(ctx, t, js, 4)
	got := since()
	assert.Equal(t, uint64(3), got["web-01"].SinceAuthentic)
	assert.True(t, got["web-01"].Exact)
	// Every refusal of the impostor's key is key_changed: the host has an
	// enrolled key, and another key signs in its name (pending or not).
	assert.Equal(t, "key_changed", got["web-01"].Last.Reason)
	assert.Equal(t, uint64(1), got["invented"].SinceAuthentic)
	assert.Equal(t, "unsigned", got["invented"].Last.Reason)

	// Authentic evidence again: nothing refused since.
	recorded(publishSnapshot(ctx, t, js, "web-01", snap(unit(2))))
	got = since()
	assert.Zero(t, got["web-01"].SinceAuthentic)
	assert.Equal(t, uint64(3), got["web-01"].Total)
	list, err := hosts.List(ctx)
	require.NoError(t, err)
	for _, h := range list {
		assert.NotContains(t, h.Host, "rejections", "the logs are not hosts")
	}
}
