package verifier_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

func TestLifecycle(t *testing.T) {
	t.Run("shutdown without start", func(t *testing.T) {
		v, err := verifier.New(testConfig(), verifier.Settings{})
		require.NoError(t, err)
		require.NoError(t, v.Shutdown(context.Background()))
		require.NoError(t, v.Shutdown(context.Background()), "twice")
		require.ErrorIs(t, v.Start(context.Background()), verifier.ErrShutdown)
	})

	t.Run("start, one snapshot, shutdown", func(t *testing.T) {
		ctx, url, js := server(t)
		cfg := testConfig()
		cfg.NATS.URL = url
		v, err := newVerifier(t, cfg, verifier.Settings{})
		require.NoError(t, err)
		require.NoError(t, v.Start(ctx))
		require.Error(t, v.Start(ctx), "started twice")
		id := publishSnapshot(ctx, t, js, "web-01", snap(unit(1)))
		assert.Equal(t, events.StatusError, verdictOf(ctx, t, js, id).Status)
		require.NoError(t, v.Shutdown(ctx))
		require.NoError(t, v.Shutdown(ctx), "twice")
		assert.Equal(t, uint64(1), counted(t, v, natsbus.MetricAcked))
		assert.Equal(t, uint64(1), verdictCount(t, v, events.StatusError))
	})

	t.Run("embedded connection", func(t *testing.T) {
		ctx, url, js := server(t)
		nc, _ := natstest.Connect(t, url)
		v, err := verifier.New(testConfig(), verifier.Settings{Conn: nc})
		require.NoError(t, err)
		require.NoError(t, v.Start(ctx))
		id := publishSnapshot(ctx, t, js, "web-01", snap(unit(1)))
		verdictOf(ctx, t, js, id)
		require.NoError(t, v.Shutdown(ctx))
		assert.True(t, nc.IsConnected(), "the caller's connection stays open")
	})

	t.Run("invalid config", func(t *testing.T) {
		cfg := testConfig()
		cfg.Replicas = 0
		_, err := verifier.New(cfg, verifier.Settings{})
		require.Error(t, err)
	})

	t.Run("no server", func(t *testing.T) {
		cfg := testConfig()
		cfg.NATS.URL = "nats://127.0.0.1:1"
		cfg.StartTimeout = time.Second // the server is waited for until then
		v, err := verifier.New(cfg, verifier.Settings{})
		require.NoError(t, err)
		require.ErrorContains(t, v.Start(context.Background()), "connect to NATS")
		require.NoError(t, v.Shutdown(context.Background()))
	})
}

func TestNoBaselineGivesAnErrorVerdict(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, nil)
	s := snap(unit(1))
	id := publishSnapshot(ctx, t, js, "web-01.example.com", s)

	v := verdictOf(ctx, t, js, id)
	assert.Equal(t, events.StatusError, v.Status)
	assert.Equal(t, "web-01.example.com", v.Host)
	assert.Equal(t, testTarget, v.Target)
	assert.Equal(t, digest(t, s), v.SnapshotDigest)
	assert.Empty(t, v.BaselineDigest)
	assert.Nil(t, v.Report)
	assert.Equal(t, "no baseline for systemd.unit:agent worker.service; approve one with "+
		"`runtimetruth baseline approve 'systemd.unit:agent worker.service'`", v.Error)

	rec, err := verifier.NewStatus(js).Get(ctx, "web-01.example.com", testTarget)
	require.NoError(t, err)
	assert.Equal(t, id, rec.EvidenceID)
	assert.Equal(t, verifier.VerdictID(id), rec.ID)
	assert.Equal(t, v, rec.Verdict)
}

