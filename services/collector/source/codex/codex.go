package codex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// DefaultTimeout is the overall deadline of one collection when
// Options.Timeout is zero. The real CLI answers the whole --resolve-mcp
// probe in 0.3–0.7 s on an idle machine; 15 s leaves room for a loaded
// 2-core CI runner and for MCP servers that are slow to start, while still
// failing well before Codex's own 30 s MCP startup timeout.
const DefaultTimeout = 15 * time.Second

// TargetKind is the kind of the snapshot target Collect describes.
const TargetKind = "codex.workspace"

// Options configure one collection.
type Options struct {
	// Binary is the codex executable (--codex-binary). Empty means
	// LookPath("codex"). An npm JS shim (…/@openai/codex/bin/codex.js) is
	// recorded as configured but run as the native binary it would start.
	Binary string
	// ResolveThread starts an ephemeral thread (no turn, nothing sent to a
	// model) to record the effective thread settings and instruction files.
	ResolveThread bool
	// ResolveMCP also lists MCP servers and their tools; implies
	// ResolveThread. It starts the configured MCP servers but calls no tool.
	ResolveMCP bool
	// Timeout is the one deadline for everything, from `codex --version`
	// to the app-server's graceful exit (killing what is left after it
	// may add up to 2 s); zero means DefaultTimeout.
	Timeout time.Duration
	// Env is added to the environment Codex runs with (later entries win),
	// for example CODEX_HOME.
	Env []string
	// ConfigOverrides are passed to the app-server as `-c key=value`
	// (the value is TOML, as on the codex command line).
	ConfigOverrides []string
	// SeedOnly omits the extension kinds (codex.mcp_tools) so the records
	// are exactly those RuntimeTruth emits.
	SeedOnly bool
	// RunAs, when set, is the account Codex runs as, and with it every MCP
	// server it starts: `codex --version` and the app-server get its user,
	// group and supplementary groups (which needs root, or CAP_SETUID and
	// CAP_SETGID), and a fresh environment instead of this process's:
	// PATH, TZ, LANG, LANGUAGE and LC_* from it, HOME, USER and LOGNAME
	// of the account, then Env. Codex then reads its configuration from
	// the account's CODEX_HOME (Env may set one; else ~/.codex). Nil runs
	// Codex as this process, with its environment plus Env.
	RunAs *Account
}

// Account is a user the Codex probe runs as (Options.RunAs).
type Account struct {
	UID, GID uint32
	// Groups are the supplementary groups; none when empty.
	Groups []uint32
	// Name is USER and LOGNAME; Home is HOME.
	Name, Home string
}

func (a *Account) credential() *syscall.Credential {
	if a == nil {
		return nil
	}
	return &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: append([]uint32{}, a.Groups...)}
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return DefaultTimeout
}

// Collect observes the Codex runtime for the workspace cwd and returns the
// target (codex.workspace, the resolved cwd) and the records in
// RuntimeTruth's order: codex.runtime, codex.config, then with
// ResolveThread codex.thread and codex.instructions, then with ResolveMCP
// codex.mcp and (unless SeedOnly) codex.mcp_tools.
//
// Codex is run as `codex app-server` in cwd with plugin sync and the
// login-shell snapshot disabled. Nothing is written to the user's Codex
// configuration: thread/start never gets a cwd (which would mark the
// project trusted in config.toml) and the thread is ephemeral.
func Collect(ctx context.Context, cwd string, o Options) (snapshot.Target, []snapshot.Record, error) {
	t, recs, _, err := collect(ctx, cwd, o)
	return t, recs, err
}

// stats splits a collection's wall time for the benchmark.
type stats struct {
	wall  time.Duration
	codex time.Duration // blocked on Codex: --version, app-server output, exit
}

func collect(ctx context.Context, cwd string, o Options) (snapshot.Target, []snapshot.Record, stats, error) {
	start := time.Now()
	var st stats
	timeout := o.timeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	dir, err := resolveDir(cwd)
	if err != nil {
		return snapshot.Target{}, nil, st, err
	}
	bin, err := resolveBinary(o.Binary)
	if err != nil {
		return snapshot.Target{}, nil, st, err
	}
	env := environ(bin, o)
	vstart := time.Now()
	version, err := runVersion(ctx, bin.exec, env, o.RunAs.credential(), timeout)
	st.codex += time.Since(vstart)
	if err != nil {
		return snapshot.Target{}, nil, st, err
	}
	runtimeRec := snapshot.Record{
		Plane:  snapshot.Live,
		Kind:   "codex.runtime",
		Source: sourceVersion,
		Data:   snapshot.Data{"binary": snapshot.String(bin.recorded), "version": snapshot.String(version)},
	}
	p := probe{dir: dir, opts: o, timeout: timeout}
	recs, waited, err := p.run(ctx, bin.exec, env)
	st.codex += waited
	st.wall = time.Since(start)
	if err != nil {
		return snapshot.Target{}, nil, st, err
	}
	return snapshot.Target{Kind: TargetKind, Identifier: dir}, append([]snapshot.Record{runtimeRec}, recs...), st, nil
}

