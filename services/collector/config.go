package collector

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/services/collector/source/systemd"
	"github.com/runtimetruth/runtimetruth/services/collector/spool"
)

// Target kinds a TargetConfig may name.
const (
	KindGit     = "git"
	KindProcess = "process"
	KindSystemd = "systemd"
	KindCodex   = "codex"
	KindPython  = "python"
	KindNode    = "node"
)

// Defaults.
const (
	DefaultStateDir        = "/var/lib/runtimetruth/collector"
	DefaultInterval        = 60 * time.Second
	MinInterval            = time.Second
	DefaultShutdownTimeout = 30 * time.Second
	// MinSpoolBytes is the smallest spool.max_bytes: room for two events
	// of the largest size.
	MinSpoolBytes = 2 * events.MaxEventSize
)

// Config is the collector's configuration (RUNTIMETRUTH_COLLECTOR_* in
// the environment). Decoding is strict: an unknown key is an error.
type Config struct {
	// Host names this machine in events and subjects; default
	// os.Hostname().
	Host string `mapstructure:"host"`
	// StateDir holds the spool (unless Spool.Dir says otherwise) and the
	// integrity state of python and node targets.
	StateDir string `mapstructure:"state_dir"`
	// KeyFile is the Ed25519 key (PEM PKCS #8) the collector signs its
	// events with; empty: <state_dir>/identity/ed25519.key, generated on
	// first start (LoadIdentity).
	KeyFile string `mapstructure:"key_file"`
	// ShutdownTimeout bounds a graceful shutdown: in-flight collections,
	// then delivering the spool.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// NATS is the connection (ignored when Settings.Conn is given).
	NATS natsbus.Config `mapstructure:"nats"`
	// Spool bounds the on-disk queue of undelivered events.
	Spool SpoolConfig `mapstructure:"spool"`
	// Targets are what to collect.
	Targets []TargetConfig `mapstructure:"targets"`
}

// SpoolConfig configures the spool (package spool).
type SpoolConfig struct {
	// Dir is the spool directory; empty means <state_dir>/spool.
	Dir string `mapstructure:"dir"`
	// MaxBytes and MaxEvents bound the undelivered events; when either
	// is reached new events are refused (and counted), old ones kept.
	MaxBytes  int64 `mapstructure:"max_bytes"`
	MaxEvents int   `mapstructure:"max_events"`
}

// TargetConfig is one thing to collect.
type TargetConfig struct {
	// Name identifies the target in this collector (CollectNow, logs);
	// unique.
	Name string `mapstructure:"name"`
	// Kind is git, process, systemd, codex, python or node.
	Kind string `mapstructure:"kind"`
	// Path is the git work tree (git).
	Path string `mapstructure:"path"`
	// PID is the process (process).
	PID int `mapstructure:"pid"`
	// Unit is the systemd unit (systemd).
	Unit string `mapstructure:"unit"`
	// Cwd is the Codex workspace (codex).
	Cwd string `mapstructure:"cwd"`
	// Env is the Python virtual environment or site-packages directory
	// (python).
	Env string `mapstructure:"env"`
	// Dir is the Node project folder (node).
	Dir string `mapstructure:"dir"`
	// Options tune the collection; each applies to some kinds only.
	Options TargetOptions `mapstructure:"options"`
	// Interval is the time between collections; 0 means 60s.
	Interval time.Duration `mapstructure:"interval"`
	// Baseline names the baseline to verify against, carried by every
	// evidence.collected event of the target: KIND:IDENTIFIER (as
	// `runtimetruth baseline` names one), or an identifier of the
	// snapshot's own kind (see BaselineTarget). Empty means the target's
	// own (its snapshot target).
	Baseline string `mapstructure:"baseline"`
}

// TargetOptions tune a collection.
type TargetOptions struct {
	// SeedOnly omits the extension kinds (git, process, systemd, codex).
	SeedOnly bool `mapstructure:"seed_only"`
	// ResolveThread and ResolveMCP deepen the Codex probe (codex).
	ResolveThread bool `mapstructure:"resolve_thread"`
	ResolveMCP    bool `mapstructure:"resolve_mcp"`
	// CodexBinary is the codex executable; empty means codex from PATH
	// (codex).
	CodexBinary string `mapstructure:"codex_binary"`
	// RunAs is the user (a name or a numeric uid) the Codex probe runs as,
	// and with it the MCP servers it starts (codex). Never root. Empty
	// means the owner of the workspace when the collector runs as root
	// (refused when that is root), else the collector's own user.
	RunAs string `mapstructure:"run_as"`
	// CodexHome is the CODEX_HOME the probe runs with (codex); empty
	// means the run-as user's ~/.codex, or for a collector that switches
	// no user its own environment's.
	CodexHome string `mapstructure:"codex_home"`
	// Runnable is the distribution (python) or package (node) whose code
	// and direct dependencies are checked; it also names the runnable in
	// runnable.modified events. Without it a python target checks every
	// distribution, a node target the project and its direct
	// dependencies.
	Runnable string `mapstructure:"runnable"`
	// All checks every installed distribution or package (python, node).
	All bool `mapstructure:"all"`
}

// NewDefaultConfig returns the defaults: this host's name, a local NATS,
// the spool under DefaultStateDir, no targets.
func NewDefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Host:            host,
		StateDir:        DefaultStateDir,
		ShutdownTimeout: DefaultShutdownTimeout,
		NATS:            natsbus.NewDefaultConfig(),
		Spool:           SpoolConfig{MaxBytes: spool.DefaultMaxBytes, MaxEvents: spool.DefaultMaxEvents},
	}
}

