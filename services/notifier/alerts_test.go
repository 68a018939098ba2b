package notifier_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/notifier"
)

var (
	t0    = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	agent = events.Target{Kind: "codex.agent", Identifier: "/home/agent/proj"}
	venv  = events.Target{Kind: "python.environment", Identifier: "/srv/agent/.venv"}
)

func verdict(host string, t events.Target, s events.Status) events.Verdict {
	digest := "sha256:" + strings.Repeat("ab", 32)
	v := events.Verdict{Status: s, Host: host, Target: t, EvidenceID: "01930000-0000-7000-8000-000000000001", SnapshotDigest: digest}
	rt := report.Target{Kind: t.Kind, Identifier: t.Identifier}
	switch s {
	case events.StatusPass:
		v.BaselineDigest = digest
		v.Report = &report.Report{Status: report.Pass, Target: rt, Changes: []report.Change{}, Protected: []string{},
			ReportSchemaVersion: report.SchemaVersion}
	case events.StatusDrift:
		v.BaselineDigest = "sha256:" + strings.Repeat("cd", 32)
		v.Report = &report.Report{Status: report.Drift, Target: rt, Protected: []string{}, ReportSchemaVersion: report.SchemaVersion,
			Changes: []report.Change{{Kind: t.Kind, Status: diff.Changed, Fields: []report.Field{
				{Field: "model", Before: report.Present(snapshot.String("a")), After: report.Present(snapshot.String("b"))}}}}}
	case events.StatusError:
		v.Error = "no baseline"
	case events.StatusStale:
		v.BaselineDigest, v.Error, v.LastSeen = digest, "no authentic evidence since 2026-12-07T09:00:00Z", "2026-12-07T09:00:00Z"
	}
	return v
}

func modified(host, pkg string) events.RunnableModified {
	return events.RunnableModified{Host: host, Ecosystem: events.Python, Environment: venv.Identifier, Package: pkg, Version: "1.0",
		Source: "index", Baseline: "RECORD", ChangeDigest: strings.Repeat("ef", 32),
		ChangedFiles: []events.FileChange{{Path: pkg + "/x.py", Change: events.FileModified, Observed: "sha256:" + strings.Repeat("01", 32)}}}
}

// state is an alert's name and whether it is firing.
type state struct {
	name   string
	firing bool
}

// TestAlertTransitions: each step's event, and the alerts pending after
// it (firing, or resolved and not sent yet).
func TestAlertTransitions(t *testing.T) {
	steps := []struct {
		event events.Payload
		fired bool
		want  map[notifier.Key]state
	}{
		{verdict("web", agent, events.StatusPass), false, map[notifier.Key]state{}},
		{verdict("web", agent, events.StatusDrift), true, map[notifier.Key]state{{Host: "web", Target: agent.String()}: {notifier.AlertDrift, true}}},
		{verdict("web", agent, events.StatusDrift), false, map[notifier.Key]state{{Host: "web", Target: agent.String()}: {notifier.AlertDrift, true}}},
		// STALE replaces DRIFT: the drift alert resolves, the stale one fires.
		{verdict("web", agent, events.StatusStale), true, map[notifier.Key]state{{Host: "web", Target: agent.String()}: {notifier.AlertStale, true}}},
		{verdict("web", agent, events.StatusStale), false, map[notifier.Key]state{{Host: "web", Target: agent.String()}: {notifier.AlertStale, true}}},
		// Fresh evidence, drifting: stale resolves, drift fires.
		{verdict("web", agent, events.StatusDrift), true, map[notifier.Key]state{{Host: "web", Target: agent.String()}: {notifier.AlertDrift, true}}},
		{verdict("web", agent, events.StatusPass), true, map[notifier.Key]state{{Host: "web", Target: agent.String()}: {notifier.AlertDrift, false}}},
		{modified("web", "requests"), true, map[notifier.Key]state{
			{Host: "web", Target: agent.String()}:                                  {notifier.AlertDrift, false},
			{Host: "web", Target: venv.String(), Package: "pkg:pypi/requests@1.0"}: {notifier.AlertModified, true},
		}},
		{modified("web", "requests"), false, nil},
		// The environment's target drifting does not resolve it; passing does.
		{verdict("web", venv, events.StatusDrift), true, nil},
		{verdict("web", venv, events.StatusPass), true, map[notifier.Key]state{
			{Host: "web", Target: agent.String()}:                                  {notifier.AlertDrift, false},
			{Host: "web", Target: venv.String()}:                                   {notifier.AlertDrift, false},
			{Host: "web", Target: venv.String(), Package: "pkg:pypi/requests@1.0"}: {notifier.AlertModified, false},
		}},
		{verdict("web", agent, events.StatusError), true, nil},
	}
	a := notifier.NewAlerts()
	for i, st := range steps {
		at := t0.Add(time.Duration(i) * time.Minute)
		assert.Equal(t, st.fired, a.Observe(st.event, fmt.Sprintf("id-%d", i), at).Any(), "step %d", i)
		if st.want == nil {
			continue
		}
		got := map[notifier.Key]state{}
		for _, al := range a.Pending() {
			got[al.Key] = state{al.Name, !al.Resolved()}
		}
		assert.Equal(t, st.want, got, "step %d", i)
	}
	firing, _ := a.Counts()
	assert.Equal(t, 1, firing, "web's agent errs; the environment and its package verified again")
}

