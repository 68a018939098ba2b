package diff_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/internal/evidencetest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

func TestRealisticSnapshotDiffGroupsRuntimeChanges(t *testing.T) {
	res, err := diff.Compare(evidencetest.Snapshot(t, "before.json"), evidencetest.Snapshot(t, "after.json"))
	require.NoError(t, err)
	want := `SERVICE
  exec_main_pid: 3036 -> 4190
  main_pid: 3036 -> 4190
  restart_count: 0 -> 1

PROCESS
  pid: 3036 -> 4190

CODE
  dirty: false -> true
  head_commit: 1111111111111111111111111111111111111111 -> 2222222222222222222222222222222222222222`
	assert.Equal(t, want, res.Render())
}

func TestCaptureTimeIsNotARuntimeChange(t *testing.T) {
	a := evidencetest.Snapshot(t, "before.json")
	b := evidencetest.Snapshot(t, "before.json")
	b.CapturedAt = "2026-10-06T04:09:40Z"
	res, err := diff.Compare(a, b)
	require.NoError(t, err)
	assert.True(t, res.Empty())
	assert.Equal(t, "No runtime changes.", res.Render())
}

// TestCompareRefusals: what Compare cannot compare (another target, a
// record whose provenance changed, a kind it does not know) is an error
// of its kind, with its message.
func TestCompareRefusals(t *testing.T) {
	const provenance = "evidence provenance differs for 'linux.process'; schema-v1 provenance changes are not comparable yet"
	for _, tc := range []struct {
		name string
		edit func(b *snapshot.Snapshot)
		want error
		msg  string
	}{
		{"different targets", func(b *snapshot.Snapshot) { b.Target.Identifier = "other.service" }, diff.ErrTargetMismatch,
			"snapshot targets differ: systemd.unit:'agent-worker.service' != systemd.unit:'other.service'"},
		{"provenance: plane", func(b *snapshot.Snapshot) { b.Evidence[1].Plane = snapshot.Resolved }, diff.ErrProvenance, provenance},
		{"provenance: collector", func(b *snapshot.Snapshot) { b.Evidence[1].Source.Collector = "other" }, diff.ErrProvenance, provenance},
		{"provenance: method", func(b *snapshot.Snapshot) { b.Evidence[1].Source.Method = "other" }, diff.ErrProvenance, provenance},
		{"unsupported kind", func(b *snapshot.Snapshot) { b.Evidence[1].Kind = "linux.kernel" }, diff.ErrUnsupportedKind,
			"unsupported evidence kind 'linux.kernel'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := evidencetest.Snapshot(t, "before.json")
			b := evidencetest.Snapshot(t, "before.json")
			tc.edit(b)
			_, err := diff.Compare(a, b)
			require.ErrorIs(t, err, tc.want)
			assert.EqualError(t, err, tc.msg)
		})
	}
}

func TestDiffReportsAddedAndRemovedEvidence(t *testing.T) {
	a := evidencetest.Snapshot(t, "before.json")
	b := evidencetest.Snapshot(t, "before.json")
	a.Evidence = a.Evidence[:1]
	res, err := diff.Compare(a, b)
	require.NoError(t, err)
	assert.Equal(t, "PROCESS\n  evidence: added\n\nCODE\n  evidence: added", res.Render())
	res, err = diff.Compare(b, a)
	require.NoError(t, err)
	assert.Equal(t, "PROCESS\n  evidence: removed\n\nCODE\n  evidence: removed", res.Render())
	assert.Len(t, res.Changes[0].Fields, 3, "a removed record lists its fields")
}

func TestMissingFieldIsDistinctFromNull(t *testing.T) {
	a := evidencetest.Snapshot(t, "before.json")
	b := evidencetest.Snapshot(t, "before.json")
	delete(a.Evidence[2].Data, "branch")
	b.Evidence[2].Data["branch"] = snapshot.Null()
	res, err := diff.Compare(a, b)
	require.NoError(t, err)
	assert.Equal(t, "CODE\n  branch: <missing> -> null", res.Render())
	f := res.Changes[0].Fields[0]
	assert.False(t, f.HasBefore)
	assert.True(t, f.HasAfter)
}

func TestBoolIsNotInt(t *testing.T) {
	a := evidencetest.Snapshot(t, "before.json")
	b := evidencetest.Snapshot(t, "before.json")
	a.Evidence[2].Data["dirty"] = snapshot.Int(0)
	res, err := diff.Compare(a, b)
	require.NoError(t, err)
	assert.Equal(t, "CODE\n  dirty: 0 -> false", res.Render())
}

func TestCodexSnapshotDiffGroupsAgentStateChanges(t *testing.T) {
	a := evidencetest.Snapshot(t, "unicode.json")
	b := evidencetest.Snapshot(t, "unicode.json")
	ins, _ := b.Record("codex.instructions")
	ins.Data["source:/srv/agent/sub/AGENTS.md"] = snapshot.String("sha256:" + strings.Repeat("d", 64))
	ins.Data["source_count"] = snapshot.Int(4)
	cfg, _ := b.Record("codex.config")
	cfg.Data["model"] = snapshot.String("gpt-5-codex")
	res, err := diff.Compare(a, b)
	require.NoError(t, err)
	want := "CODEX CONFIG\n  model: gpt-5 \"quoted\" \\ back -> gpt-5-codex\n\n" +
		"CODEX INSTRUCTIONS\n  source:/srv/agent/sub/AGENTS.md: <missing> -> sha256:" + strings.Repeat("d", 64) +
		"\n  source_count: 3 -> 4"
	assert.Equal(t, want, res.Render())
}

