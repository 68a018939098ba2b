package collector_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/services/collector"
)

const envPrefix = "RUNTIMETRUTH_COLLECTOR"

func load(t *testing.T, yaml string) (collector.Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "collector.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	cfg := collector.NewDefaultConfig()
	err := config.Load(path, envPrefix, &cfg, nil)
	return cfg, err
}

// loadFailure is YAML that loading refuses with an error containing want.
type loadFailure struct{ name, yaml, want string }

// assertLoadFails loads each case in a subtest: it must fail, with an
// error wrapping is unless is is nil.
func assertLoadFails(t *testing.T, is error, cases []loadFailure) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(t, tc.yaml)
			if is == nil {
				require.Error(t, err)
			} else {
				require.ErrorIs(t, err, is)
			}
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestConfigLoadsEveryKey(t *testing.T) {
	cfg, err := load(t, `
host: web-01.example.com
state_dir: /tmp/rt-state
shutdown_timeout: 45s
nats:
  url: nats://nats.example:4222
  user: collector
  password: pw
  name: c1
  tls:
    ca_file: /etc/ca.pem
    cert_file: /etc/c.pem
    key_file: /etc/k.pem
spool:
  dir: /tmp/rt-spool
  max_bytes: 4194304
  max_events: 50
targets:
  - name: repo
    kind: git
    path: /srv/app
    interval: 30s
    baseline: app-prod
    options: {seed_only: true}
  - {name: p, kind: process, pid: 1}
  - {name: u, kind: systemd, unit: ssh.service}
  - {name: cx, kind: codex, cwd: /srv/app, options: {resolve_mcp: true, codex_binary: /usr/bin/codex}}
  - {name: py, kind: python, env: /srv/venv, options: {runnable: app}}
  - {name: js, kind: node, dir: /srv/web, options: {all: true}}
`)
	require.NoError(t, err)
	assert.Equal(t, "web-01.example.com", cfg.Host)
	assert.Equal(t, 45*time.Second, cfg.ShutdownTimeout)
	assert.Equal(t, "pw", cfg.NATS.Password)
	assert.Equal(t, "/etc/k.pem", cfg.NATS.TLS.KeyFile)
	assert.Equal(t, "/tmp/rt-spool", cfg.SpoolDir())
	assert.Equal(t, 50, cfg.Spool.MaxEvents)
	require.Len(t, cfg.Targets, 6)
	assert.Equal(t, 30*time.Second, cfg.Targets[0].Interval)
	assert.True(t, cfg.Targets[0].Options.SeedOnly)
	assert.Equal(t, "app-prod", cfg.Targets[0].Baseline)
	assert.Equal(t, 1, cfg.Targets[1].PID)
	assert.Equal(t, "/usr/bin/codex", cfg.Targets[3].Options.CodexBinary)
	assert.Equal(t, "app", cfg.Targets[4].Options.Runnable)
	assert.True(t, cfg.Targets[5].Options.All)
}

func TestConfigDefaults(t *testing.T) {
	cfg := collector.NewDefaultConfig()
	host, _ := os.Hostname()
	assert.Equal(t, host, cfg.Host)
	assert.Equal(t, "nats://127.0.0.1:4222", cfg.NATS.URL)
	assert.Equal(t, filepath.Join(collector.DefaultStateDir, "spool"), cfg.SpoolDir())
	require.NoError(t, cfg.Validate())
}

func TestConfigRejectsUnknownKeys(t *testing.T) {
	assertLoadFails(t, nil, []loadFailure{
		{"top level", "hots: x\n", "hots"},
		{"nats", "nats:\n  ulr: nats://x\n", "ulr"},
		{"spool", "spool:\n  max_event: 3\n", "max_event"},
		{"target", "targets:\n  - {name: a, kind: git, pth: /x}\n", "pth"},
		{"target option", "targets:\n  - {name: a, kind: git, path: /x, options: {seedonly: true}}\n", "seedonly"},
	})
}

func TestConfigEnvironmentOverrides(t *testing.T) {
	t.Setenv(envPrefix+"_NATS_URL", "nats://from-env:4222")
	t.Setenv(envPrefix+"_SPOOL_MAX_EVENTS", "7")
	t.Setenv(envPrefix+"_HOST", "env-host")
	t.Setenv(envPrefix+"_SHUTDOWN_TIMEOUT", "5s")
	cfg, err := load(t, "host: file-host\nnats:\n  url: nats://from-file:4222\n")
	require.NoError(t, err)
	assert.Equal(t, "nats://from-env:4222", cfg.NATS.URL)
	assert.Equal(t, 7, cfg.Spool.MaxEvents)
	assert.Equal(t, "env-host", cfg.Host)
	assert.Equal(t, 5*time.Second, cfg.ShutdownTimeout)
}

func TestConfigValidation(t *testing.T) {
	assertLoadFails(t, config.ErrInvalid, []loadFailure{
		{"unknown kind", "targets: [{name: a, kind: docker, path: /x}]", "kind \"docker\""},
		{"missing location", "targets: [{name: a, kind: git}]", "needs path"},
		{"foreign location", "targets: [{name: a, kind: git, path: /x, unit: a.service}]", "unit does not apply"},
		{"foreign option", "targets: [{name: a, kind: git, path: /x, options: {resolve_mcp: true}}]", "options.resolve_mcp does not apply"},
		{"duplicate name", "targets: [{name: a, kind: git, path: /x}, {name: a, kind: git, path: /y}]", "used twice"},
		{"no name", "targets: [{kind: git, path: /x}]", "name is empty"},
		{"both scopes", "targets: [{name: a, kind: node, dir: /d, options: {runnable: x, all: true}}]", "exclude each other"},
		{"short interval", "targets: [{name: a, kind: git, path: /x, interval: 10ms}]", "interval"},
		{"bad unit", "targets: [{name: a, kind: systemd, unit: '-x'}]", "invalid unit"},
		{"negative pid", "targets: [{name: a, kind: process, pid: -3}]", "not a process id"},
		{"small spool", "spool: {max_bytes: 1000}", "spool.max_bytes"},
		{"no events", "spool: {max_events: -1}", "spool.max_events"},
		{"empty host", "host: ' '", "host is empty"},
		{"nats auth", "nats: {user: u, creds_file: /c}", "only one"},
	})
}

func TestNewValidates(t *testing.T) {
	cfg := collector.NewDefaultConfig()
	cfg.Targets = []collector.TargetConfig{{Name: "a", Kind: "git"}}
	_, err := collector.New(cfg, collector.Settings{})
	require.ErrorIs(t, err, config.ErrInvalid)
}
