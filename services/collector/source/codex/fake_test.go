package codex_test

// A fake `codex` for protocol edge cases: the test binary re-executes
// itself with RT_FAKE_CODEX=<scenario> (see TestMain), answers --version,
// and plays an app-server that logs every line it receives to
// $RT_FAKE_CODEX_LOG.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	fakeEnv    = "RT_FAKE_CODEX"
	fakeLogEnv = "RT_FAKE_CODEX_LOG"
	// fakeSourcesEnv is a JSON list of the instructionSources thread/start
	// reports (default AGENTS.md, missing.md, adir, fifo).
	fakeSourcesEnv = "RT_FAKE_CODEX_SOURCES"
)

type fake struct {
	scenario string
	in       *bufio.Scanner
	out      *bufio.Writer
	log      *os.File
	lists    int
}

type fakeMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Error  json.RawMessage `json:"error"`
}

// fakeCodex runs the fake and returns its exit code.
func fakeCodex(scenario string) int {
	if len(os.Args) > 1 && os.Args[1] == "--version" {
		if scenario != "version-empty" {
			_, _ = os.Stdout.WriteString("codex-cli 0.0.0-fake\n")
		}
		return 0
	}
	switch scenario {
	case "sleeper": // a stubborn MCP server: ignores SIGTERM and stdin EOF
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
		for {
			time.Sleep(time.Hour)
		}
	case "exit":
		fmt.Fprintln(os.Stderr, "\x1b[2m2026-11-30T16:10:05Z\x1b[0m \x1b[33mWARN\x1b[0m some noise")
		fmt.Fprintln(os.Stderr, `Error: CODEX_HOME points to "/nope", but that path does not exist`)
		return 1
	case "exit-silent":
		return 0
	}
	f := &fake{scenario: scenario, in: bufio.NewScanner(os.Stdin), out: bufio.NewWriter(os.Stdout)}
	f.in.Buffer(make([]byte, 1<<20), 16<<20)
	if p := os.Getenv(fakeLogEnv); p != "" {
		var err error
		if f.log, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return 4
		}
	}
	for f.in.Scan() {
		line := f.in.Bytes()
		f.logLine(line)
		var m fakeMsg
		if err := json.Unmarshal(line, &m); err != nil || m.ID == nil || m.Method == "" {
			continue
		}
		if code, stop := f.handle(m); stop {
			return code
		}
	}
	if scenario == "ignore-eof" {
		signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
		for {
			time.Sleep(time.Hour)
		}
	}
	return 0
}

func (f *fake) logLine(b []byte) {
	if f.log != nil {
		_, _ = f.log.Write(append(append([]byte(nil), b...), '\n'))
	}
}

func (f *fake) raw(s string) {
	_, _ = f.out.WriteString(s + "\n")
	_ = f.out.Flush()
}

func (f *fake) send(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	f.raw(string(b))
}

func (f *fake) result(id json.RawMessage, result any) {
	f.send(map[string]any{"id": id, "result": result})
}

func (f *fake) notify(method string, params any) {
	f.send(map[string]any{"method": method, "params": params, "emittedAtMs": time.Now().UnixMilli()})
}

// handle answers one request; stop reports that the fake should exit.
func (f *fake) handle(m fakeMsg) (code int, stop bool) {
	switch m.Method {
	case "initialize":
		return f.initialize(m)
	case "config/read":
		return f.configRead(m)
	case "thread/start":
		return f.threadStart(m)
	case "mcpServerStatus/list":
		return f.mcpList(m)
	}
	f.send(map[string]any{"id": m.ID, "error": map[string]any{"code": -32600, "message": "unknown method " + m.Method}})
	return 0, false
}

