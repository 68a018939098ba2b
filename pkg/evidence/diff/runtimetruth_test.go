package diff_test

// Ports of RuntimeTruth v0.2's tests/test_diff.py (sidelobe-labs/runtimetruth;
// the newest version, with the selector tests, and the older one at commit
// b2fc896481a014f2778032fb85d8f88975dfe2fb, whose tests are a subset). Each
// Go test is named after the Python test it ports. The fixtures are
// RuntimeTruth's tests/fixtures/snapshots/{before,after}.json, byte for
// byte, in testdata/snapshots/runtimetruth/; snapshots the Python tests
// build with Snapshot.capture are written here as JSON text and parsed with
// snapshot.Parse. Python's diff_snapshots(before, after) is diff.Compare,
// diff_snapshots(before, after, selectors=...) is diff.Verify, and
// format_diff is Result.Render.

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/internal/evidencetest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot/snapshottest"
)

// rtFixture reads one of RuntimeTruth's own snapshot fixtures.
func rtFixture(t *testing.T, name string) []byte {
	t.Helper()
	return evidencetest.Read(t, "snapshots/runtimetruth/"+name)
}

// rtLoad is RuntimeTruth's load_snapshot of one of its fixtures.
func rtLoad(t *testing.T, name string) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Parse(rtFixture(t, name))
	require.NoError(t, err)
	return s
}

// rtRecord is one EvidenceRecord of a Python test; a nil data value is None.
type rtRecord = snapshottest.Record

// rtCapture is Snapshot.capture(target=..., evidence=...) written as the JSON
// text of the snapshot and parsed back; capturedAt stands for the capture
// time, which differs between two captures.
func rtCapture(t *testing.T, targetKind, targetID, capturedAt string, records ...rtRecord) *snapshot.Snapshot {
	t.Helper()
	doc := snapshottest.CaptureJSON(t, targetKind, targetID, capturedAt, records...)
	s, err := snapshot.Parse(doc)
	require.NoError(t, err, string(doc))
	return s
}

func rtSelectors(t *testing.T, list ...string) []diff.Selector {
	t.Helper()
	sels, err := diff.ParseSelectors(list)
	require.NoError(t, err)
	return sels
}

const rtHeadCommitChange = "  head_commit: 1111111111111111111111111111111111111111 -> 2222222222222222222222222222222222222222"

// test_realistic_snapshot_diff_groups_runtime_changes
func TestRT_realistic_snapshot_diff_groups_runtime_changes(t *testing.T) {
	res, err := diff.Compare(rtLoad(t, "before.json"), rtLoad(t, "after.json"))
	require.NoError(t, err)
	assert.Equal(t, strings.Join([]string{
		"SERVICE",
		"  exec_main_pid: 3036 -> 4190",
		"  main_pid: 3036 -> 4190",
		"  restart_count: 0 -> 1",
		"",
		"PROCESS",
		"  pid: 3036 -> 4190",
		"",
		"CODE",
		"  dirty: false -> true",
		rtHeadCommitChange,
	}, "\n"), res.Render())
}

