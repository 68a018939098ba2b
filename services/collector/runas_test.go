package collector_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/services/collector"
)

// nobody is the account the run-as tests run Codex as (Debian's nobody).
const nobody = 65534

// openDir is a new directory every user can reach and write (t.TempDir's
// own parent is 0700), removed when the test ends.
func openDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "rt-runas-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o1777))
	return d
}

// fakeCodexScript writes a fake codex that appends who it runs as (uid,
// gid, groups, HOME, CODEX_HOME and $RT_TEST_SECRET) to log, answers
// --version, and plays an app-server for initialize and config/read.
func fakeCodexScript(t *testing.T, dir, name, log string) string {
	t.Helper()
	script := `#!/bin/sh
echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) home=$HOME codex_home=${CODEX_HOME:-} secret=${RT_TEST_SECRET:-}" >> '` + log + `'
if [ "$1" = "--version" ]; then echo "codex-cli 0.0.0-fake"; exit 0; fi
while IFS= read -r line; do
	id=$(printf '%s\n' "$line" | sed -n 's/^{"id":\([0-9][0-9]*\),.*/\1/p')
	case "$line" in
	*'"method":"initialize"'*) printf '{"id":%s,"result":{"userAgent":"fake"}}\n' "$id" ;;
	*'"method":"config/read"'*) printf '{"id":%s,"result":{"config":{"model":"fake-model"}}}\n' "$id" ;;
	esac
done
`
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

// workspace makes a Codex workspace owned by uid.
func workspace(t *testing.T, dir, name string, uid int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.Mkdir(p, 0o755))
	require.NoError(t, os.Chown(p, uid, uid))
	return p
}

func codexTarget(name, cwd, binary string, o collector.TargetOptions) collector.TargetConfig {
	o.CodexBinary = binary
	return collector.TargetConfig{Name: name, Kind: collector.KindCodex, Cwd: cwd, Interval: time.Hour, Options: o}
}

// ran returns the lines the fake logged: one per start of it.
func ran(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// The collector runs the Codex probe, which starts the agent and its MCP
// servers, as the workspace's owner, or as options.run_as, and never as
// root: a root-owned workspace without run_as is refused before the fake
// codex ever runs. The probe's environment is the account's (HOME), not
// the collector's (a secret in it does not reach Codex).
func TestCodexProbeNeverRunsAsRoot(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "the run-as tests switch users: run them as root")
	t.Setenv("RT_TEST_SECRET", "collector-secret")
	dir := openDir(t)
	logs := map[string]string{}
	target := func(name string, uid int, o collector.TargetOptions) collector.TargetConfig {
		logs[name] = filepath.Join(dir, name+".log")
		return codexTarget(name, workspace(t, dir, name, uid), fakeCodexScript(t, dir, name+"-codex", logs[name]), o)
	}
	b := runBus(t, t.TempDir(), 0)
	cfg := testConfig(t, b.url,
		target("owned-by-nobody", nobody, collector.TargetOptions{}),
		target("owned-by-root", 0, collector.TargetOptions{}),
		target("root-run-as-nobody", 0, collector.TargetOptions{RunAs: "nobody", CodexHome: "/srv/codex-home"}),
		target("root-run-as-uid", 0, collector.TargetOptions{RunAs: "65534"}),
		target("run-as-unknown", nobody, collector.TargetOptions{RunAs: "no-such-user-rt"}),
	)
	c, _ := newCollector(t, cfg, collector.Settings{})
	require.NoError(t, c.Start(t.Context()))
	msgs := b.waitStored(t, 5)

	failed := map[string]events.CollectionFailed{}
	collected := map[string]bool{}
	for _, m := range msgs {
		if m.Subject() == events.CollectFailedSubject(testHost) {
			_, p, err := binding.Read[events.CollectionFailed](m)
			require.NoError(t, err)
			failed[p.Target.Identifier] = p
			continue
		}
		collected[evidence(t, m).Target.Identifier] = true
	}
	ws := func(name string) string { return filepath.Join(dir, name) }

	for _, name := range []string{"owned-by-nobody", "root-run-as-nobody", "root-run-as-uid"} {
		assert.True(t, collected[ws(name)], "%s: %v", name, failed[ws(name)])
		lines := ran(t, logs[name])
		require.Len(t, lines, 2, "%s: codex --version and the app-server", name)
		for _, l := range lines {
			assert.True(t, strings.HasPrefix(l, "uid=65534 gid=65534 groups=65534 home=/nonexistent "), "%s: %s", name, l)
			assert.True(t, strings.HasSuffix(l, " secret="), "%s: the collector's environment reached Codex: %s", name, l)
		}
	}
	assert.Contains(t, ran(t, logs["root-run-as-nobody"])[0], "codex_home=/srv/codex-home ")

	p, ok := failed[ws("owned-by-root")]
	require.True(t, ok, "a root-owned workspace without run_as is refused")
	assert.Equal(t, "permission", p.Reason)
	assert.False(t, p.Retryable)
	assert.Contains(t, p.Message, "the Codex probe never runs as root")
	assert.Contains(t, p.Message, "options.run_as")
	assert.Empty(t, ran(t, logs["owned-by-root"]), "the fake codex never ran")

	p, ok = failed[ws("run-as-unknown")]
	require.True(t, ok)
	assert.Equal(t, "not_found", p.Reason)
	assert.Contains(t, p.Message, `options.run_as "no-such-user-rt"`)
	assert.Empty(t, ran(t, logs["run-as-unknown"]))
}

