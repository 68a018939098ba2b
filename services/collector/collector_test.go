package collector_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/gittest"
)

var _ lifecycle.Component = (*collector.Collector)(nil)

func TestShutdownWithoutStart(t *testing.T) {
	c, err := collector.New(testConfig(t, deadURL(t), gitTarget("repo", t.TempDir(), 0)), collector.Settings{})
	require.NoError(t, err)
	require.NoError(t, c.Shutdown(t.Context()))
	require.NoError(t, c.Shutdown(t.Context()), "twice")
	require.ErrorIs(t, c.Start(t.Context()), collector.ErrNotRunning, "no start after shutdown")
	require.ErrorIs(t, c.CollectNow(t.Context(), "repo"), collector.ErrNotRunning)
}

func TestStartCollectShutdown(t *testing.T) {
	b := runBus(t, t.TempDir(), 0)
	repo := gittest.New(t)
	cfg := testConfig(t, b.url, gitTarget("repo", repo, time.Hour))
	tel := telemetrytest.New(t)
	c, rec := newCollector(t, cfg, collector.Settings{Telemetry: tel.Providers})

	start := time.Now()
	require.NoError(t, c.Start(t.Context()))
	assert.Less(t, time.Since(start), time.Second, "Start returns quickly")
	require.ErrorIs(t, c.Start(t.Context()), collector.ErrNotRunning, "no second start")

	msgs := b.waitStored(t, 1) // the first collection runs at once
	shutdown(t, c, 10*time.Second)
	shutdown(t, c, 10*time.Second) // twice

	require.Len(t, msgs, 1)
	assert.Equal(t, rec.all(), b.storedIDs(t))
	assert.Equal(t, uint64(1), tel.Count(t, collector.MetricCollectionDuration), "collections")
	assert.Equal(t, int64(1), tel.Sum(t, collector.MetricEventsSpooled, collector.AttrType.String(events.TypeEvidenceCollected)))
	assert.Equal(t, int64(1), tel.Sum(t, natsbus.MetricPublished), "events delivered")
	lag, ok := telemetrytest.Gauge[float64](tel.Collect(t), collector.MetricDeliveryLag)
	assert.True(t, ok, "the delivery lag is reported once an event is delivered")
	assert.Positive(t, lag)
	assert.Zero(t, spoolLeft(t, cfg))
}

func TestGitTargetPublishesEvidenceAndFollowsCommits(t *testing.T) {
	b := runBus(t, t.TempDir(), 0)
	repo := gittest.New(t)
	c, _ := newCollector(t, testConfig(t, b.url, gitTarget("repo", repo, time.Hour)), collector.Settings{})
	require.NoError(t, c.Start(t.Context()))
	first := b.waitStored(t, 1)[0]

	assert.Equal(t, "rt.evidence.test-host=2Eexample.git=2Erepository", first.Subject())
	assert.Equal(t, events.EvidenceSubject(testHost, "git.repository"), first.Subject())
	e, p, err := binding.Read[events.EvidenceCollected](first)
	require.NoError(t, err)
	assert.Equal(t, events.Source("collector", testHost), e.Source())
	assert.Equal(t, e.ID(), first.m.Header.Get(binding.HeaderMsgID))
	assert.Equal(t, testHost, p.Host)
	assert.Equal(t, events.Target{Kind: "git.repository", Identifier: repo}, p.Target)
	assert.Equal(t, int64(3600), p.IntervalSeconds)
	s1, err := p.ParseSnapshot()
	require.NoError(t, err)
	head1, _ := s1.Evidence[0].Data["head_commit"].Str()
	assert.Equal(t, gittest.Git(t, repo, "rev-parse", "HEAD"), head1)

	gittest.WriteFile(t, repo, "main.go", "package main\n")
	head2 := gittest.Commit(t, repo, "second")
	require.NoError(t, c.CollectNow(t.Context(), "repo"))
	second := evidence(t, b.waitStored(t, 2)[1])
	// An on-demand collection of a target collected every hour says so: 0
	// would tell the verifier that nothing more is expected, and a host
	// silent after it would never be called stale.
	assert.Equal(t, int64(3600), second.IntervalSeconds, "an on-demand collection of a looped target")
	assert.NotEqual(t, p.Digest, second.Digest)
	s2, err := second.ParseSnapshot()
	require.NoError(t, err)
	got, _ := s2.Evidence[0].Data["head_commit"].Str()
	assert.Equal(t, head2, got)
	assert.NotEqual(t, head1, got)
}