// SpoolDir is the spool directory the configuration implies.
func (c Config) SpoolDir() string {
	if c.Spool.Dir != "" {
		return c.Spool.Dir
	}
	return filepath.Join(c.StateDir, "spool")
}

// Validate checks every setting and every target.
func (c *Config) Validate() error {
	if err := checkName("host", c.Host); err != nil {
		return err
	}
	if c.StateDir == "" {
		return invalidf("state_dir is empty")
	}
	if c.ShutdownTimeout <= 0 {
		return invalidf("shutdown_timeout must be positive")
	}
	if err := c.NATS.Validate(); err != nil {
		return err
	}
	if c.Spool.MaxBytes < MinSpoolBytes {
		return invalidf("spool.max_bytes %d is under %d (one event may take 1 MiB)", c.Spool.MaxBytes, MinSpoolBytes)
	}
	if c.Spool.MaxEvents < 1 {
		return invalidf("spool.max_events must be at least 1")
	}
	seen := map[string]bool{}
	for i, t := range c.Targets {
		if err := t.validate(); err != nil {
			return fmt.Errorf("targets[%d] (%s): %w", i, t.Name, err)
		}
		if seen[t.Name] {
			return invalidf("targets[%d]: name %q used twice", i, t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

func (t TargetConfig) validate() error {
	if err := checkName("name", t.Name); err != nil {
		return err
	}
	if t.Interval != 0 && t.Interval < MinInterval {
		return invalidf("interval %s is under %s", t.Interval, MinInterval)
	}
	if t.Baseline != "" {
		if err := checkName("baseline", t.Baseline); err != nil {
			return err
		}
	}
	// Exactly the location key of the kind, and only the options that
	// apply to it.
	type setting struct {
		key string
		set bool
	}
	where := []setting{
		{"path", t.Path != ""}, {"pid", t.PID != 0}, {"unit", t.Unit != ""},
		{"cwd", t.Cwd != ""}, {"env", t.Env != ""}, {"dir", t.Dir != ""},
	}
	o := t.Options
	opts := []setting{
		{"seed_only", o.SeedOnly}, {"resolve_thread", o.ResolveThread}, {"resolve_mcp", o.ResolveMCP},
		{"codex_binary", o.CodexBinary != ""}, {"run_as", o.RunAs != ""}, {"codex_home", o.CodexHome != ""},
		{"runnable", o.Runnable != ""}, {"all", o.All},
	}
	var key string
	var allowed []string
	switch t.Kind {
	case KindGit:
		key, allowed = "path", []string{"seed_only"}
	case KindProcess:
		key, allowed = "pid", []string{"seed_only"}
		if t.PID < 0 {
			return invalidf("pid %d is not a process id", t.PID)
		}
	case KindSystemd:
		key, allowed = "unit", []string{"seed_only"}
		if t.Unit != "" {
			if err := systemd.ValidateUnit(t.Unit); err != nil {
				return fmt.Errorf("%w: %w", config.ErrInvalid, err)
			}
		}
	case KindCodex:
		key, allowed = "cwd", []string{"seed_only", "resolve_thread", "resolve_mcp", "codex_binary", "run_as", "codex_home"}
		if err := validateRunAs(o.RunAs, o.CodexHome); err != nil {
			return err
		}
	case KindPython:
		key, allowed = "env", []string{"runnable", "all"}
	case KindNode:
		key, allowed = "dir", []string{"runnable", "all"}
	default:
		return invalidf("kind %q (want git, process, systemd, codex, python or node)", t.Kind)
	}
	for _, w := range where {
		switch {
		case w.key == key && !w.set:
			return invalidf("a %s target needs %s", t.Kind, key)
		case w.key != key && w.set:
			return invalidf("%s does not apply to a %s target", w.key, t.Kind)
		}
	}
	for _, s := range opts {
		if s.set && !slices.Contains(allowed, s.key) {
			return invalidf("options.%s does not apply to a %s target", s.key, t.Kind)
		}
	}
	if o.Runnable != "" && o.All {
		return invalidf("options.runnable and options.all exclude each other")
	}
	return nil
}

// validateRunAs checks a codex target's run_as and codex_home.
func validateRunAs(runAs, codexHome string) error {
	if runAs != "" {
		if err := checkName("options.run_as", runAs); err != nil {
			return err
		}
		if n, err := strconv.ParseUint(runAs, 10, 32); runAs == "root" || err == nil && n == 0 {
			return invalidf("options.run_as %q is root: the Codex probe starts the agent and its MCP servers, never as root", runAs)
		}
	}
	if codexHome != "" && !filepath.IsAbs(codexHome) {
		return invalidf("options.codex_home %q is not an absolute path", codexHome)
	}
	return nil
}

// interval is the target's interval with the default applied.
func (t TargetConfig) interval() time.Duration {
	if t.Interval == 0 {
		return DefaultInterval
	}
	return t.Interval
}

func checkName(field, v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return invalidf("%s is empty", field)
	case len(v) > events.MaxNameLength:
		return invalidf("%s is longer than %d bytes", field, events.MaxNameLength)
	case strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7F }):
		return invalidf("%s holds a control character", field)
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{config.ErrInvalid}, args...)...)
}