func TestApproveThenPass(t *testing.T) {
	ctx, url, js := server(t)
	vf := start(ctx, t, url, firstUse)
	hosts := newFleet()
	first := snap(unit(1))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", first))

	bl, err := verifier.NewBaselines(js, "/cli/alice").Approve(ctx, testTarget, verifier.ApproveOptions{By: "alice", Digest: digest(t, first)})
	require.NoError(t, err)
	assert.Equal(t, digest(t, first), bl.Digest)
	assert.Equal(t, "web-01", bl.Host)
	assert.Equal(t, "alice", bl.ApprovedBy)

	second := snap(unit(1)) // the same runtime, captured later
	require.NotEqual(t, digest(t, first), digest(t, second))
	id := hosts.publish(ctx, t, js, "web-01", second)
	v := verdictOf(ctx, t, js, id)
	assert.Equal(t, events.StatusPass, v.Status)
	assert.Equal(t, bl.Digest, v.BaselineDigest)
	assert.Equal(t, digest(t, second), v.SnapshotDigest)
	require.NotNil(t, v.Report)
	assert.Equal(t, report.Pass, v.Report.Status)
	assert.Empty(t, v.Report.Changes)

	list, err := verifier.NewStatus(js).List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].EvidenceID)
	assert.Equal(t, events.StatusPass, list[0].Verdict.Status)
	assert.Equal(t, uint64(1), verdictCount(t, vf, events.StatusPass))
	assert.Equal(t, uint64(1), verdictCount(t, vf, events.StatusError))
}

// fixtures returns RuntimeTruth's before and after snapshots, changed as
// pkg/evidence/report's golden reports were recorded from.
func fixtures(t *testing.T) (before, after *snapshot.Snapshot) {
	t.Helper()
	before, err := snapshot.Parse(evidenceTestdata(t, "snapshots/before.json"))
	require.NoError(t, err)
	after, err = snapshot.Parse(evidenceTestdata(t, "snapshots/after.json"))
	require.NoError(t, err)
	delete(before.Evidence[2].Data, "branch")
	after.Evidence[2].Data["branch"] = snapshot.Null()
	delete(after.Evidence[0].Data, "user")
	return before, after
}

// The verdict's report is byte for byte what `runtimetruth verify --json`
// prints for the same baseline, snapshot and selectors (the golden reports
// of pkg/evidence).
func TestVerdictReportIsTheVerifyReport(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, nil)
	before, after := fixtures(t)
	target := events.Target{Kind: before.Target.Kind, Identifier: before.Target.Identifier}
	raw, err := before.Canonical()
	require.NoError(t, err)
	bls := verifier.NewBaselines(js, "")

	for _, tc := range []struct {
		name    string
		protect []string
		status  events.Status
		golden  string
	}{
		{"strict", nil, events.StatusDrift, "reports/drift.golden.json"},
		{"protected fields that changed", []string{"git.repository.branch", "systemd.unit.user"}, events.StatusDrift, "reports/drift-protected.golden.json"},
		{"protected field that did not change", []string{"git.repository.repository_root"}, events.StatusPass, "reports/pass.golden.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = bls.Delete(ctx, target, "")
			_, err := bls.Put(ctx, events.Baseline{Snapshot: raw, Protect: tc.protect})
			require.NoError(t, err)
			id := publishSnapshot(ctx, t, js, "web-01", after)
			v := verdictOf(ctx, t, js, id)
			require.Equal(t, tc.status, v.Status, v.Error)
			assert.Equal(t, digest(t, before), v.BaselineDigest)
			require.NotNil(t, v.Report)
			got, err := v.Report.Marshal()
			require.NoError(t, err)
			assert.Equal(t, string(evidenceTestdata(t, tc.golden)), string(got))

			// The same as evaluating locally with pkg/evidence.
			sels, err := diff.ParseSelectors(tc.protect)
			require.NoError(t, err)
			res, err := diff.Compare(before, after)
			require.NoError(t, err)
			want, err := report.New(res.Protect(sels), sels).Marshal()
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
		})
	}
}

