package codex_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/source/codex"
	"github.com/runtimetruth/runtimetruth/services/collector/source/codex/appserver"
)

// fakeRun is a workspace for the fake codex.
type fakeRun struct {
	dir, log string
	opts     codex.Options
}

func newFakeRun(t testing.TB, scenario string) *fakeRun {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	base := t.TempDir()
	r := &fakeRun{dir: filepath.Join(base, "ws"), log: filepath.Join(base, "fake.log")}
	require.NoError(t, os.MkdirAll(filepath.Join(r.dir, "adir"), 0o755))
	writeFile(t, filepath.Join(r.dir, "AGENTS.md"), "# Rules\n"+secret+"agents\n")
	require.NoError(t, syscall.Mkfifo(filepath.Join(r.dir, "fifo"), 0o644))
	r.opts = codex.Options{
		Binary:     exe,
		ResolveMCP: true,
		Timeout:    10 * time.Second,
		Env: []string{
			fakeEnv + "=" + scenario,
			fakeLogEnv + "=" + r.log,
			// A -race binary otherwise sleeps 1 s before exiting.
			"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"),
		},
	}
	return r
}

func (r *fakeRun) collect(t testing.TB) (snapshot.Target, []snapshot.Record, error) {
	t.Helper()
	target, recs, err := codex.Collect(context.Background(), r.dir, r.opts)
	assert.Empty(t, procMatch(t, "", r.dir), "processes left behind")
	return target, recs, err
}

// received returns the messages the fake read, in order.
func (r *fakeRun) received(t testing.TB) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(r.log)
	require.NoError(t, err)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

func TestFakeHappyPath(t *testing.T) {
	r := newFakeRun(t, "ok")
	target, recs, err := r.collect(t)
	require.NoError(t, err)
	assert.NotContains(t, marshal(t, target, recs), secret)
	assert.Equal(t, snapshot.Target{Kind: "codex.workspace", Identifier: r.dir}, target)
	assert.Equal(t, []string{"codex.runtime", "codex.config", "codex.thread", "codex.instructions", "codex.mcp", "codex.mcp_tools"}, kinds(recs))
	byKind := recordsByKind(t, recs)

	assert.Equal(t, "codex-cli 0.0.0-fake", str(t, byKind["codex.runtime"].Data, "version"))
	assert.Equal(t, snapshot.Data{
		"cwd":                    snapshot.String(r.dir),
		"model":                  snapshot.String("fake-model"),
		"model_provider":         snapshot.String("openai"),
		"model_reasoning_effort": snapshot.Null(),
		"approval_policy":        snapshot.String(`{"granular":{"mcp_elicitations":false,"rules":"\u00fcn\u00ef","sandbox_approval":true}}`),
		"sandbox_mode":           snapshot.String("read-only"),
	}, byKind["codex.config"].Data)
	assert.Equal(t, snapshot.Data{
		"model":               snapshot.String("fake-model"),
		"model_provider":      snapshot.String("openai"),
		"reasoning_effort":    snapshot.Null(),
		"cwd":                 snapshot.String("/fake/cwd"),
		"approval_policy":     snapshot.String("never"),
		"sandbox":             snapshot.String(`{"networkAccess":false,"type":"readOnly"}`),
		"instruction_sources": snapshot.String(`["AGENTS.md","missing.md","adir","fifo"]`),
		"cli_version":         snapshot.String("0.0.0-fake"),
	}, byKind["codex.thread"].Data)
	assert.Equal(t, snapshot.Data{
		"source_count":      snapshot.Int(4),
		"source:AGENTS.md":  snapshot.String(sha256Hex(t, filepath.Join(r.dir, "AGENTS.md"))),
		"source:missing.md": snapshot.String("unavailable"),
		"source:adir":       snapshot.String("unavailable"),
		"source:fifo":       snapshot.String("unavailable"),
	}, byKind["codex.instructions"].Data)

	mcp := byKind["codex.mcp"].Data
	assert.Equal(t, snapshot.Int(4), mcp["server_count"])
	assert.Equal(t, snapshot.String(`["add","echo"]`), mcp["server:alpha:tools"])
	assert.Equal(t, snapshot.Bool(true), mcp["server:alpha:tool_names_included"])
	assert.Equal(t, snapshot.String("error"), mcp["server:broken:tool_catalog_status"])
	assert.Equal(t, snapshot.String("failed"), mcp["server:broken:runtime_status"])
	assert.Equal(t, snapshot.String("[]"), mcp["server:broken:tools"])
	assert.Equal(t, snapshot.Int(70), mcp["server:many:tool_count"], "over the bound the count stays")
	assert.Equal(t, snapshot.Bool(false), mcp["server:many:tool_names_included"])
	assert.Equal(t, snapshot.Null(), mcp["server:many:tools"])
	assert.Equal(t, snapshot.String(`["a:b"]`), mcp["server:we:ird%:tools"])

	tools := byKind["codex.mcp_tools"].Data
	assert.Equal(t, snapshot.Int(2+70+1), tools["tool_count"])
	assert.Len(t, tools, 1+5*(2+70+1), "every tool is fingerprinted, with no bound")
	assert.Contains(t, tools, "tool:many:tool69:description_sha256")
	assert.Contains(t, tools, "tool:we%3Aird%25:a%3Ab:sha256", "':' and '%' in names are escaped")

	var methods []string
	for _, m := range r.received(t) {
		if method, ok := m["method"].(string); ok {
			methods = append(methods, method)
			if method == "thread/start" {
				assert.Equal(t, map[string]any{"ephemeral": true}, m["params"], "thread/start must not get a cwd")
			}
			if method == "mcpServerStatus/list" {
				assert.Equal(t, map[string]any{"limit": 100.0, "detail": "toolsAndAuthOnly", "threadId": "thread-1"}, m["params"])
			}
			continue
		}
		// The client's answers to the fake's server requests.
		code := m["error"].(map[string]any)["code"]
		assert.Equal(t, -32601.0, code)
		methods = append(methods, "reply:"+toString(m["id"]))
	}
	assert.Equal(t, []string{
		"initialize", "initialized", "config/read", "thread/start",
		"reply:approval-1", "reply:7", "mcpServerStatus/list",
	}, methods)
}