func TestCollectionFailurePublishesCollectionFailed(t *testing.T) {
	b := runBus(t, t.TempDir(), 0)
	notRepo := t.TempDir()
	tel := telemetrytest.New(t)
	c, _ := newCollector(t, testConfig(t, b.url, gitTarget("plain", notRepo, time.Hour)), collector.Settings{Telemetry: tel.Providers})
	require.NoError(t, c.Start(t.Context()))
	m := b.waitStored(t, 1)[0]
	assert.Equal(t, events.CollectFailedSubject(testHost), m.Subject())
	_, p, err := binding.Read[events.CollectionFailed](m)
	require.NoError(t, err)
	assert.Equal(t, "git", p.Collector)
	assert.Equal(t, "not_found", p.Reason)
	assert.False(t, p.Retryable)
	assert.Contains(t, p.Message, "plain: ")
	require.NotNil(t, p.Target)
	assert.Equal(t, events.Target{Kind: "git.repository", Identifier: notRepo}, *p.Target)

	err = c.CollectNow(t.Context(), "plain")
	require.ErrorIs(t, err, collector.ErrCollectionFailed)
	b.waitStored(t, 2)
	assert.Equal(t, uint64(2), tel.Count(t, collector.MetricCollectionDuration, collector.AttrStatus.String(collector.StatusFailed)))
}

func TestEmbeddedConnectionIsNotClosed(t *testing.T) {
	b := runBus(t, t.TempDir(), 0)
	repo := gittest.New(t)
	c, rec := newCollector(t, testConfig(t, deadURL(t), gitTarget("repo", repo, time.Hour)), collector.Settings{Conn: b.nc})
	require.NoError(t, c.Start(t.Context()))
	b.waitStored(t, 1)
	shutdown(t, c, 10*time.Second)
	assert.True(t, b.nc.IsConnected(), "the caller's connection stays open")
	assert.Equal(t, rec.all(), b.storedIDs(t))
}

func TestShutdownCancelsSlowDeliveryButKeepsTheSpool(t *testing.T) {
	repo := gittest.New(t)
	cfg := testConfig(t, deadURL(t), gitTarget("repo", repo, time.Hour))
	c, _ := newCollector(t, cfg, collector.Settings{})
	require.NoError(t, c.Start(t.Context()))
	require.NoError(t, c.CollectNow(t.Context(), "repo"))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.NoError(t, c.Shutdown(ctx), "undelivered events are kept, not an error")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, 2, spoolLeft(t, cfg))
}

func TestSpoolRecordCodec(t *testing.T) {
	m, _, err := binding.NewMsg(events.Source("collector", testHost), events.CollectionFailed{
		Host: testHost, Collector: "git", Reason: "error", Message: "boom",
	})
	require.NoError(t, err)
	at := time.Unix(1700000000, 123)
	data := collector.EncodeMsg(m, at)
	got, gotAt, err := collector.DecodeMsg(data)
	require.NoError(t, err)
	assert.Equal(t, m.Subject, got.Subject)
	assert.Equal(t, m.Header, got.Header)
	assert.Equal(t, m.Data, got.Data)
	assert.True(t, at.Equal(gotAt))
	for i := range data {
		_, _, err := collector.DecodeMsg(data[:i])
		require.Error(t, err, "truncated at %d", i)
	}
	_, _, err = collector.DecodeMsg(append(data, 0))
	require.Error(t, err, "trailing byte")
}

