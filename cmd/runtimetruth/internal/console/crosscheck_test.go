package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// fixtureSnapshot reads a snapshot of pkg/evidence/testdata/snapshots.
func fixtureSnapshot(t *testing.T, name string) *snapshot.Snapshot {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "pkg", "evidence", "testdata", "snapshots", name))
	require.NoError(t, err)
	s, err := snapshot.Parse(raw)
	require.NoError(t, err)
	return s
}

// codexAgent is a Codex workspace's snapshot: its resolved model, sandbox
// and approval policy, an instruction file's digest and its MCP tools.
func codexAgent(model, sandbox, approval, agentsDigest string, tools ...string) *snapshot.Snapshot {
	byName := snapshot.Data{}
	for _, tl := range tools {
		byName["docs."+tl] = snapshot.String("sha256:" + strings.Repeat(tl[:1], 8))
	}
	src := snapshot.Source{Collector: "codex", Method: "app-server"}
	return snapshot.New(snapshot.Target{Kind: "codex.workspace", Identifier: "/srv/agent"},
		snapshot.Record{Plane: snapshot.Resolved, Kind: "codex.config", Source: src, Data: snapshot.Data{
			"model": snapshot.String(model), "sandbox_mode": snapshot.String(sandbox), "approval_policy": snapshot.String(approval)}},
		snapshot.Record{Plane: snapshot.Resolved, Kind: "codex.instructions", Source: src, Data: snapshot.Data{
			"AGENTS.md": snapshot.String(agentsDigest)}},
		snapshot.Record{Plane: snapshot.Resolved, Kind: "codex.mcp_tools", Source: src, Data: byName},
	)
}

// A target's page shows a drift exactly as `runtimetruth verify --json`
// reports it for the same baseline and snapshot: every change and every
// field of the CLI's report is a row of the page, with the same values,
// for a systemd unit with its process and repository, and for a Codex
// agent (model, sandbox, approval policy, an instruction file's digest,
// an MCP tool added).
func TestTargetPageIsVerifyJSON(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after *snapshot.Snapshot
	}{
		{"systemd, process and git", fixtureSnapshot(t, "before.json"), fixtureSnapshot(t, "after.json")},
		{"a Codex agent", codexAgent("gpt-5", "workspace-write", "on-request", "sha256:aaaa", "search"),
			codexAgent("gpt-5-mini", "danger-full-access", "never", "sha256:bbbb", "search", "shell")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]*snapshot.Snapshot{"before.json": tc.before, "after.json": tc.after}
			for name, s := range files {
				raw, err := s.Marshal(true)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(dir, name), raw, 0o600))
			}
			var out, errs bytes.Buffer
			code := cli.Run(t.Context(), cli.IO{In: strings.NewReader(""), Out: &out, Err: &errs}, "test",
				[]string{"verify", "--json", filepath.Join(dir, "before.json"), filepath.Join(dir, "after.json")})
			require.Equal(t, cli.ExitDrift, code, errs.String())
			var want report.Report
			require.NoError(t, json.Unmarshal(out.Bytes(), &want))
			require.NotEmpty(t, want.Changes)

			b := startFleet(t)
			target := events.Target{Kind: tc.before.Target.Kind, Identifier: tc.before.Target.Identifier}
			raw, err := tc.before.Marshal(false)
			require.NoError(t, err)
			_, err = verifier.NewBaselines(b.js, "").Put(t.Context(), events.Baseline{Target: target, Snapshot: raw, ApprovedBy: "test"})
			require.NoError(t, err)
			after := *tc.after
			after.CapturedAt = snapshot.FormatTime(time.Now().UTC())
			b.collected(t, "web-1", &after)

			_, base := startConsole(t, b)
			session := login(t, base)
			resp := do(t, base, request{session: session,
				path: "/target?" + url.Values{"host": {"web-1"}, "kind": {target.Kind}, "id": {target.Identifier}}.Encode()})
			require.Equal(t, http.StatusOK, resp.code, resp.body)
			esc := template.HTMLEscapeString
			side := func(s report.Side) string {
				if !s.Present {
					return "(absent)"
				}
				return esc(s.Value.String())
			}
			rows := 0
			for _, c := range want.Changes {
				if len(c.Fields) == 0 {
					rows++
					assert.Contains(t, resp.body, fmt.Sprintf("<tr><td>%s</td><td>%s</td><td></td>", esc(c.Kind), c.Status))
				}
				for _, f := range c.Fields {
					rows++
					assert.Contains(t, resp.body, fmt.Sprintf("<tr><td>%s</td><td>%s</td><td>%s</td><td><code>%s</code></td><td><code>%s</code></td></tr>",
						esc(c.Kind), c.Status, esc(f.Field), side(f.Before), side(f.After)), "%s.%s", c.Kind, f.Field)
				}
			}
			_, section, ok := strings.Cut(resp.body, "<h2>Changes against the baseline</h2>")
			require.True(t, ok, "the page has its changes")
			section, _, ok = strings.Cut(section, "</table>")
			require.True(t, ok)
			assert.Equal(t, rows, strings.Count(section, "<tr><td>"), "no row but the report's")
		})
	}
}