func toString(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s, _ := v.(string)
	return s
}

func TestFakePassiveStopsAfterConfig(t *testing.T) {
	r := newFakeRun(t, "ok")
	r.opts.ResolveMCP = false
	_, recs, err := r.collect(t)
	require.NoError(t, err)
	assert.Equal(t, []string{"codex.runtime", "codex.config"}, kinds(recs))
	var methods []string
	for _, m := range r.received(t) {
		methods = append(methods, m["method"].(string))
	}
	assert.Equal(t, []string{"initialize", "initialized", "config/read"}, methods)
}

func TestFakePagination(t *testing.T) {
	r := newFakeRun(t, "paginate")
	r.opts.SeedOnly = true
	_, recs, err := r.collect(t)
	require.NoError(t, err)
	assert.Equal(t, []string{"codex.runtime", "codex.config", "codex.thread", "codex.instructions", "codex.mcp"}, kinds(recs))
	mcp := recordsByKind(t, recs)["codex.mcp"].Data
	assert.Equal(t, snapshot.Int(3), mcp["server_count"])
	assert.Equal(t, snapshot.Int(1), mcp["server:beta:tool_count"])
	assert.Equal(t, snapshot.String("[]"), mcp["server:gamma:tools"])
	var cursors []any
	for _, m := range r.received(t) {
		if m["method"] == "mcpServerStatus/list" {
			cursors = append(cursors, m["params"].(map[string]any)["cursor"])
		}
	}
	assert.Equal(t, []any{nil, "c1", "c2"}, cursors)
}

func TestFakeStartingServerSettles(t *testing.T) {
	r := newFakeRun(t, "starting")
	_, recs, err := r.collect(t)
	require.NoError(t, err)
	assert.Equal(t, snapshot.String("connected"), recordsByKind(t, recs)["codex.mcp"].Data["server:alpha:runtime_status"])
	lists := 0
	for _, m := range r.received(t) {
		if m["method"] == "mcpServerStatus/list" {
			lists++
		}
	}
	assert.Equal(t, 2, lists, "listed again after the terminal startup status")
}

func TestFakeStaleResponsesAndBlankLinesAreSkipped(t *testing.T) {
	r := newFakeRun(t, "stale-ids")
	_, _, err := r.collect(t)
	require.NoError(t, err)
}