func TestComparisonErrorsAreErrorVerdicts(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, nil)
	bls := verifier.NewBaselines(js, "")

	for _, tc := range []struct {
		name    string
		protect []string
		current func() *snapshot.Snapshot
		want    string
	}{
		{"selector names evidence in neither snapshot", []string{"codex.config"}, func() *snapshot.Snapshot { return snap(unit(1)) },
			`invalid selector: 'codex.config' does not match an evidence kind: evidence kind 'codex.config' is not in either snapshot`},
		{"selector names a field in neither snapshot", []string{"systemd.unit.nope"}, func() *snapshot.Snapshot { return snap(unit(1)) },
			`does not match an evidence field: field 'nope' is not in the systemd.unit evidence of either snapshot`},
		{"provenance changed", nil, func() *snapshot.Snapshot {
			s := snap(unit(1))
			s.Evidence[0].Source.Method = "dbus"
			return s
		}, `evidence provenance differs for 'systemd.unit'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = bls.Delete(ctx, testTarget, "")
			raw, err := snap(unit(1)).Canonical()
			require.NoError(t, err)
			bl, err := bls.Put(ctx, events.Baseline{Snapshot: raw, Protect: tc.protect})
			require.NoError(t, err)
			v := verdictOf(ctx, t, js, publishSnapshot(ctx, t, js, "web-01", tc.current()))
			assert.Equal(t, events.StatusError, v.Status)
			assert.Contains(t, v.Error, tc.want)
			assert.Equal(t, bl.Digest, v.BaselineDigest)
			assert.Nil(t, v.Report)
		})
	}
}

func TestBadEventsAreDeadLetteredAndVerifyingGoesOn(t *testing.T) {
	ctx, url, js := server(t)
	vf := start(ctx, t, url, nil)

	good, _ := evidenceMsg(t, "web-01", snap(unit(1)))
	variant := func(edit func(*nats.Msg)) *nats.Msg {
		m := &nats.Msg{Subject: good.Subject, Header: nats.Header{}, Data: good.Data}
		for k, v := range good.Header {
			m.Header[k] = append([]string(nil), v...)
		}
		id := fmt.Sprintf("bad-%d", clock.Add(1))
		m.Header.Set("ce-id", id)
		m.Header.Set(binding.HeaderMsgID, id)
		edit(m)
		return m
	}
	verdictEvent, _, err := binding.NewMsg(events.Source("collector", "web-01"), events.Verdict{
		Status: events.StatusError, Host: "web-01", Target: testTarget, EvidenceID: "x",
		SnapshotDigest: digest(t, snap(unit(1))), Error: "not evidence",
	})
	require.NoError(t, err)
	verdictEvent.Subject = good.Subject

	bad := map[events.Reason]*nats.Msg{
		events.ReasonMalformedJSON:    variant(func(m *nats.Msg) { m.Data = []byte(`{"host":`) }),
		events.ReasonUnknownType:      variant(func(m *nats.Msg) { m.Header.Set("ce-type", events.TypePrefix+"evidence.collected.v2") }),
		events.ReasonDuplicateKey:     variant(func(m *nats.Msg) { m.Data = append([]byte(`{"host":"a",`), m.Data[1:]...) }),
		events.ReasonSubjectMismatch:  variant(func(m *nats.Msg) { m.Subject = events.EvidenceSubject("web-02", testTarget.Kind) }),
		events.ReasonMissingAttribute: variant(func(m *nats.Msg) { m.Header.Del("ce-source") }),
		events.ReasonUnexpectedType:   verdictEvent,
	}
	seqs := map[uint64]events.Reason{}
	for reason, m := range bad {
		ack, err := js.PublishMsg(ctx, m)
		require.NoError(t, err, reason)
		seqs[ack.Sequence] = reason
	}
	id := publishSnapshot(ctx, t, js, "web-01", snap(unit(2)))
	assert.Equal(t, events.StatusError, verdictOf(ctx, t, js, id).Status, "a good snapshot after the bad ones is verified")

	settled(ctx, t, js, topology.ConsumerVerifier)
	var recs []events.EventRejected
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		recs = recs[:0]
		for _, p := range streamEvents(ctx, t, js, topology.StreamDLQ) {
			recs = append(recs, p.Payload.(events.EventRejected))
		}
		if len(recs) != len(bad) {
			return fmt.Errorf("%d dead letters, want %d", len(recs), len(bad))
		}
		return nil
	})
	for _, r := range recs {
		assert.Equal(t, seqs[r.StreamSequence], r.Reason, "sequence %d", r.StreamSequence)
		assert.Equal(t, topology.ConsumerVerifier, r.Consumer)
		assert.Equal(t, topology.StreamEvidence, r.Stream)
	}
	assert.Equal(t, uint64(len(bad)), counted(t, vf, natsbus.MetricDeadLettered))
	assert.Equal(t, uint64(len(bad)), counted(t, vf, natsbus.MetricDeadLettered, natsbus.AttrReason.String(natsbus.ReasonPermanent)))
	assert.Equal(t, uint64(1), verdictCount(t, vf, events.StatusError))
	all, n := verdicts(ctx, t, js)
	assert.Equal(t, 1, n, "no verdict for a bad event")
	assert.Len(t, all, 1)
}

// A verifier stopped mid-stream hands its prefetched snapshots back; the
// next instance verifies the rest: every snapshot gets exactly one
// verdict.
func TestRestartMidStream(t *testing.T) {
	ctx, url, js := server(t)
	const n = 300
	msgs := make([]*nats.Msg, n)
	ids := make([]string, n)
	for i := range n {
		msgs[i], ids[i] = evidenceMsg(t, fmt.Sprintf("host-%02d", i%7), snap(unit(int64(i))))
	}
	first := start(ctx, t, url, nil)
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, m := range msgs {
			_, err := js.PublishMsg(ctx, m)
			assert.NoError(t, err)
		}
	})
	natstest.CheckFor(t, 20*time.Second, time.Millisecond, func() error {
		if got := verdictCount(t, first, events.StatusError); got < 20 {
			return fmt.Errorf("%d verdicts", got)
		}
		return nil
	})
	require.NoError(t, first.Shutdown(ctx))
	wg.Wait()
	first1 := verdictCount(t, first, events.StatusError)
	t.Logf("first instance: %d verdicts, %d released", first1,
		counted(t, first, natsbus.MetricNacked, natsbus.AttrReason.String(natsbus.ReasonRelease)))

	second := start(ctx, t, url, nil)
	settled(ctx, t, js, topology.ConsumerVerifier)
	all, total := verdicts(ctx, t, js)
	assert.Equal(t, n, total, "verdict messages")
	for _, id := range ids {
		assert.Len(t, all[id], 1, "verdicts of %s", id)
	}
	assert.Equal(t, uint64(n), first1+verdictCount(t, second, events.StatusError)+counted(t, second, verifier.MetricDuplicates))
	assert.Zero(t, counted(t, first, natsbus.MetricDeadLettered)+counted(t, second, natsbus.MetricDeadLettered))
}

// A snapshot delivered again after its verdict was published (a crash
// between publishing and acknowledging) gets no second verdict, even
// once JetStream has forgotten the verdicts' message ids (after its
// duplicate window, or a restart of an interest stream): the verdict
// record lists the evidence ids handled. A second durable consumer
// replays the whole stream to show it.
func TestRedeliveredSnapshotsGetNoSecondVerdict(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, nil)
	const n = 10
	for i := range n {
		publishSnapshot(ctx, t, js, "web-01", snap(unit(int64(i))))
	}
	settled(ctx, t, js, topology.ConsumerVerifier)
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if _, total := verdicts(ctx, t, js); total != n {
			return fmt.Errorf("%d verdicts", total)
		}
		return nil
	})
	latest, err := verifier.NewStatus(js).Get(ctx, "web-01", testTarget)
	require.NoError(t, err)
	natstest.ForgetMessageIDs(ctx, t, js, topology.StreamVerdicts)

	replay := start(ctx, t, url, func(c *verifier.Config) { c.Consumer = "verifier-replay" })
	settled(ctx, t, js, "verifier-replay")
	_, total := verdicts(ctx, t, js)
	assert.Equal(t, n, total, "no verdict published twice")
	assert.Equal(t, uint64(n), counted(t, replay, verifier.MetricDuplicates))
	assert.Zero(t, verdictCount(t, replay, events.StatusError))
	again, err := verifier.NewStatus(js).Get(ctx, "web-01", testTarget)
	require.NoError(t, err)
	assert.Equal(t, latest.EvidenceID, again.EvidenceID, "the latest verdict stays the newest snapshot's")
}

// Snapshots verified out of order (several workers, redeliveries) never
// replace a newer latest snapshot or verdict.
func TestLatestIsTheNewestSnapshot(t *testing.T) {
	ctx, url, js := server(t)
	vf := start(ctx, t, url, func(c *verifier.Config) { c.Concurrency = 8 })
	const n = 50
	var last string
	for i := range n {
		last = publishSnapshot(ctx, t, js, "web-01", snap(unit(int64(i))))
	}
	settled(ctx, t, js, topology.ConsumerVerifier)
	rec, err := verifier.NewStatus(js).Get(ctx, "web-01", testTarget)
	require.NoError(t, err)
	assert.Equal(t, last, rec.EvidenceID)
	obs, err := verifier.NewBaselines(js, "").Observations(ctx, testTarget)
	require.NoError(t, err)
	require.Len(t, obs, 1)
	assert.Equal(t, last, obs[0].EvidenceID)
	assert.Equal(t, uint64(n), verdictCount(t, vf, events.StatusError))
}

// A snapshot that names a baseline (the collector's target config) is
// verified against that baseline, a sibling target's of the same kind;
// without a name, against its own target's.
func TestNamedBaseline(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, nil)
	bls := verifier.NewBaselines(js, "")
	sibling := events.Target{Kind: testTarget.Kind, Identifier: "agent worker (prod).service"}
	publishNamed := func(s *snapshot.Snapshot, baseline *events.Target) events.Verdict {
		p, err := events.NewEvidenceCollected("web-01", s, time.Minute)
		require.NoError(t, err)
		p.Baseline = baseline
		m, e, err := binding.NewMsg(events.Source("collector", "web-01"), p, signtest.Sign("web-01"))
		require.NoError(t, err)
		_, err = js.PublishMsg(ctx, m)
		require.NoError(t, err)
		return verdictOf(ctx, t, js, e.ID())
	}

	v := publishNamed(snap(unit(1)), &sibling)
	assert.Equal(t, events.StatusError, v.Status)
	assert.Equal(t, "no baseline for systemd.unit:agent worker (prod).service (the baseline named for systemd.unit:agent worker.service); "+
		"approve one with `runtimetruth baseline approve 'systemd.unit:agent worker (prod).service'`", v.Error)

	prod := snap(unit(1))
	prod.Target.Identifier = sibling.Identifier
	raw, err := prod.Canonical()
	require.NoError(t, err)
	bl, err := bls.Put(ctx, events.Baseline{Snapshot: raw})
	require.NoError(t, err)
	require.Equal(t, sibling, bl.Target)

	v = publishNamed(snap(unit(1)), &sibling)
	require.Equal(t, events.StatusPass, v.Status, v.Error)
	assert.Equal(t, bl.Digest, v.BaselineDigest)
	assert.Equal(t, testTarget, v.Target)
	require.NotNil(t, v.Report)
	assert.Equal(t, testTarget.Identifier, v.Report.Target.Identifier, "the report is about the snapshot's target")

	v = publishNamed(snap(unit(2)), &sibling)
	require.Equal(t, events.StatusDrift, v.Status, v.Error)
	assert.Equal(t, bl.Digest, v.BaselineDigest)

	v = publishNamed(snap(unit(1)), nil)
	assert.Equal(t, events.StatusError, v.Status, "no name: the target's own baseline, which does not exist")
	assert.Contains(t, v.Error, "no baseline for systemd.unit:agent worker.service;")

	v = publishNamed(snap(unit(1)), &events.Target{Kind: "git.repository", Identifier: sibling.Identifier})
	assert.Equal(t, events.StatusError, v.Status)
	assert.Contains(t, v.Error, "no baseline for git.repository:")

	other := snap(unit(1))
	other.Target = snapshot.Target{Kind: "git.repository", Identifier: "/srv/app"}
	other.Evidence[0].Kind = "git.repository"
	raw, err = other.Canonical()
	require.NoError(t, err)
	_, err = bls.Put(ctx, events.Baseline{Snapshot: raw})
	require.NoError(t, err)
	v = publishNamed(snap(unit(1)), &events.Target{Kind: "git.repository", Identifier: "/srv/app"})
	assert.Equal(t, events.StatusError, v.Status)
	assert.Contains(t, v.Error, "of another kind")
}
