package cli_test

// Ports of RuntimeTruth v0.2's own tests (sidelobe-labs/runtimetruth) that
// apply to a file-vs-file digest, diff or verify, or a policy run: the same
// exit code, the same stdout and, where the Python test checks one, the same
// stderr substring. Each TestRT_* test is named after the Python test it
// ports (tests/test_cli.py, tests/test_policy_cli.py, tests/test_model.py).
// The fixtures are RuntimeTruth's tests/fixtures/snapshots/{before,after}.json
// byte for byte (target agent.service), in
// pkg/evidence/testdata/snapshots/runtimetruth/.
//
// The TestDifference* tests pin runtimetruth's documented, intentional
// differences from RuntimeTruth: each asserts our behaviour.

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot/snapshottest"
)

// rtFixture returns the path of one of RuntimeTruth's snapshot fixtures.
func rtFixture(name string) string { return fixture(filepath.Join("runtimetruth", name)) }

const (
	rtPass       = "PASS: runtime matches baseline.\n"
	rtDriftFirst = "DRIFT: runtime differs from baseline.\n\n"
	// rtDiff is format_diff of before.json -> after.json
	// (test_realistic_snapshot_diff_groups_runtime_changes).
	rtDiff = "SERVICE\n" +
		"  exec_main_pid: 3036 -> 4190\n" +
		"  main_pid: 3036 -> 4190\n" +
		"  restart_count: 0 -> 1\n" +
		"\n" +
		"PROCESS\n" +
		"  pid: 3036 -> 4190\n" +
		"\n" +
		"CODE\n" +
		"  dirty: false -> true\n" +
		"  head_commit: 1111111111111111111111111111111111111111 -> 2222222222222222222222222222222222222222"
	rtTarget = `"target":{"identifier":"agent.service","kind":"systemd.unit"}`
	// rtHeadCommitChange is the one change left when only
	// git.repository.head_commit is protected.
	rtHeadCommitChange = `{"fields":[{"after":{"present":true,"value":"2222222222222222222222222222222222222222"},` +
		`"before":{"present":true,"value":"1111111111111111111111111111111111111111"},"field":"head_commit"}],` +
		`"kind":"git.repository","status":"changed"}`
)

// rtRecord is one EvidenceRecord of a Python test; a nil data value is None.
type rtRecord = snapshottest.Record

// rtSnapshotJSON is the JSON text of Snapshot.capture(target=...,
// evidence=...) at capturedAt.
func rtSnapshotJSON(t *testing.T, targetKind, targetID, capturedAt string, records ...rtRecord) string {
	t.Helper()
	return string(snapshottest.CaptureJSON(t, targetKind, targetID, capturedAt, records...))
}

// rtReplace is strings.Replace of the first old, which must occur in s.
func rtReplace(t *testing.T, s, old, replacement string) string {
	t.Helper()
	require.Contains(t, s, old)
	return strings.Replace(s, old, replacement, 1)
}

// rtError asserts a failed run: exit 1, nothing on stdout, and want in the
// one-line error on stderr.
func rtError(t *testing.T, r result, want string) {
	t.Helper()
	assert.Equal(t, 1, r.code, "stdout=%q stderr=%q", r.stdout, r.stderr)
	assert.Empty(t, r.stdout)
	assert.True(t, strings.HasPrefix(r.stderr, "runtimetruth: error: "), r.stderr)
	assert.Contains(t, r.stderr, want)
}

// --- tests/test_cli.py ---

// test_diff_command_renders_semantic_changes
func TestRT_diff_command_renders_semantic_changes(t *testing.T) {
	r := run(t, "diff", rtFixture("before.json"), rtFixture("after.json"))
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "SERVICE\n")
	assert.Contains(t, r.stdout, "PROCESS\n")
	assert.Contains(t, r.stdout, "CODE\n")
	assert.Contains(t, r.stdout, "head_commit:")
	// main() prints format_diff's text, which test_diff.py pins exactly.
	assert.Equal(t, rtDiff+"\n", r.stdout)
}

// test_verify_pass_returns_zero
func TestRT_verify_pass_returns_zero(t *testing.T) {
	baseline := rtFixture("before.json")
	r := run(t, "verify", baseline, baseline)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, rtPass, r.stdout)
}