// resolveDir returns cwd made absolute with symlinks resolved (Python's
// Path.resolve), which must be a directory.
func resolveDir(cwd string) (string, error) {
	p := expandHome(cwd)
	st, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("codex working directory does not exist: %q", cwd)
	}
	if err != nil {
		return "", fmt.Errorf("codex working directory: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("codex working directory is not a directory: %q", cwd)
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("codex working directory: %w", err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("codex working directory: %w", err)
	}
	return resolved, nil
}

// binary is a resolved codex executable.
type binary struct {
	recorded string   // the configured executable, resolved: codex.runtime.binary
	exec     string   // what is run: the native binary behind an npm shim
	env      []string // what the npm shim would add to the environment
}

func resolveBinary(name string) (binary, error) {
	path := name
	if path == "" {
		p, err := exec.LookPath("codex")
		if err != nil {
			return binary{}, fmt.Errorf("%w on PATH: install @openai/codex (scripts/install-codex.sh) or pass --codex-binary", ErrNotFound)
		}
		path = p
	}
	abs, err := filepath.Abs(expandHome(path))
	if err != nil {
		return binary{}, fmt.Errorf("%w: %q: %w", ErrNotFound, name, err)
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return binary{}, fmt.Errorf("%w: %q does not exist", ErrNotFound, path)
	}
	if st, err := os.Stat(resolved); err != nil || !st.Mode().IsRegular() {
		return binary{}, fmt.Errorf("%w: %q is not a file", ErrNotFound, path)
	}
	b := binary{recorded: resolved, exec: resolved}
	if native, root, ok := npmNative(resolved); ok {
		b.exec = native
		b.env = []string{"CODEX_MANAGED_PACKAGE_ROOT=" + root, "CODEX_MANAGED_BY_NPM=1"}
	}
	return b, nil
}

// npmTargets maps GOOS/GOARCH to the npm platform package and Rust target
// triple the @openai/codex shim uses.
var npmTargets = map[string][2]string{
	"linux/amd64":  {"codex-linux-x64", "x86_64-unknown-linux-musl"},
	"linux/arm64":  {"codex-linux-arm64", "aarch64-unknown-linux-musl"},
	"darwin/amd64": {"codex-darwin-x64", "x86_64-apple-darwin"},
	"darwin/arm64": {"codex-darwin-arm64", "aarch64-apple-darwin"},
}

// npmNative finds the native binary behind the npm shim
// <root>/bin/codex.js the way the shim does: the platform package nested
// under the package (global install), hoisted beside it (local install),
// then the package's own vendor directory.
func npmNative(shim string) (native, root string, ok bool) {
	if filepath.Base(shim) != "codex.js" || filepath.Base(filepath.Dir(shim)) != "bin" {
		return "", "", false
	}
	t, known := npmTargets[runtime.GOOS+"/"+runtime.GOARCH]
	if !known {
		return "", "", false
	}
	root = filepath.Dir(filepath.Dir(shim))
	rel := filepath.Join("vendor", t[1], "bin", "codex")
	for _, c := range []string{
		filepath.Join(root, "node_modules", "@openai", t[0], rel),
		filepath.Join(filepath.Dir(root), t[0], rel),
		filepath.Join(root, rel),
	} {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c, root, true
		}
	}
	return "", "", false
}

// environ is the process environment, minus the npm shim's markers when it
// is bypassed, plus the shim's variables and o.Env (later entries win).
// For an o.RunAs account it is a fresh one instead (Options.RunAs): no
// variable of this process's (a credential, its HOME or CODEX_HOME) is
// handed to the account's processes but the locale, time zone and PATH.
func environ(b binary, o Options) []string {
	env := os.Environ()
	if a := o.RunAs; a != nil {
		env = slices.DeleteFunc(env, func(kv string) bool {
			k, _, _ := strings.Cut(kv, "=")
			return k != "PATH" && k != "TZ" && k != "LANG" && k != "LANGUAGE" && !strings.HasPrefix(k, "LC_")
		})
		env = append(env, "HOME="+a.Home, "USER="+a.Name, "LOGNAME="+a.Name)
	}
	if len(b.env) > 0 {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "CODEX_MANAGED_BY_") })
	}
	return append(append(env, b.env...), o.Env...)
}

// maxVersionOutput bounds what `codex --version` may print.
const maxVersionOutput = 64 << 10

func runVersion(ctx context.Context, path string, env []string, cred *syscall.Credential, timeout time.Duration) (string, error) {
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = env
	var out, errOut boundedBuffer
	out.max, errOut.max = maxVersionOutput, maxVersionOutput
	cmd.Stdout, cmd.Stderr = &out, &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", fmt.Errorf("%w: codex --version did not finish within %s", ErrTimeout, timeout)
		}
		return "", fmt.Errorf("codex --version: %w", ctx.Err())
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return "", fmt.Errorf("codex --version failed with exit status %d", exitErr.ExitCode())
	}
	if err != nil && cred != nil && errors.Is(err, syscall.EPERM) {
		return "", fmt.Errorf("run codex --version as uid %d: %w (switching user needs root, or CAP_SETUID and CAP_SETGID)", cred.Uid, err)
	}
	if err != nil {
		return "", fmt.Errorf("run codex --version: %w", err)
	}
	v := strings.ToValidUTF8(strings.TrimSpace(out.String()), "\uFFFD")
	if v == "" {
		return "", errors.New("codex --version returned an empty version")
	}
	return v, nil
}

// boundedBuffer keeps the first max bytes written and discards the rest.
type boundedBuffer struct {
	bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