// Sent forgets resolved alerts once sent, keeps firing ones, and keeps an
// alert that fired again since.
func TestSentForgetsResolved(t *testing.T) {
	a := notifier.NewAlerts()
	a.Observe(verdict("web", agent, events.StatusDrift), "1", t0)
	a.Observe(verdict("web", agent, events.StatusPass), "2", t0.Add(time.Minute))
	a.Observe(verdict("db", agent, events.StatusError), "3", t0.Add(time.Minute))
	sent := a.Pending()
	require.Len(t, sent, 2)
	a.Sent(sent)
	left := a.Pending()
	require.Len(t, left, 1)
	assert.Equal(t, "db", left[0].Host)

	a.Observe(verdict("web", agent, events.StatusDrift), "4", t0.Add(2*time.Minute))
	a.Observe(verdict("web", agent, events.StatusPass), "5", t0.Add(3*time.Minute))
	old := a.Pending()
	a.Observe(verdict("web", agent, events.StatusDrift), "6", t0.Add(4*time.Minute))
	a.Sent(old)
	firing, _ := a.Counts()
	assert.Equal(t, 2, firing, "web fired again after the send began: kept")
}

// A host reporting ever new targets holds at most its share of alerts;
// another host's still fire.
func TestAlertsBoundedPerHost(t *testing.T) {
	a := notifier.NewAlerts()
	for i := range notifier.MaxAlertsPerHost + 5 {
		a.Observe(verdict("noisy", events.Target{Kind: "git.repository", Identifier: fmt.Sprintf("/r%d", i)}, events.StatusError), "x", t0)
	}
	ch := a.Observe(verdict("web", agent, events.StatusDrift), "y", t0)
	assert.Equal(t, [2]int{1, 0}, [2]int{ch.Fired(), ch.Resolved()})
	ch = a.Observe(verdict("web", agent, events.StatusStale), "z", t0)
	assert.Equal(t, [2]int{1, 1}, [2]int{ch.Fired(), ch.Resolved()})
	require.Len(t, ch.Alerts, 2)
	assert.Equal(t, [2]string{notifier.AlertDrift, notifier.AlertStale}, [2]string{ch.Alerts[0].Name, ch.Alerts[1].Name})
	assert.True(t, ch.Alerts[0].Resolved())
	assert.False(t, ch.Alerts[1].Resolved())
	firing, untracked := a.Counts()
	assert.Equal(t, notifier.MaxAlertsPerHost+1, firing, "web's stale, in place of its drift")
	assert.Equal(t, uint64(5), untracked)
}