// test_verify_drift_returns_two_and_renders_diff
func TestRT_verify_drift_returns_two_and_renders_diff(t *testing.T) {
	r := run(t, "verify", rtFixture("before.json"), rtFixture("after.json"))
	assert.Equal(t, 2, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, rtDriftFirst), r.stdout)
	assert.Contains(t, r.stdout, "SERVICE\n")
	assert.Contains(t, r.stdout, "CODE\n")
	assert.Equal(t, rtDriftFirst+rtDiff+"\n", r.stdout)
}

// test_verify_rejects_snapshot_and_live_codex_together
func TestRT_verify_rejects_snapshot_and_live_codex_together(t *testing.T) {
	r := run(t, "verify", rtFixture("before.json"), rtFixture("after.json"), "--codex", "/srv/agent")
	rtError(t, r, "either a current snapshot or --codex")
}

// test_verify_protect_ignores_unprotected_drift
func TestRT_verify_protect_ignores_unprotected_drift(t *testing.T) {
	r := run(t, "verify", rtFixture("before.json"), rtFixture("after.json"), "--protect", "git.repository.branch")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, rtPass, r.stdout)
}

// test_verify_protect_reports_only_selected_drift
func TestRT_verify_protect_reports_only_selected_drift(t *testing.T) {
	r := run(t, "verify", rtFixture("before.json"), rtFixture("after.json"), "--protect", "git.repository.head_commit")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stdout, "CODE\n")
	assert.Contains(t, r.stdout, "head_commit:")
	assert.NotContains(t, r.stdout, "dirty:")
	assert.NotContains(t, r.stdout, "SERVICE\n")
	assert.NotContains(t, r.stdout, "PROCESS\n")
}

// test_verify_protect_rejects_unknown_selector
func TestRT_verify_protect_rejects_unknown_selector(t *testing.T) {
	r := run(t, "verify", rtFixture("before.json"), rtFixture("after.json"), "--protect", "git.repository.not_a_real_field")
	rtError(t, r, "does not match an evidence field")
}

// test_verify_json_pass_report
func TestRT_verify_json_pass_report(t *testing.T) {
	baseline := rtFixture("before.json")
	r := run(t, "verify", baseline, baseline, "--json")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, `{"changes":[],"protected":[],"report_schema_version":1,"status":"pass",`+rtTarget+"}\n", r.stdout)
}

// test_verify_json_drift_report_preserves_structure
func TestRT_verify_json_drift_report_preserves_structure(t *testing.T) {
	r := run(t, "verify", rtFixture("before.json"), rtFixture("after.json"),
		"--protect", "git.repository.head_commit", "--json")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Equal(t, `{"changes":[`+rtHeadCommitChange+`],"protected":["git.repository.head_commit"],`+
		`"report_schema_version":1,"status":"drift",`+rtTarget+"}\n", r.stdout)
}

// test_digest_emits_canonical_sha256. The Python test stubs the hash and
// checks the shape sha256:<64 hex>; ours is the real digest, the sha256 of
// the snapshot's RFC 8785 bytes (computed with Python's
// json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False),
// which is RFC 8785 for this ASCII, integer-only document).
func TestRT_digest_emits_canonical_sha256(t *testing.T) {
	r := run(t, "digest", rtFixture("before.json"))
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, regexp.MustCompile(`\Asha256:[0-9a-f]{64}\n\z`), r.stdout)
	assert.Equal(t, "sha256:6e1a507b1f8b4984a4724462b6f6596b9a1d525548849594713ff4b2ea8986bc\n", r.stdout)
}

// --- tests/test_policy_cli.py ---

// test_verify_policy_ignores_unprotected_drift
func TestRT_verify_policy_ignores_unprotected_drift(t *testing.T) {
	policy := writeFile(t, t.TempDir(), "policy.toml", "version = 1\nprotect = [\"git.repository.branch\"]\n")
	r := run(t, "verify", rtFixture("before.json"), rtFixture("after.json"), "--policy", policy)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, rtPass, r.stdout)
}