func (f *fake) initialize(m fakeMsg) (int, bool) {
	switch f.scenario {
	case "malformed":
		f.raw(`{"id":1,"result":{"userAgent":"x"`)
		return 0, false
	case "non-object":
		f.raw(`{"id":1,"result":[1,2,3]}`)
		return 0, false
	case "huge-line":
		f.raw(`{"id":1,"result":{"pad":"` + strings.Repeat("a", 17<<20) + `"}}`)
		return 0, false
	case "stale-ids":
		f.raw(`{"id":99,"result":{}}`)
		f.raw(`{"id":"1","result":[]}`)
		f.raw(``)
	}
	f.notify("configWarning", map[string]any{"summary": "early warning", "details": nil})
	home := os.Getenv("CODEX_HOME")
	if home == "" {
		home = "/fake"
	}
	f.result(m.ID, map[string]any{"userAgent": "runtimetruth/0.0.0-fake", "codexHome": home, "unknownField": []int{1}})
	f.notify("remoteControl/status/changed", map[string]any{"status": "disabled"})
	return 0, false
}

func (f *fake) configRead(m fakeMsg) (int, bool) {
	switch f.scenario {
	case "rpc-error":
		f.raw(`{"error":{"code":-32603,"message":"failed to read configuration layers: boom"},"id":` + string(m.ID) + `}`)
		return 0, false
	case "slow":
		return 0, false // never answers
	case "no-config":
		f.result(m.ID, map[string]any{"origins": map[string]any{}})
		return 0, false
	case "float-config":
		f.result(m.ID, map[string]any{"config": map[string]any{"model": 1.5}})
		return 0, false
	}
	f.result(m.ID, map[string]any{"config": map[string]any{
		"model":                  "fake-model",
		"model_provider":         "openai",
		"model_reasoning_effort": nil,
		"approval_policy":        map[string]any{"granular": map[string]any{"sandbox_approval": true, "mcp_elicitations": false, "rules": "ünï"}},
		"sandbox_mode":           "read-only",
		"instructions":           secret + "instructions",
		"developer_instructions": secret + "developer",
		"model_providers":        map[string]any{"p": map[string]any{"experimental_bearer_token": secret + "token"}},
		"mcp_servers":            map[string]any{"alpha": map[string]any{"command": "x", "args": []string{secret + "arg"}, "env": map[string]any{"K": secret + "env"}}},
		"unknown_future_key":     map[string]any{"nested": true},
	}})
	return 0, false
}

// threadStart first asks the client two questions it must refuse, then
// answers with an interleaved thread/started notification.
func (f *fake) threadStart(m fakeMsg) (int, bool) {
	var params map[string]any
	_ = json.Unmarshal(m.Params, &params)
	if _, ok := params["cwd"]; ok {
		f.raw(`{"id":` + string(m.ID) + `,"error":{"code":-32600,"message":"test fake: thread/start must not get a cwd"}}`)
		return 0, false
	}
	for _, id := range []string{`"approval-1"`, `7`} {
		f.raw(`{"id":` + id + `,"method":"item/commandExecution/requestApproval","params":{"threadId":"thread-1"}}`)
		if !f.in.Scan() {
			return 3, true
		}
		f.logLine(f.in.Bytes())
		var reply fakeMsg
		if err := json.Unmarshal(f.in.Bytes(), &reply); err != nil || string(reply.ID) != id || reply.Error == nil || reply.Method != "" {
			fmt.Fprintf(os.Stderr, "Error: bad reply to server request %s: %s\n", id, f.in.Bytes())
			return 3, true
		}
	}
	if f.scenario == "writes-config" { // what thread/start with a cwd does
		cfg, err := os.OpenFile(os.Getenv("CODEX_HOME")+"/config.toml", os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return 6, true
		}
		_, _ = cfg.WriteString("\n[projects.\"/w\"]\ntrust_level = \"trusted\"\n")
		_ = cfg.Close()
	}
	if f.scenario == "ignore-eof" {
		exe, _ := os.Executable()
		child := exec.Command(exe)
		child.Env = append(os.Environ(), fakeEnv+"=sleeper")
		child.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // like an MCP server
		if err := child.Start(); err != nil {
			return 5, true
		}
		_ = os.WriteFile(os.Getenv(fakeLogEnv)+".pids", []byte(strconv.Itoa(os.Getpid())+" "+strconv.Itoa(child.Process.Pid)), 0o644)
	}
	sources := []string{"AGENTS.md", "missing.md", "adir", "fifo"}
	if js := os.Getenv(fakeSourcesEnv); js != "" {
		if err := json.Unmarshal([]byte(js), &sources); err != nil {
			return 7, true
		}
	}
	thread := map[string]any{"id": "thread-1", "cliVersion": "0.0.0-fake", "ephemeral": true, "turns": []any{}}
	f.notify("mcpServer/startupStatus/updated", map[string]any{"threadId": "thread-1", "name": "alpha", "status": "starting"})
	f.result(m.ID, map[string]any{
		"thread":             thread,
		"model":              "fake-model",
		"modelProvider":      "openai",
		"reasoningEffort":    nil,
		"cwd":                "/fake/cwd",
		"approvalPolicy":     "never",
		"sandbox":            map[string]any{"type": "readOnly", "networkAccess": false},
		"instructionSources": sources,
		"somethingNew":       map[string]any{"x": 1},
	})
	f.notify("thread/started", map[string]any{"thread": thread})
	return 0, false
}

