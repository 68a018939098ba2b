package codex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/source/codex/appserver"
)

// clientInfo identifies the probe to Codex; Codex forwards the name as the
// thread's originator.
var clientInfo = map[string]string{"name": "runtimetruth", "title": "RuntimeTruth", "version": "0.1.0"}

const (
	// mcpPageSize is RuntimeTruth's mcpServerStatus/list page size.
	mcpPageSize = 100
	// settleWait bounds the wait for MCP servers that mcpServerStatus/list
	// still reports as "starting" to send a terminal startup status.
	settleWait = 3 * time.Second
	// maxStartupNotes bounds the startup statuses remembered.
	maxStartupNotes = 4096
)

// appServerArgs is the app-server command line. Plugin sync (a `git
// ls-remote` of the plugin marketplace plus DNS lookups) and the shell
// snapshot (which runs the user's login shell, `bash -lc`, sourcing their
// profile) are disabled after the user's overrides so that no override can
// turn them back on. Disabling plugins also hides plugin-provided MCP
// servers.
func appServerArgs(overrides []string) []string {
	args := []string{"app-server"}
	for _, o := range overrides {
		args = append(args, "-c", o)
	}
	return append(args, "--disable", "plugins", "--disable", "shell_snapshot")
}

type probe struct {
	dir     string
	opts    Options
	timeout time.Duration
	client  *appserver.Client
	thread  string
	startup map[[2]string]string // {threadId, server} → latest startup status
}

// run talks to one app-server and returns the records after codex.runtime.
func (p *probe) run(ctx context.Context, path string, env []string) (recs []snapshot.Record, waited time.Duration, err error) {
	c, err := appserver.Start(appserver.Config{
		Path:           path,
		Args:           appServerArgs(p.opts.ConfigOverrides),
		Dir:            p.dir,
		Env:            env,
		Credential:     p.opts.RunAs.credential(),
		OnNotification: p.note,
	})
	if err != nil {
		return nil, 0, fmt.Errorf("start codex app-server: %w", err)
	}
	p.client = c
	var guard configGuard
	defer func() {
		if serr := c.Shutdown(ctx); serr != nil {
			err = errors.Join(err, serr)
		}
		waited = c.Waited()
		err = errors.Join(err, guard.check())
		if err != nil {
			recs = nil
		}
	}()

	res, err := p.call(ctx, "initialize", map[string]any{
		"clientInfo": clientInfo,
		"capabilities": map[string]any{
			"experimentalApi":           true,
			"optOutNotificationMethods": []string{"remoteControl/status/changed"},
		},
	})
	if err != nil {
		return nil, 0, err
	}
	guard.watch(res)
	if err := c.Notify(ctx, "initialized", nil); err != nil {
		return nil, 0, p.stepErr("initialized", err)
	}
	res, err = p.call(ctx, "config/read", map[string]any{"includeLayers": false, "cwd": p.dir})
	if err != nil {
		return nil, 0, err
	}
	cfg, err := configRecord(p.dir, res)
	if err != nil {
		return nil, 0, err
	}
	recs = append(recs, cfg)
	if !p.opts.ResolveThread && !p.opts.ResolveMCP {
		return recs, 0, nil
	}

	// Never pass cwd: with it, thread/start marks the project trusted in
	// the user's config.toml. The process runs in p.dir instead.
	res, err = p.call(ctx, "thread/start", map[string]any{"ephemeral": true})
	if err != nil {
		return nil, 0, err
	}
	thr, th, err := threadRecord(res)
	if err != nil {
		return nil, 0, err
	}
	p.thread = th.id
	instr, err := instructionsRecord(ctx, p.dir, th.sources, p.opts.RunAs)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, 0, fmt.Errorf("%w: hashing Codex instruction sources did not finish within %s", ErrTimeout, p.timeout)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("hash Codex instruction sources: %w", err)
	}
	recs = append(recs, thr, instr)
	if !p.opts.ResolveMCP {
		return recs, 0, nil
	}

	mcp, err := p.listMCP(ctx)
	if err != nil {
		return nil, 0, err
	}
	return append(recs, mcp...), 0, nil
}

func (p *probe) call(ctx context.Context, method string, params any) (jsontree.Value, error) {
	res, err := p.client.Call(ctx, method, params)
	if err != nil {
		return res, p.stepErr(method, err)
	}
	return res, nil
}