// test_codex_snapshot_diff_groups_agent_state_changes
func TestRT_codex_snapshot_diff_groups_agent_state_changes(t *testing.T) {
	const (
		workspace = "codex.workspace"
		agent     = "/srv/agent"
	)
	runtime := func(version string) rtRecord {
		return rtRecord{Plane: "live", Kind: "codex.runtime", Collector: "codex", Method: "codex --version", Data: map[string]any{
			"binary":  "/usr/lib/codex/codex.js",
			"version": version,
		}}
	}
	config := func(model any) rtRecord {
		return rtRecord{Plane: "resolved", Kind: "codex.config", Collector: "codex", Method: "app-server config/read", Data: map[string]any{
			"cwd":          "/srv/agent",
			"model":        model,
			"sandbox_mode": "workspace-write",
		}}
	}
	thread := func(model, approval, sources, sandbox string) rtRecord {
		return rtRecord{Plane: "resolved", Kind: "codex.thread", Collector: "codex", Method: "app-server thread/start", Data: map[string]any{
			"model":               model,
			"approval_policy":     approval,
			"instruction_sources": sources,
			"sandbox":             sandbox,
		}}
	}
	instructions := func(data map[string]any) rtRecord {
		return rtRecord{Plane: "live", Kind: "codex.instructions", Collector: "filesystem", Method: "sha256 Codex thread instructionSources", Data: data}
	}
	a64, b64, c64 := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)

	before := rtCapture(t, workspace, agent, "2026-10-06T00:00:00Z",
		runtime("codex-cli 0.156.1"),
		config(nil),
		thread("gpt-6-astra", "on-request", `["/srv/agent/AGENTS.md"]`,
			`{"networkAccess":true,"type":"workspaceWrite","writableRoots":[]}`),
		instructions(map[string]any{
			"source_count":                1,
			"source:/srv/agent/AGENTS.md": "sha256:" + a64,
		}),
	)
	after := rtCapture(t, workspace, agent, "2026-10-06T00:00:01Z",
		runtime("codex-cli 0.157.0"),
		config("gpt-6-pro"),
		thread("gpt-6-pro", "never", `["/srv/agent/AGENTS.md","/srv/agent/sub/AGENTS.md"]`,
			`{"networkAccess":false,"type":"workspaceWrite","writableRoots":[]}`),
		instructions(map[string]any{
			"source_count":                    2,
			"source:/srv/agent/AGENTS.md":     "sha256:" + b64,
			"source:/srv/agent/sub/AGENTS.md": "sha256:" + c64,
		}),
	)

	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	assert.Equal(t, strings.Join([]string{
		"CODEX RUNTIME",
		"  version: codex-cli 0.156.1 -> codex-cli 0.157.0",
		"",
		"CODEX CONFIG",
		"  model: null -> gpt-6-pro",
		"",
		"CODEX THREAD",
		"  approval_policy: on-request -> never",
		`  instruction_sources: ["/srv/agent/AGENTS.md"] -> ["/srv/agent/AGENTS.md","/srv/agent/sub/AGENTS.md"]`,
		"  model: gpt-6-astra -> gpt-6-pro",
		`  sandbox: {"networkAccess":true,"type":"workspaceWrite","writableRoots":[]} -> {"networkAccess":false,"type":"workspaceWrite","writableRoots":[]}`,
		"",
		"CODEX INSTRUCTIONS",
		"  source:/srv/agent/AGENTS.md: sha256:" + a64 + " -> sha256:" + b64,
		"  source:/srv/agent/sub/AGENTS.md: <missing> -> sha256:" + c64,
		"  source_count: 1 -> 2",
	}, "\n"), res.Render())
}

// test_capture_time_is_not_a_runtime_change
func TestRT_capture_time_is_not_a_runtime_change(t *testing.T) {
	before := rtLoad(t, "before.json")
	// payload = before.to_dict(); payload["captured_at"] = "2030-01-01T00:00:00Z"
	doc := string(rtFixture(t, "before.json"))
	require.Contains(t, doc, `"captured_at": "2026-10-06T03:09:40Z"`)
	after, err := snapshot.Parse([]byte(strings.Replace(doc, `"captured_at": "2026-10-06T03:09:40Z"`, `"captured_at": "2030-01-01T00:00:00Z"`, 1)))
	require.NoError(t, err)

	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	assert.Equal(t, "No runtime changes.", res.Render())
}

// test_diff_rejects_different_targets
func TestRT_diff_rejects_different_targets(t *testing.T) {
	before := rtLoad(t, "before.json")
	// Snapshot(schema_version=1, captured_at=before.captured_at,
	// target=Target("systemd.unit", "other.service"), evidence=before.evidence)
	after := rtLoad(t, "before.json")
	after.Target = snapshot.Target{Kind: "systemd.unit", Identifier: "other.service"}

	_, err := diff.Compare(before, after)
	require.ErrorIs(t, err, diff.ErrTargetMismatch)
	assert.Contains(t, err.Error(), "snapshot targets differ")
}

// test_diff_reports_added_evidence
func TestRT_diff_reports_added_evidence(t *testing.T) {
	service := rtRecord{Plane: "live", Kind: "systemd.unit", Collector: "systemd", Method: "systemctl show", Data: map[string]any{
		"unit_id": "agent.service", "main_pid": 0,
	}}
	process := rtRecord{Plane: "live", Kind: "linux.process", Collector: "procfs", Method: "/proc/<pid>/{cwd,exe}", Data: map[string]any{
		"pid": 42, "cwd": "/srv/agent", "executable": "/usr/bin/python3",
	}}
	before := rtCapture(t, "systemd.unit", "agent.service", "2026-10-06T00:00:00Z", service)
	after := rtCapture(t, "systemd.unit", "agent.service", "2026-10-06T00:00:01Z", service, process)

	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	assert.Equal(t, "PROCESS\n  evidence: added", res.Render())
}