func fakeServer(name, status string, tools map[string]any) map[string]any {
	return map[string]any{
		"name": name, "runtimeStatus": status, "authStatus": "unsupported",
		"pluginId": nil, "httpOrigin": nil, "tools": tools, "toolsError": nil,
		"serverInfo": map[string]any{"name": name, "version": secret + "serverinfo-is-not-read"},
	}
}

func fakeTools(names ...string) map[string]any {
	out := map[string]any{}
	for _, n := range names {
		out[n] = map[string]any{
			"name":        n,
			"description": secret + "description of " + n,
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "integer", "maximum": uint64(1 << 63)}}},
		}
	}
	return out
}

func (f *fake) page(m fakeMsg, next any, servers ...map[string]any) {
	f.result(m.ID, map[string]any{"data": servers, "nextCursor": next})
}

func (f *fake) mcpList(m fakeMsg) (int, bool) {
	f.lists++
	var params struct {
		Cursor *string `json:"cursor"`
	}
	_ = json.Unmarshal(m.Params, &params)
	cursor := ""
	if params.Cursor != nil {
		cursor = *params.Cursor
	}
	alpha := fakeServer("alpha", "connected", fakeTools("echo", "add"))
	switch f.scenario {
	case "paginate":
		switch cursor {
		case "":
			f.page(m, "c1", alpha)
		case "c1":
			f.page(m, "c2", fakeServer("beta", "connected", fakeTools("b1")))
		case "c2":
			f.page(m, nil, fakeServer("gamma", "connected", fakeTools()))
		default:
			f.raw(`{"id":` + string(m.ID) + `,"error":{"code":-32600,"message":"bad cursor"}}`)
		}
	case "repeat-cursor":
		f.page(m, "c1", fakeServer("s"+strconv.Itoa(f.lists), "connected", fakeTools()))
	case "empty-cursor":
		f.page(m, "", alpha)
	case "number-cursor":
		f.page(m, 7, alpha)
	case "dup-server":
		f.page(m, cursorFor(cursor), alpha)
	case "empty-name":
		f.page(m, nil, fakeServer("", "connected", fakeTools()))
	case "starting":
		if f.lists == 1 {
			f.page(m, nil, fakeServer("alpha", "starting", fakeTools("echo")))
			f.notify("mcpServer/startupStatus/updated", map[string]any{"threadId": "thread-1", "name": "alpha", "status": "ready"})
		} else {
			f.page(m, nil, fakeServer("alpha", "connected", fakeTools("echo")))
		}
	default:
		var many []string
		for i := range 70 {
			many = append(many, fmt.Sprintf("tool%02d", i))
		}
		broken := fakeServer("broken", "failed", map[string]any{})
		broken["toolsError"] = "MCP startup failed: No such file or directory (os error 2)"
		odd := fakeServer("we:ird%", "connected", fakeTools("a:b"))
		f.page(m, nil, alpha, broken, fakeServer("many", "connected", fakeTools(many...)), odd)
	}
	return 0, false
}

func cursorFor(cursor string) any {
	if cursor == "" {
		return "c1"
	}
	return nil
}