func TestFakeErrors(t *testing.T) {
	for _, tc := range []struct {
		name, scenario string
		timeout        time.Duration
		is             error
		want           string
	}{
		{name: "malformed JSON", scenario: "malformed", is: appserver.ErrMalformed, want: "codex app-server initialize: malformed message from codex app-server: line 1 column"},
		{name: "non-object result", scenario: "non-object", is: appserver.ErrMalformed, want: "initialize result is array, want an object"},
		{name: "error response", scenario: "rpc-error", want: `codex app-server config/read failed: error -32603: "failed to read configuration layers: boom"`},
		{name: "slow server", scenario: "slow", timeout: 2 * time.Second, is: codex.ErrTimeout, want: "timed out: codex app-server did not answer config/read within 2s"},
		{name: "exits before answering", scenario: "exit", is: appserver.ErrExited, want: `codex app-server exited before answering initialize: Error: CODEX_HOME points to "/nope", but that path does not exist`},
		{name: "exits silently", scenario: "exit-silent", is: appserver.ErrExited, want: "exited before answering initialize: nothing on stderr"},
		{name: "line over 16 MiB", scenario: "huge-line", is: appserver.ErrLineTooLong, want: "line longer than 16777216 bytes"},
		{name: "no config object", scenario: "no-config", is: codex.ErrResponse, want: "config/read returned no config object"},
		{name: "non-integer config value", scenario: "float-config", is: codex.ErrResponse, want: `config/read returned unsupported value type for "model"`},
		{name: "repeated cursor", scenario: "repeat-cursor", is: codex.ErrResponse, want: "mcpServerStatus/list repeated a pagination cursor"},
		{name: "empty cursor", scenario: "empty-cursor", is: codex.ErrResponse, want: "mcpServerStatus/list returned invalid nextCursor"},
		{name: "non-string cursor", scenario: "number-cursor", is: codex.ErrResponse, want: "mcpServerStatus/list returned invalid nextCursor"},
		{name: "duplicate server", scenario: "dup-server", is: codex.ErrResponse, want: `mcpServerStatus/list returned duplicate server "alpha"`},
		{name: "empty server name", scenario: "empty-name", is: codex.ErrResponse, want: "mcpServerStatus/list returned invalid server name"},
		{name: "empty version", scenario: "version-empty", want: "codex --version returned an empty version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newFakeRun(t, tc.scenario)
			if tc.timeout > 0 {
				r.opts.Timeout = tc.timeout
			}
			start := time.Now()
			_, recs, err := r.collect(t)
			require.Error(t, err)
			assert.Nil(t, recs)
			assert.Contains(t, err.Error(), tc.want)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assert.Less(t, time.Since(start), r.opts.Timeout+3*time.Second, "the deadline is overall")
		})
	}
}

func TestFakeServerIgnoringEOFIsKilledWithItsChildren(t *testing.T) {
	r := newFakeRun(t, "ignore-eof")
	_, _, err := r.collect(t)
	require.NoError(t, err)
	b, err := os.ReadFile(r.log + ".pids")
	require.NoError(t, err)
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		require.NoError(t, err)
		stat, err := os.ReadFile("/proc/" + f + "/stat")
		if err == nil {
			s := string(stat)
			state := s[strings.LastIndexByte(s, ')')+2]
			assert.Contains(t, "ZX", string(state), "pid %d is still running", pid)
		}
	}
}

func TestFakeConfigWriteIsAnError(t *testing.T) {
	r := newFakeRun(t, "writes-config")
	home := t.TempDir()
	writeFile(t, filepath.Join(home, "config.toml"), "model = \"m\"\n")
	r.opts.Env = append(r.opts.Env, "CODEX_HOME="+home)
	_, recs, err := r.collect(t)
	require.ErrorIs(t, err, codex.ErrSideEffect)
	assert.Nil(t, recs)
	assert.EqualError(t, err, "codex config.toml changed during the probe: "+filepath.Join(home, "config.toml"))

	r = newFakeRun(t, "ok")
	r.opts.Env = append(r.opts.Env, "CODEX_HOME="+home)
	_, _, err = r.collect(t)
	require.NoError(t, err, "an unchanged config.toml is fine")
}

func TestCollectInputErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	writeFile(t, file, "x")
	exe, err := os.Executable()
	require.NoError(t, err)

	_, _, err = codex.Collect(context.Background(), dir, codex.Options{Binary: filepath.Join(dir, "no-such-codex")})
	require.ErrorIs(t, err, codex.ErrNotFound)
	assert.Contains(t, err.Error(), "codex executable not found")

	t.Setenv("PATH", dir)
	_, _, err = codex.Collect(context.Background(), dir, codex.Options{})
	require.ErrorIs(t, err, codex.ErrNotFound)
	assert.Contains(t, err.Error(), "codex executable not found on PATH")

	_, _, err = codex.Collect(context.Background(), file, codex.Options{Binary: exe})
	require.EqualError(t, err, "codex working directory is not a directory: "+strconv.Quote(file))
	_, _, err = codex.Collect(context.Background(), filepath.Join(dir, "nope"), codex.Options{Binary: exe})
	require.EqualError(t, err, "codex working directory does not exist: "+strconv.Quote(filepath.Join(dir, "nope")))
}
