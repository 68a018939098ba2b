package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

const stateTarget = "git.repository:/srv/app"

// fieldChange is a change of kind.field from before to after.
func fieldChange(kind, field, before, after string) report.Change {
	return report.Change{Status: diff.Changed, Kind: kind, Fields: []report.Field{
		{Before: report.Present(snapshot.String(before)), After: report.Present(snapshot.String(after)), Field: field}}}
}

// stateVerdict is a verdict of stateTarget on web-01: PASS, DRIFT with
// changes, ERROR with text errText (without a baseline when errText is
// empty) or STALE.
func stateVerdict(t *testing.T, status events.Status, errText string, changes ...report.Change) events.Verdict {
	t.Helper()
	tg, err := events.ParseTarget(stateTarget)
	require.NoError(t, err)
	v := events.Verdict{Status: status, Host: "web-01", Target: tg, EvidenceID: "e-1", SnapshotDigest: "sha256:" + strings.Repeat("a", 64)}
	rt := report.Target{Kind: tg.Kind, Identifier: tg.Identifier}
	switch status {
	case events.StatusPass:
		v.BaselineDigest = "sha256:" + strings.Repeat("b", 64)
		v.Report = &report.Report{Changes: []report.Change{}, Protected: []string{}, ReportSchemaVersion: report.SchemaVersion,
			Status: report.Pass, Target: rt}
	case events.StatusDrift:
		v.BaselineDigest = "sha256:" + strings.Repeat("b", 64)
		v.Report = &report.Report{Changes: changes, Protected: []string{}, ReportSchemaVersion: report.SchemaVersion,
			Status: report.Drift, Target: rt}
	case events.StatusStale:
		v.LastSeen = "2026-12-02T03:00:00Z"
		v.Error = "no authentic evidence since 2026-12-02T03:00:00Z (stale after 3m0s)"
	case events.StatusError:
		v.Error = errText
		if errText == "" {
			v.Error = "no baseline for " + stateTarget
		} else {
			v.BaselineDigest = "sha256:" + strings.Repeat("b", 64)
		}
	}
	return v
}

// refusal is the verifier's dead letter of evidence of stateTarget on
// host, refused with errText.
func refusal(host, errText string) events.EventRejected {
	return events.EventRejected{Stream: "EVIDENCE", Consumer: "verifier", OriginalSubject: events.EvidenceSubject(host, "git.repository"),
		StreamSequence: 7, Deliveries: 1, Reason: events.ReasonPermanent, Error: errText,
		Envelope: events.Envelope{ID: "e-1", Type: events.TypeEvidenceCollected, Subject: stateTarget},
		DataSize: 3, DataDigest: "sha256:" + strings.Repeat("c", 64)}
}

// TestUpTargetStateChanges: up prints a target's outcome only when its
// state (targetState) differs from the last printed: the status; a
// drift's set of changed fields (not their values); an error's text; a
// refusal's reason; NO BASELINE alone.
func TestUpTargetStateChanges(t *testing.T) {
	head := fieldChange("git.repository", "head_commit", "1111", "2222")
	headAgain := fieldChange("git.repository", "head_commit", "1111", "3333")
	dirty := fieldChange("git.repository", "dirty", "false", "true")
	added := report.Change{Status: diff.Added, Kind: "git.submodules", Fields: []report.Field{}}
	pass := verdictState(stateVerdict(t, events.StatusPass, ""))
	drift := func(cs ...report.Change) targetState {
		return verdictState(stateVerdict(t, events.StatusDrift, "", cs...))
	}
	errV := func(text string) targetState { return verdictState(stateVerdict(t, events.StatusError, text)) }
	noBaseline := verdictState(stateVerdict(t, events.StatusError, ""))
	stale := verdictState(stateVerdict(t, events.StatusStale, ""))
	skew := func(off string) targetState {
		return rejectedState(refusal("web-01", "rejected evidence (clock_skew): authenticate evidence of web-01: "+off+" off"))
	}

	type step struct {
		state targetState
		// key is the step's target, stateTarget when empty.
		key string
		// shown: the step prints a line.
		shown bool
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"first outcome printed, the same again not", []step{{state: pass, shown: true}, {state: pass}, {state: pass}}},
		{"each status change printed", []step{
			{state: pass, shown: true}, {state: drift(head), shown: true}, {state: stale, shown: true},
			{state: errV("unreadable baseline"), shown: true}, {state: noBaseline, shown: true}, {state: pass, shown: true}}},
		{"drift with the same fields is one state", []step{
			{state: drift(head), shown: true}, {state: drift(head)}, {state: drift(headAgain)}}},
		{"drift with other fields is another", []step{
			{state: drift(head), shown: true}, {state: drift(dirty), shown: true}, {state: drift(dirty, head), shown: true},
			{state: drift(head, dirty)}, {state: drift(head, dirty, added), shown: true}, {state: drift(head), shown: true}}},
		{"error with another text is another", []step{
			{state: errV("unreadable baseline"), shown: true}, {state: errV("unreadable baseline")},
			{state: errV("baseline digest mismatch"), shown: true}}},
		{"collection failure by reason and message", []step{
			{state: failureState("timeout", "git timed out"), shown: true}, {state: failureState("timeout", "git timed out")},
			{state: failureState("not_found", "no such file"), shown: true}, {state: errV("no such file"), shown: true}}},
		{"no baseline alone", []step{{state: noBaseline, shown: true}, {state: noBaseline}, {state: noBaseline}}},
		{"stale alone", []step{{state: stale, shown: true}, {state: stale}}},
		{"refusals by reason, not text", []step{
			{state: skew("1h0m0s"), shown: true}, {state: skew("1h0m5s")},
			{state: rejectedState(refusal("web-01", "rejected evidence (replayed): seq 4, last verified 9")), shown: true},
			{state: pass, shown: true}, {state: skew("1h0m9s"), shown: true}}},
		{"targets apart", []step{
			{state: pass, shown: true}, {state: pass, key: "python.environment:/venv", shown: true},
			{state: pass}, {state: drift(head), key: "python.environment:/venv", shown: true}, {state: pass}}},
		{"approval then its verdict", []step{
			{state: noBaseline, shown: true}, {state: targetState{word: wordApproved}, shown: true}, {state: noBaseline, shown: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			printed := targetStates{}
			for i, s := range tc.steps {
				key := s.key
				if key == "" {
					key = stateTarget
				}
				assert.Equal(t, s.shown, printed.changed(key, s.state), "step %d: %+v", i, s.state)
			}
		})
	}
	assert.Equal(t, "replayed", rejectReason(refusal("web-01", "rejected evidence (replayed): seq 4, last verified 9")))
	assert.Equal(t, "permanent", rejectReason(refusal("web-01", "schema: bad")), "the dead letter's own reason")
}