// stepErr names the step an error happened in.
func (p *probe) stepErr(step string, err error) error {
	var exit *appserver.ExitError
	var rpc *appserver.RPCError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: codex app-server did not answer %s within %s", ErrTimeout, step, p.timeout)
	case errors.As(err, &exit):
		reason := exit.Reason
		if reason == "" {
			reason = "nothing on stderr"
		}
		return fmt.Errorf("%w before answering %s: %s", appserver.ErrExited, step, reason)
	case errors.As(err, &rpc):
		return fmt.Errorf("codex app-server %s failed: %w", step, err)
	}
	return fmt.Errorf("codex app-server %s: %w", step, err)
}

// note records MCP startup statuses.
func (p *probe) note(method string, params jsontree.Value) {
	if method != "mcpServer/startupStatus/updated" {
		return
	}
	tid, _ := params.Get("threadId")
	name, _ := params.Get("name")
	status, _ := params.Get("status")
	if tid.Kind != jsontree.String || name.Kind != jsontree.String || status.Kind != jsontree.String {
		return
	}
	if p.startup == nil {
		p.startup = map[[2]string]string{}
	}
	key := [2]string{tid.Text, name.Text}
	if _, ok := p.startup[key]; ok || len(p.startup) < maxStartupNotes {
		p.startup[key] = status.Text
	}
}

func (p *probe) settled(names []string) bool {
	for _, n := range names {
		switch p.startup[[2]string{p.thread, n}] {
		case "ready", "failed", "cancelled":
		default:
			return false
		}
	}
	return true
}

// listMCP lists every MCP server of the thread. mcpServerStatus/list waits
// for MCP startup, but can still report a server as "starting" while its
// terminal status is in flight; then it waits (bounded by settleWait) for
// that status and lists once more, so runtime_status does not flap.
func (p *probe) listMCP(ctx context.Context) ([]snapshot.Record, error) {
	r, starting, err := p.listAll(ctx)
	if err != nil {
		return nil, err
	}
	if len(starting) > 0 {
		wctx, cancel := context.WithTimeout(ctx, settleWait)
		err := p.client.Wait(wctx, func() bool { return p.settled(starting) })
		cancel()
		if err != nil && (ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
			return nil, p.stepErr("mcpServer/startupStatus/updated", err)
		}
		if r, _, err = p.listAll(ctx); err != nil {
			return nil, err
		}
	}
	return r.records(p.opts.SeedOnly), nil
}

type listParams struct {
	Limit    int    `json:"limit"`
	Detail   string `json:"detail"`
	ThreadID string `json:"threadId"`
	Cursor   string `json:"cursor,omitempty"`
}

func (p *probe) listAll(ctx context.Context) (*mcpRecords, []string, error) {
	r := newMCPRecords()
	cursors := map[string]bool{}
	var starting []string
	params := listParams{Limit: mcpPageSize, Detail: "toolsAndAuthOnly", ThreadID: p.thread}
	for {
		res, err := p.call(ctx, "mcpServerStatus/list", params)
		if err != nil {
			return nil, nil, err
		}
		next, err := r.page(res)
		if err != nil {
			return nil, nil, err
		}
		data, _ := res.Get("data")
		for _, s := range data.Items {
			if st, _ := s.Get("runtimeStatus"); st.Kind == jsontree.String && st.Text == "starting" {
				name, _ := s.Get("name")
				starting = append(starting, name.Text)
			}
		}
		if next == "" {
			return r, starting, nil
		}
		if cursors[next] {
			return nil, nil, responseErr("mcpServerStatus/list repeated a pagination cursor")
		}
		cursors[next] = true
		params.Cursor = next
	}
}

// configGuard notices if the user's config.toml changes while the probe
// runs. The probe is built never to write it (thread/start without cwd);
// this is the belt to those braces, as the protocol study recommends.
type configGuard struct {
	path, before string
}

// watch fingerprints <codexHome>/config.toml, codexHome coming from the
// initialize result.
func (g *configGuard) watch(initResult jsontree.Value) {
	home, _ := initResult.Get("codexHome")
	if home.Kind != jsontree.String || !filepath.IsAbs(home.Text) {
		return
	}
	g.path = filepath.Join(home.Text, "config.toml")
	g.before = fingerprint(g.path)
}

func (g *configGuard) check() error {
	if g.path == "" || fingerprint(g.path) == g.before {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrSideEffect, g.path)
}

// fingerprint is the file's SHA-256 and mode, or why it has none.
func fingerprint(path string) string {
	sum, err := hashFile(context.Background(), path, nil)
	if err != nil {
		return "error: " + err.Error()
	}
	st, err := os.Stat(path)
	if err != nil {
		return "error: " + err.Error()
	}
	return sum + " " + st.Mode().String()
}