// TestCodexAndProcessTargets collects the real Codex CLI (in a scratch
// CODEX_HOME) and this test process. The probe runs as the owner of the
// workspace, nobody (TestCodexProbeNeverRunsAsRoot).
func TestCodexAndProcessTargets(t *testing.T) {
	dir, err := filepath.EvalSymlinks(openDir(t))
	require.NoError(t, err)
	codexHome := workspace(t, dir, "codex-home", nobody)
	require.NoError(t, os.Chmod(codexHome, 0o700))
	ws := workspace(t, dir, "ws", nobody)

	b := runBus(t, t.TempDir(), 0)
	cfg := testConfig(t, b.url,
		collector.TargetConfig{Name: "codex", Kind: collector.KindCodex, Cwd: ws, Interval: time.Hour,
			Options: collector.TargetOptions{CodexHome: codexHome}},
		collector.TargetConfig{Name: "self", Kind: collector.KindProcess, PID: os.Getpid(), Interval: time.Hour})
	c, _ := newCollector(t, cfg, collector.Settings{})
	require.NoError(t, c.Start(t.Context()))
	msgs := b.waitStored(t, 2)
	bySubject := map[string]events.EvidenceCollected{}
	for _, m := range msgs {
		p := evidence(t, m)
		bySubject[m.Subject()] = p
	}
	cx, ok := bySubject[events.EvidenceSubject(testHost, "codex.workspace")]
	require.True(t, ok, "codex evidence: %v", bySubject)
	assert.Equal(t, ws, cx.Target.Identifier)
	s, err := cx.ParseSnapshot()
	require.NoError(t, err)
	_, ok = s.Record("codex.runtime")
	assert.True(t, ok)
	_, ok = s.Record("codex.config")
	assert.True(t, ok)

	self, ok := bySubject[events.EvidenceSubject(testHost, "linux.process")]
	require.True(t, ok, "process evidence: %v", bySubject)
	exe, err := os.Executable()
	require.NoError(t, err)
	assert.Equal(t, exe, self.Target.Identifier)
}

// A target's configured baseline rides in every evidence.collected event
// of it; without one the event names none (the verifier then uses the
// snapshot's own target).
func TestConfiguredBaselineIsCarried(t *testing.T) {
	b := runBus(t, t.TempDir(), 0)
	repo := gittest.New(t)
	named := gitTarget("named", repo, time.Hour)
	named.Baseline = "git.repository:/srv/app"
	short := gitTarget("short", repo, time.Hour)
	short.Baseline = "app-prod"
	plain := gitTarget("plain", repo, time.Hour)
	c, _ := newCollector(t, testConfig(t, b.url, named, short, plain), collector.Settings{})
	require.NoError(t, c.Start(t.Context()))
	var baselines []string
	for _, m := range b.waitStored(t, 3) {
		if bl := evidence(t, m).Baseline; bl != nil {
			baselines = append(baselines, bl.String())
		} else {
			baselines = append(baselines, "none")
		}
	}
	assert.ElementsMatch(t, []string{"git.repository:/srv/app", "git.repository:app-prod", "none"}, baselines)
}

func TestBaselineTarget(t *testing.T) {
	for _, tc := range []struct{ value, kind, want string }{
		{"git.repository:/srv/app", "git.repository", "git.repository:/srv/app"},
		{"systemd.unit:app.service", "git.repository", "systemd.unit:app.service"},
		{"app-prod", "git.repository", "git.repository:app-prod"},
		{"/srv/app:blue", "git.repository", "git.repository:/srv/app:blue"},
		{":x", "systemd.unit", "systemd.unit::x"},
	} {
		assert.Equal(t, tc.want, collector.BaselineTarget(tc.value, tc.kind).String(), tc.value)
	}
}