// test_verify_policy_reports_selected_drift
func TestRT_verify_policy_reports_selected_drift(t *testing.T) {
	policy := writeFile(t, t.TempDir(), "policy.toml", "version = 1\nprotect = [\"git.repository.head_commit\"]\n")
	r := run(t, "verify", rtFixture("before.json"), rtFixture("after.json"), "--policy", policy)
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stdout, "head_commit:")
	assert.NotContains(t, r.stdout, "dirty:")
}

// test_verify_policy_and_cli_protect_are_additive
func TestRT_verify_policy_and_cli_protect_are_additive(t *testing.T) {
	policy := writeFile(t, t.TempDir(), "policy.toml", "version = 1\nprotect = [\"git.repository.branch\"]\n")
	r := run(t, "verify", rtFixture("before.json"), rtFixture("after.json"),
		"--policy", policy, "--protect", "git.repository.head_commit", "--json")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Equal(t, `{"changes":[`+rtHeadCommitChange+`],"protected":["git.repository.branch","git.repository.head_commit"],`+
		`"report_schema_version":1,"status":"drift",`+rtTarget+"}\n", r.stdout)
}

// --- tests/test_model.py, as file runs ---

// test_snapshot_serialization_is_stable. The Python test pins the payload
// of Snapshot.to_json() for one snapshot; rtModelCompact is that payload as
// to_json writes it (compact, keys sorted). For this ASCII, integer-only
// document those bytes are also its RFC 8785 form, so the digest of the
// payload, written in to_dict's key order, is the sha256 of to_json's bytes.
func TestRT_snapshot_serialization_is_stable(t *testing.T) {
	const rtModelCompact = `{"captured_at":"2026-10-06T00:00:00Z","evidence":[{"data":{"main_pid":42,"sub_state":"running"},` +
		`"kind":"systemd.unit","plane":"live","source":{"collector":"systemd","method":"systemctl show"}}],` +
		`"schema_version":1,"target":{"identifier":"agent.service","kind":"systemd.unit"}}`
	sum := sha256.Sum256([]byte(rtModelCompact))
	want := "sha256:" + hex.EncodeToString(sum[:]) + "\n"

	dir := t.TempDir()
	unsorted := rtSnapshotJSON(t, "systemd.unit", "agent.service", "2026-10-06T00:00:00Z",
		rtRecord{Plane: "live", Kind: "systemd.unit", Collector: "systemd", Method: "systemctl show", Data: map[string]any{"sub_state": "running", "main_pid": 42}})
	for name, doc := range map[string]string{"to_json.json": rtModelCompact, "capture.json": unsorted} {
		r := run(t, "digest", writeFile(t, dir, name, doc))
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, want, r.stdout, name)
	}
}

// test_snapshot_json_round_trip: a snapshot read back from its JSON is the
// same snapshot; as a file run, the compact and the pretty to_json of the
// Python test's snapshot verify against each other and digest alike.
func TestRT_snapshot_json_round_trip(t *testing.T) {
	dir := t.TempDir()
	compact := writeFile(t, dir, "compact.json", `{"captured_at":"2026-10-06T00:00:00Z","evidence":[{"data":`+
		`{"branch":null,"dirty":false,"repository_root":"/srv/agent"},"kind":"git.repository","plane":"live",`+
		`"source":{"collector":"git","method":"git rev-parse/status"}}],"schema_version":1,`+
		`"target":{"identifier":"/srv/agent","kind":"git.repository"}}`)
	pretty := writeFile(t, dir, "pretty.json", `{
  "captured_at": "2026-10-06T00:00:00Z",
  "evidence": [
    {
      "data": {
        "branch": null,
        "dirty": false,
        "repository_root": "/srv/agent"
      },
      "kind": "git.repository",
      "plane": "live",
      "source": {
        "collector": "git",
        "method": "git rev-parse/status"
      }
    }
  ],
  "schema_version": 1,
  "target": {
    "identifier": "/srv/agent",
    "kind": "git.repository"
  }
}`)
	r := run(t, "verify", compact, pretty)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, rtPass, r.stdout)
	a, b := run(t, "digest", compact), run(t, "digest", pretty)
	assert.Equal(t, 0, a.code, a.stderr)
	assert.Equal(t, a.stdout, b.stdout)
}