func TestRunAsConfig(t *testing.T) {
	base := func(o collector.TargetOptions) collector.Config {
		cfg := collector.NewDefaultConfig()
		cfg.Host = testHost
		cfg.Targets = []collector.TargetConfig{{Name: "agent", Kind: collector.KindCodex, Cwd: "/srv/agent", Options: o}}
		return cfg
	}
	for _, ok := range []collector.TargetOptions{{RunAs: "nobody"}, {RunAs: "1000"}, {CodexHome: "/srv/codex"}} {
		cfg := base(ok)
		assert.NoError(t, cfg.Validate(), "%+v", ok)
	}
	for o, want := range map[collector.TargetOptions]string{
		{RunAs: "root"}:          `options.run_as "root" is root`,
		{RunAs: "0"}:             `options.run_as "0" is root`,
		{RunAs: "00"}:            `options.run_as "00" is root`,
		{RunAs: "a\nb"}:          "options.run_as holds a control character",
		{CodexHome: "rel/codex"}: `options.codex_home "rel/codex" is not an absolute path`,
	} {
		cfg := base(o)
		err := cfg.Validate()
		require.ErrorIs(t, err, config.ErrInvalid, "%+v", o)
		assert.Contains(t, err.Error(), want)
	}
	git := collector.NewDefaultConfig()
	git.Host = testHost
	git.Targets = []collector.TargetConfig{{Name: "repo", Kind: collector.KindGit, Path: "/srv/app", Options: collector.TargetOptions{RunAs: "nobody"}}}
	assert.ErrorContains(t, git.Validate(), "options.run_as does not apply to a git target")
}

// run_as may be written as a number in YAML (as the chart renders an
// integer value) or a name.
func TestRunAsLoads(t *testing.T) {
	cfg, err := load(t, `
host: web-01
targets:
  - {name: a, kind: codex, cwd: /srv/a, options: {run_as: 1000, codex_home: /srv/a-home}}
  - {name: b, kind: codex, cwd: /srv/b, options: {run_as: agent}}
`)
	require.NoError(t, err)
	assert.Equal(t, "1000", cfg.Targets[0].Options.RunAs)
	assert.Equal(t, "/srv/a-home", cfg.Targets[0].Options.CodexHome)
	assert.Equal(t, "agent", cfg.Targets[1].Options.RunAs)
	_, err = load(t, "host: h\ntargets:\n  - {name: a, kind: codex, cwd: /srv/a, options: {run_as: 0}}\n")
	require.ErrorIs(t, err, config.ErrInvalid)
}