// TestUpPrintsStateChangesOnce feeds up's printer the verdicts of
// collections as they come: a line only when the target's state changes.
func TestUpPrintsStateChangesOnce(t *testing.T) {
	msg := func(v events.Verdict) *nats.Msg {
		m, _, err := binding.NewMsg(events.Source("verifier", "test"), v)
		require.NoError(t, err)
		return m
	}
	var out bytes.Buffer
	var counts []int
	p := &verdictPrinter{out: &out, host: "web-01", done: func(n int) { counts = append(counts, n) }}
	// lines is what the printer printed since the last call, without
	// the times.
	lines := func() []string {
		var got []string
		for l := range strings.Lines(out.String()) {
			l = strings.TrimSuffix(l, "\n")
			if len(l) > 10 && l[2] == ':' && l[5] == ':' {
				l = l[10:]
			}
			got = append(got, l)
		}
		out.Reset()
		return got
	}
	head := fieldChange("git.repository", "head_commit", "1111", "2222")
	dirty := fieldChange("git.repository", "dirty", "false", "true")

	for range 3 {
		p.handle(msg(stateVerdict(t, events.StatusPass, "")))
	}
	assert.Equal(t, []string{"PASS   " + stateTarget}, lines(), "three identical PASS verdicts: one line")

	p.handle(msg(stateVerdict(t, events.StatusDrift, "", head)))
	assert.Equal(t, []string{
		"DRIFT  " + stateTarget + "  1 change(s), first git.repository.head_commit",
		"    git.repository.head_commit: 1111 -> 2222",
	}, lines())

	p.handle(msg(stateVerdict(t, events.StatusDrift, "", head)))
	assert.Empty(t, lines(), "the same drift again")

	p.handle(msg(stateVerdict(t, events.StatusDrift, "", head, dirty)))
	assert.Equal(t, []string{
		"DRIFT  " + stateTarget + "  2 change(s), first git.repository.head_commit",
		"    git.repository.head_commit: 1111 -> 2222",
		"    git.repository.dirty: false -> true",
	}, lines(), "a drift of other fields")

	p.handle(msg(stateVerdict(t, events.StatusPass, "")))
	assert.Equal(t, []string{"PASS   " + stateTarget}, lines(), "back to PASS")

	assert.Equal(t, []int{1, 1, 1, 1, 1, 1, 1}, counts, "every verdict is counted (up --once), printed or not")
	require.NoError(t, p.exitErr(true))
}

// TestUpPrintsNoBaselineAndRefusalsOnce: the first NO BASELINE comes with
// the command that approves it, a later one (after another state) alone;
// refused evidence is printed once while it is refused for one reason.
func TestUpPrintsNoBaselineAndRefusalsOnce(t *testing.T) {
	var out bytes.Buffer
	p := &verdictPrinter{out: &out, host: "web-01"}
	noBaseline := verdictFor(t, "web-01", stateTarget, "")
	for range 3 {
		p.handle(noBaseline)
	}
	assert.Equal(t, 1, strings.Count(out.String(), "NO BASELINE"), out.String())
	assert.Equal(t, 1, strings.Count(out.String(), "runtimetruth baseline approve '"+stateTarget+"'"), out.String())
	assert.NotContains(t, out.String(), "ERROR", "a NO BASELINE again is not an ERROR line")

	rejected := func(errText string) *nats.Msg {
		m, _, err := binding.NewMsg(events.Source("verifier", "test"), refusal("web-01", errText))
		require.NoError(t, err)
		return m
	}
	out.Reset()
	p.handleRejected(rejected("rejected evidence (clock_skew): 1h0m0s off"))
	p.handleRejected(rejected("rejected evidence (clock_skew): 1h0m2s off"))
	p.handleRejected(rejected("rejected evidence (replayed): seq 3, last verified 9"))
	p.handleRejected(rejected("rejected evidence (replayed): seq 4, last verified 9"))
	assert.Equal(t, 2, strings.Count(out.String(), "REJECTED"), out.String())
	assert.Contains(t, out.String(), "REJECTED  "+stateTarget+"  rejected evidence (clock_skew): 1h0m0s off\n")
	assert.Contains(t, out.String(), "REJECTED  "+stateTarget+"  rejected evidence (replayed): seq 3, last verified 9\n")

	out.Reset()
	p.handle(noBaseline)
	assert.Contains(t, out.String(), "NO BASELINE  "+stateTarget+"\n", "a new state")
	assert.NotContains(t, out.String(), "baseline approve", "the command once")
}