// test_snapshot_parser_rejects_unknown_schema_version
func TestRT_snapshot_parser_rejects_unknown_schema_version(t *testing.T) {
	doc := writeFile(t, t.TempDir(), "v2.json", `{"schema_version":2,"captured_at":"x","target":{},"evidence":[]}`)
	rtError(t, run(t, "verify", doc, rtFixture("after.json")), "unsupported schema_version")
	rtError(t, run(t, "digest", doc), "unsupported schema_version")
}

// test_snapshot_rejects_naive_capture_time: Snapshot.capture refuses a naive
// datetime; as a file run, a snapshot whose captured_at has no zone.
// TestVerifyErrorsExitOne ("naive timestamp") checks the same on our own
// fixture.
func TestRT_snapshot_rejects_naive_capture_time(t *testing.T) {
	doc := rtSnapshotJSON(t, "systemd.unit", "agent.service", "2026-10-06T00:00:00")
	naive := writeFile(t, t.TempDir(), "naive.json", doc)
	rtError(t, run(t, "verify", naive, naive), "timezone-aware")
}

// --- Intentional differences ---

// A boolean never equals an integer: true -> 1 is drift here, where
// RuntimeTruth's Python == passes it (True == 1). The library-level check
// is TestBoolIsNotInt in pkg/evidence/diff.
func TestDifferenceBoolNeverEqualsInteger(t *testing.T) {
	tests := []struct {
		before, after any
		want          string
	}{
		{true, 1, "true -> 1"},
		{false, 0, "false -> 0"},
		{1, true, "1 -> true"},
		{0, false, "0 -> false"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			dir := t.TempDir()
			repo := func(v any) rtRecord {
				return rtRecord{Plane: "live", Kind: "git.repository", Collector: "git", Method: "git rev-parse/status", Data: map[string]any{"repository_root": "/srv/agent", "dirty": v}}
			}
			before := writeFile(t, dir, "before.json", rtSnapshotJSON(t, "git.repository", "/srv/agent", "2026-10-06T00:00:00Z", repo(tc.before)))
			after := writeFile(t, dir, "after.json", rtSnapshotJSON(t, "git.repository", "/srv/agent", "2026-10-06T00:00:01Z", repo(tc.after)))
			r := run(t, "verify", before, after)
			assert.Equal(t, 2, r.code, r.stderr)
			assert.Equal(t, rtDriftFirst+"CODE\n  dirty: "+tc.want+"\n", r.stdout)
		})
	}
}