func TestProtectNarrowsTheResult(t *testing.T) {
	before, after := evidencetest.Snapshot(t, "before.json"), evidencetest.Snapshot(t, "after.json")
	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	tests := []struct {
		name      string
		selectors []string
		want      string
	}{
		{"unchanged field passes", []string{"git.repository.branch"}, "No runtime changes."},
		{"changed field drifts alone", []string{"git.repository.head_commit"},
			"CODE\n  head_commit: 1111111111111111111111111111111111111111 -> 2222222222222222222222222222222222222222"},
		{"whole kind", []string{"linux.process"}, "PROCESS\n  pid: 3036 -> 4190"},
		{"several fields of one kind", []string{"systemd.unit.main_pid", "systemd.unit.restart_count"},
			"SERVICE\n  main_pid: 3036 -> 4190\n  restart_count: 0 -> 1"},
		{"kind and its field", []string{"linux.process.pid", "linux.process"}, "PROCESS\n  pid: 3036 -> 4190"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sels, err := diff.ParseSelectors(tc.selectors)
			require.NoError(t, err)
			for _, s := range sels {
				require.NoError(t, s.Check(before, after))
			}
			assert.Equal(t, tc.want, res.Protect(sels).Render())
		})
	}
}

func TestProtectedFieldOfAddedKindDrifts(t *testing.T) {
	a := evidencetest.Snapshot(t, "before.json")
	b := evidencetest.Snapshot(t, "before.json")
	a.Evidence = a.Evidence[:2]
	res, err := diff.Compare(a, b)
	require.NoError(t, err)
	sels, err := diff.ParseSelectors([]string{"git.repository.head_commit"})
	require.NoError(t, err)
	got := res.Protect(sels)
	assert.Equal(t, "CODE\n  head_commit: <missing> -> 1111111111111111111111111111111111111111", got.Render())
}

func TestSelectorParsing(t *testing.T) {
	tests := []struct {
		in   string
		want diff.Selector
		err  string
	}{
		{in: "codex.instructions", want: diff.Selector{Kind: "codex.instructions"}},
		{in: "codex.thread.model", want: diff.Selector{Kind: "codex.thread", Field: "model"}},
		{in: "codex.instructions.source:/srv/agent/AGENTS.md", want: diff.Selector{Kind: "codex.instructions", Field: "source:/srv/agent/AGENTS.md"}},
		{in: "codex.mcp.server:docs:tools", want: diff.Selector{Kind: "codex.mcp", Field: "server:docs:tools"}},
		{in: "codex.mcp_tools", want: diff.Selector{Kind: "codex.mcp_tools"}},
		{in: "linux.process_identity.exe_sha256", want: diff.Selector{Kind: "linux.process_identity", Field: "exe_sha256"}},
		{in: "linux.process.pid", want: diff.Selector{Kind: "linux.process", Field: "pid"}},
		{in: "", err: "empty selector"},
		{in: "codex", err: "unknown selector 'codex'"},
		{in: "codex.thread.", err: "unknown selector"},
		{in: "codex.threads", err: "unknown selector"},
		{in: "*", err: "unknown selector"},
		{in: "codex.thread.mo\x00del", err: "control characters"},
		{in: strings.Repeat("a", diff.MaxSelectorLen+1), err: "longer than"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := diff.ParseSelector(tc.in)
			if tc.err != "" {
				require.ErrorIs(t, err, diff.ErrSelector)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.in, got.String())
		})
	}
}

func TestSelectorMustNameExistingEvidence(t *testing.T) {
	before, after := evidencetest.Snapshot(t, "before.json"), evidencetest.Snapshot(t, "after.json")
	for sel, want := range map[string]string{
		"codex.thread":          "'codex.thread' does not match an evidence kind: evidence kind 'codex.thread' is not in either snapshot",
		"codex.thread.model":    "'codex.thread.model' does not match an evidence field: evidence kind 'codex.thread' is not in either snapshot",
		"git.repository.nosuch": "'git.repository.nosuch' does not match an evidence field: field 'nosuch' is not in the git.repository evidence of either snapshot",
	} {
		s, err := diff.ParseSelector(sel)
		require.NoError(t, err)
		err = s.Check(before, after)
		require.ErrorIs(t, err, diff.ErrSelector, sel)
		assert.Contains(t, err.Error(), want)
	}
}

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"codex.thread.model", "codex.instructions.source:/a/b", "x", "", "linux.process_identity.", "git.repository.\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := diff.ParseSelector(s)
		if err != nil {
			return
		}
		if _, ok := snapshot.LookupKind(sel.Kind); !ok {
			t.Fatalf("parsed unknown kind %q", sel.Kind)
		}
		if sel.String() != s {
			t.Fatalf("round trip %q -> %q", s, sel.String())
		}
		again, err := diff.ParseSelector(sel.String())
		if err != nil || again != sel {
			t.Fatalf("reparse %q: %v %v", s, again, err)
		}
	})
}