// test_missing_field_is_distinct_from_null
func TestRT_missing_field_is_distinct_from_null(t *testing.T) {
	repo := func(data map[string]any) rtRecord {
		return rtRecord{Plane: "live", Kind: "git.repository", Collector: "git", Method: "git rev-parse/status", Data: data}
	}
	before := rtCapture(t, "git.repository", "/srv/agent", "2026-10-06T00:00:00Z",
		repo(map[string]any{"repository_root": "/srv/agent"}))
	after := rtCapture(t, "git.repository", "/srv/agent", "2026-10-06T00:00:01Z",
		repo(map[string]any{"repository_root": "/srv/agent", "branch": nil}))

	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	assert.Equal(t, "CODE\n  branch: <missing> -> null", res.Render())
}

// test_codex_mcp_diff_reports_tool_catalog_change
func TestRT_codex_mcp_diff_reports_tool_catalog_change(t *testing.T) {
	mcp := func(toolCount int, tools, catalog string) rtRecord {
		return rtRecord{Plane: "live", Kind: "codex.mcp", Collector: "codex", Method: "app-server mcpServerStatus/list", Data: map[string]any{
			"server_count":                    1,
			"server:docs:runtime_status":      "connected",
			"server:docs:auth_status":         "unsupported",
			"server:docs:tool_count":          toolCount,
			"server:docs:tools":               tools,
			"server:docs:tool_catalog_sha256": catalog,
		}}
	}
	a, b := "sha256:"+strings.Repeat("a", 64), "sha256:"+strings.Repeat("b", 64)
	before := rtCapture(t, "codex.workspace", "/srv/agent", "2026-10-06T00:00:00Z", mcp(1, `["search"]`, a))
	after := rtCapture(t, "codex.workspace", "/srv/agent", "2026-10-06T00:00:01Z", mcp(2, `["fetch","search"]`, b))

	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	assert.Equal(t, strings.Join([]string{
		"CODEX MCP",
		"  server:docs:tool_catalog_sha256: " + a + " -> " + b,
		"  server:docs:tool_count: 1 -> 2",
		`  server:docs:tools: ["search"] -> ["fetch","search"]`,
	}, "\n"), res.Render())
}

// test_diff_selects_one_protected_field
func TestRT_diff_selects_one_protected_field(t *testing.T) {
	res, err := diff.Verify(rtLoad(t, "before.json"), rtLoad(t, "after.json"), rtSelectors(t, "git.repository.head_commit"))
	require.NoError(t, err)
	assert.Equal(t, "CODE\n"+rtHeadCommitChange, res.Render())
}

// test_diff_selector_ignores_unprotected_changes
func TestRT_diff_selector_ignores_unprotected_changes(t *testing.T) {
	res, err := diff.Verify(rtLoad(t, "before.json"), rtLoad(t, "after.json"), rtSelectors(t, "git.repository.branch"))
	require.NoError(t, err)
	assert.Empty(t, res.Changes)
}

// test_diff_selector_can_protect_whole_evidence_kind
func TestRT_diff_selector_can_protect_whole_evidence_kind(t *testing.T) {
	res, err := diff.Verify(rtLoad(t, "before.json"), rtLoad(t, "after.json"), rtSelectors(t, "git.repository"))
	require.NoError(t, err)
	assert.Equal(t, "CODE\n  dirty: false -> true\n"+rtHeadCommitChange, res.Render())
}

// test_diff_selector_rejects_unknown_field
func TestRT_diff_selector_rejects_unknown_field(t *testing.T) {
	_, err := diff.Verify(rtLoad(t, "before.json"), rtLoad(t, "after.json"), rtSelectors(t, "git.repository.not_a_real_field"))
	require.ErrorIs(t, err, diff.ErrSelector)
	assert.Contains(t, err.Error(), "does not match an evidence field")
}