// Unknown members of a snapshot (top level, target, record, source) are an
// error; RuntimeTruth ignores them, so its verify of these files passes.
// pkg/evidence/snapshot's TestParseRejects checks the top-level and record
// cases on the parser.
func TestDifferenceUnknownMembersAreErrors(t *testing.T) {
	valid := mustRead(t, rtFixture("before.json"))
	tests := []struct{ name, old, replacement, want string }{
		{"top level", `"schema_version": 1,`, `"schema_version": 1, "extra": 1,`, `snapshot: unknown key "extra"`},
		{"target", `"identifier": "agent.service"`, `"identifier": "agent.service", "extra": 1`, `target: unknown key "extra"`},
		{"record", `"plane": "live",`, `"plane": "live", "extra": 1,`, `evidence[0]: unknown key "extra"`},
		{"source", `"method": "systemctl show"`, `"method": "systemctl show", "extra": 1`, `evidence[0].source: unknown key "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			current := writeFile(t, t.TempDir(), "current.json", rtReplace(t, valid, tc.old, tc.replacement))
			rtError(t, run(t, "verify", rtFixture("before.json"), current), tc.want)
		})
	}
}

// schema_version must be the integer 1: true and 1.0 are refused, where
// RuntimeTruth takes them (True == 1, 1.0 == 1). TestParseRejects checks
// true on the parser.
func TestDifferenceSchemaVersionMustBeIntegerOne(t *testing.T) {
	valid := mustRead(t, rtFixture("before.json"))
	for value, want := range map[string]string{
		"true": "schema_version: must be an integer, got boolean",
		"1.0":  "schema_version: must be an integer, got non-integer number",
	} {
		t.Run(value, func(t *testing.T) {
			current := writeFile(t, t.TempDir(), "current.json", rtReplace(t, valid, `"schema_version": 1`, `"schema_version": `+value))
			rtError(t, run(t, "verify", rtFixture("before.json"), current), want)
		})
	}
}

// Integers beyond ±(2^53-1), lone surrogates, duplicate evidence kinds, an
// empty evidence kind and an empty target kind are refused when parsing.
// TestParseRejects checks all but the empty target kind on the parser.
func TestDifferenceParseRefusals(t *testing.T) {
	valid := mustRead(t, rtFixture("before.json"))
	tests := []struct{ name, old, replacement, want string }{
		{"integer above 2^53-1", `"main_pid": 3036`, `"main_pid": 9007199254740992`, "evidence[0].data.main_pid: integer 9007199254740992 outside ±(2^53-1)"},
		{"integer below -(2^53-1)", `"main_pid": 3036`, `"main_pid": -9007199254740992`, "evidence[0].data.main_pid: integer -9007199254740992 outside ±(2^53-1)"},
		{"lone surrogate", `"working_directory": "/srv/agent"`, `"working_directory": "\ud800"`, "invalid surrogate pair"},
		{"duplicate evidence kind", `"kind": "linux.process"`, `"kind": "systemd.unit"`, `evidence[1].kind: duplicate evidence kind "systemd.unit"`},
		{"empty evidence kind", `"kind": "linux.process"`, `"kind": ""`, "evidence[1].kind: must not be empty"},
		{"empty target kind", "\"target\": {\n    \"kind\": \"systemd.unit\"", "\"target\": {\n    \"kind\": \"\"", "target.kind: must not be empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			current := writeFile(t, t.TempDir(), "current.json", rtReplace(t, valid, tc.old, tc.replacement))
			rtError(t, run(t, "verify", rtFixture("before.json"), current), tc.want)
			rtError(t, run(t, "digest", current), tc.want)
		})
	}
	t.Run("2^53-1 is accepted", func(t *testing.T) {
		dir := t.TempDir()
		doc := rtReplace(t, valid, `"main_pid": 3036`, `"main_pid": -9007199254740991`)
		doc = rtReplace(t, doc, `"exec_main_pid": 3036`, `"exec_main_pid": 9007199254740991`)
		current := writeFile(t, dir, "current.json", doc)
		r := run(t, "verify", current, current)
		assert.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, rtPass, r.stdout)
	})
}

// Usage errors exit 1, never 2 (argparse's code). TestVerifyErrorsExitOne
// already checks verify with no arguments, too many arguments and an
// unknown flag, and diff with one argument; these are the other cases of
// the file-vs-file commands.
func TestDifferenceUsageErrorsExitOne(t *testing.T) {
	a, b := rtFixture("before.json"), rtFixture("after.json")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"digest missing argument", []string{"digest"}, "usage: runtimetruth digest FILE"},
		{"digest too many arguments", []string{"digest", a, b}, "usage: runtimetruth digest FILE"},
		{"digest unknown flag", []string{"digest", "--frobnicate", a}, "unknown flag: --frobnicate"},
		{"diff missing arguments", []string{"diff"}, "usage: runtimetruth diff BEFORE AFTER"},
		{"diff too many arguments", []string{"diff", a, b, b}, "usage: runtimetruth diff BEFORE AFTER"},
		{"diff unknown flag", []string{"diff", "--frobnicate", a, b}, "unknown flag: --frobnicate"},
		{"verify missing baseline", []string{"verify", "--protect", "git.repository"}, "usage: runtimetruth verify BASELINE [CURRENT]"},
		{"verify flag without value", []string{"verify", a, b, "--protect"}, "flag needs an argument"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rtError(t, run(t, tc.args...), tc.want)
		})
	}
}

// The extension kinds (linux.process_identity, git.remotes,
// codex.mcp_tools, python.distributions, node.packages) are diffed and
// verified; RuntimeTruth refuses them as unsupported evidence kinds. And
// inspect --seed-only leaves them out (TestGitWalkthrough checks that the
// seed-only git snapshot has no git.remotes; here both ways).
func TestDifferenceExtensionKindsAreCompared(t *testing.T) {
	records := func(v string) []rtRecord {
		return []rtRecord{
			{Plane: "live", Kind: "linux.process_identity", Collector: "procfs", Method: "/proc/<pid>/{stat,status,exe}", Data: map[string]any{"pid": 42, "executable_sha256": "sha256:" + strings.Repeat(v, 64)}},
			{Plane: "live", Kind: "git.remotes", Collector: "git", Method: "git config remote.*.url", Data: map[string]any{"remote_count": 1, "remote:origin": "https://example.com/" + v + ".git"}},
			{Plane: "live", Kind: "codex.mcp_tools", Collector: "codex", Method: "app-server mcpServerStatus/list", Data: map[string]any{"tool:docs:search:sha256": "sha256:" + strings.Repeat(v, 64)}},
			{Plane: "live", Kind: "python.distributions", Collector: "python", Method: "RECORD sha256", Data: map[string]any{"dist:certifi:version": "2026.1." + v}},
			{Plane: "live", Kind: "node.packages", Collector: "node", Method: "manifest sha256", Data: map[string]any{"pkg:lodash:version": "4.17." + v}},
		}
	}
	dir := t.TempDir()
	before := writeFile(t, dir, "before.json", rtSnapshotJSON(t, "linux.process", "42", "2026-10-06T00:00:00Z", records("1")...))
	after := writeFile(t, dir, "after.json", rtSnapshotJSON(t, "linux.process", "42", "2026-10-06T00:00:01Z", records("2")...))
	rendered := "PROCESS IDENTITY\n  executable_sha256: sha256:" + strings.Repeat("1", 64) + " -> sha256:" + strings.Repeat("2", 64) + "\n\n" +
		"CODE REMOTES\n  remote:origin: https://example.com/1.git -> https://example.com/2.git\n\n" +
		"CODEX MCP TOOLS\n  tool:docs:search:sha256: sha256:" + strings.Repeat("1", 64) + " -> sha256:" + strings.Repeat("2", 64) + "\n\n" +
		"PYTHON DISTRIBUTIONS\n  dist:certifi:version: 2026.1.1 -> 2026.1.2\n\n" +
		"NODE PACKAGES\n  pkg:lodash:version: 4.17.1 -> 4.17.2\n"

	r := run(t, "diff", before, after)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, rendered, r.stdout)

	r = run(t, "verify", before, after)
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Equal(t, rtDriftFirst+rendered, r.stdout)

	r = run(t, "verify", before, before)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, rtPass, r.stdout)

	r = run(t, "verify", before, after, "--protect", "node.packages")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Equal(t, rtDriftFirst+"NODE PACKAGES\n  pkg:lodash:version: 4.17.1 -> 4.17.2\n", r.stdout)

	t.Run("inspect git --seed-only", func(t *testing.T) {
		repo := rtGitRepo(t)
		kinds := func(args ...string) []string {
			r := run(t, append([]string{"inspect", "git", repo}, args...)...)
			require.Equal(t, 0, r.code, r.stderr)
			s := parseSnapshot(t, []byte(r.stdout))
			var out []string
			for _, rec := range s.Evidence {
				out = append(out, rec.Kind)
			}
			return out
		}
		assert.Equal(t, []string{"git.repository", "git.remotes"}, kinds())
		assert.Equal(t, []string{"git.repository"}, kinds("--seed-only"))
	})
}

// rtGitRepo makes a git repository with one commit in a temp dir, with no
// template, hooks or user and system configuration.
func rtGitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", "--template="},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--no-verify", "--allow-empty", "-m", "one"},
	} {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "core.hooksPath=/dev/null"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return dir
}

// Control characters in selectors are refused, even when a field of that
// name exists; RuntimeTruth matches them as any other text (for the
// fixture it reports "does not match an evidence field", for a snapshot
// holding the field it verifies it). TestSelectorParsing in
// pkg/evidence/diff checks a NUL on the parser.
func TestDifferenceSelectorControlCharactersRefused(t *testing.T) {
	const sel = "git.repository.head\x01commit"
	rtError(t, run(t, "verify", rtFixture("before.json"), rtFixture("after.json"), "--protect", sel), "contains control characters")

	dir := t.TempDir()
	rename := func(name string) string {
		return writeFile(t, dir, name, rtReplace(t, mustRead(t, rtFixture(name)), `"head_commit"`, `"head\u0001commit"`))
	}
	before, after := rename("before.json"), rename("after.json")
	r := run(t, "verify", before, after)
	require.Equal(t, 2, r.code, "the field exists and changed: %s", r.stderr)
	rtError(t, run(t, "verify", before, after, "--protect", sel), "contains control characters")
}

// captured_at must be an RFC 3339 date-time (kept and digested as written,
// any form: TestCapturedAtIsKeptVerbatim in pkg/evidence/snapshot); what is
// not one at all is refused with a clear error, where RuntimeTruth keeps
// any string it reads.
func TestDifferenceCapturedAtMustBeRFC3339(t *testing.T) {
	for ts, want := range map[string]string{
		"2026-10-06T03:09:40":  "must be timezone-aware",
		"2026-10-06":           "is not an RFC 3339 timestamp",
		"":                     "is not an RFC 3339 timestamp",
		"yesterday":            "is not an RFC 3339 timestamp",
		"2026-10-06 03:09:40Z": "is not an RFC 3339 timestamp",
		"2026-02-30T03:09:40Z": "day out of range",
	} {
		doc := rtSnapshotJSON(t, "systemd.unit", "agent.service", ts)
		f := writeFile(t, t.TempDir(), "s.json", doc)
		for _, args := range [][]string{{"digest", f}, {"verify", f, f}, {"diff", f, f}} {
			r := run(t, args...)
			rtError(t, r, "captured_at")
			rtError(t, r, want)
		}
	}
	ok := writeFile(t, t.TempDir(), "s.json", rtSnapshotJSON(t, "systemd.unit", "agent.service", "0001-01-01T00:00:00Z"))
	r := run(t, "verify", ok, ok)
	assert.Equal(t, 0, r.code, r.stderr)
}

// Human output escapes what is not graphic (control characters, terminal
// escapes, format characters such as U+202E) in values, field names,
// paths and error messages, as Go writes them in a rune literal; a value
// without such characters prints exactly as RuntimeTruth prints it (the
// TestRT_* tests above). RuntimeTruth prints str(value) verbatim, so a
// snapshot value could clear the terminal or forge a "PASS" line under
// the DRIFT header. --json is unchanged: JSON escapes them itself.
func TestDifferenceHumanOutputEscapesControlCharacters(t *testing.T) {
	unit := func(state string) rtRecord {
		return rtRecord{Plane: "live", Kind: "systemd.unit", Collector: "systemd", Method: "systemctl show",
			Data: map[string]any{"unit_id": "agent.service", "active_state": state}}
	}
	dir := t.TempDir()
	before := writeFile(t, dir, "before.json", rtSnapshotJSON(t, "systemd.unit", "agent.service", "2026-10-06T03:09:40Z", unit("active")))
	forged := "failed\x1b[2J\x1b[H\nPASS: runtime matches baseline.\u202e"
	after := writeFile(t, dir, "after.json", rtSnapshotJSON(t, "systemd.unit", "agent.service", "2026-10-06T03:09:40Z", unit(forged)))

	escaped := `failed\x1b[2J\x1b[H\nPASS: runtime matches baseline.\u202e`
	r := run(t, "verify", before, after)
	require.Equal(t, 2, r.code, r.stderr)
	assert.Equal(t, rtDriftFirst+"SERVICE\n  active_state: active -> "+escaped+"\n", r.stdout)
	r = run(t, "diff", before, after)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "SERVICE\n  active_state: active -> "+escaped+"\n", r.stdout)

	// --json keeps the value as it is (JSON-escaped).
	r = run(t, "verify", "--json", before, after)
	require.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"value":"failed\u001b[2J\u001b[H\nPASS: runtime matches baseline.\u202e"`)

	// Error messages too: the flag parser quotes nothing.
	r = run(t, "verify", "--frob\x1b[2J\rPASS", before, after)
	rtError(t, r, `unknown flag: --frob\x1b[2J\rPASS`)
	assert.NotContains(t, r.stderr, "\x1b")
	assert.NotContains(t, r.stderr, "\r")
}
