// Package servicemain is the main of every runtimetruth service: flags
// (--config, --check-config, --version, the NATS connection flags --nats,
// --nats-creds, --nats-user, --nats-password-file, --nats-tls-ca,
// --nats-tls-cert and --nats-tls-key, and --set KEY=VALUE), configuration
// (the service's own keys plus the platform's http.*, telemetry.* and
// log.*, strictly decoded; flags over RUNTIMETRUTH_<SERVICE>_ variables
// over a file over the defaults), logging,
// OpenTelemetry, the health and metrics port, signals, and the lifecycle:
//
//	start:  http server → service → readiness gate (/readyz turns 200)
//	SIGTERM or SIGINT:
//	        readiness gate (/readyz turns 503, then http.shutdown_delay)
//	        → service drains (its shutdown timeout)
//	        → telemetry flushes → http server stops
//
// A service's main is a Service value and a call to Main.
package servicemain

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// Service describes one service to Run.
type Service[C any] struct {
	// Name is the service name: "collector" runs as runtimetruth-collector
	// and reads RUNTIMETRUTH_COLLECTOR_* variables.
	Name string
	// Version is the build version (--version, logs, telemetry).
	Version string
	// DefaultConfig returns the service's defaults.
	DefaultConfig func() C
	// New builds the service from its validated configuration. It must not
	// start work: Start does that.
	New func(cfg C, set Settings) (lifecycle.Component, error)
	// ShutdownTimeout is how long the service may take to drain
	// (default DefaultShutdownTimeout).
	ShutdownTimeout func(cfg C) time.Duration
	// Check, when set, runs after the configuration validated, for
	// --check-config and before starting: checks that need more than the
	// values (a key file that parses, say). It must not connect anywhere.
	Check func(cfg C) error
	// Actions are flags that, given, run instead of the service: the flag
	// name (without "--") and what it does with the validated
	// configuration (the collector's --print-identity).
	Actions map[string]Action[C]
}

// Action is one of Service.Actions.
type Action[C any] struct {
	// Usage is the flag's help text.
	Usage string
	// Run does the action, writing its output to stdout.
	Run func(cfg C, stdout io.Writer) error
}

// DefaultShutdownTimeout bounds the drain when Service.ShutdownTimeout is
// nil.
const DefaultShutdownTimeout = 30 * time.Second

// Settings is what a service gets from its main.
type Settings struct {
	// Logger is the service's structured logger.
	Logger *slog.Logger
	// Version is the build version.
	Version string
	// TracerProvider, MeterProvider and Propagator report through the
	// service's telemetry (also installed as the OpenTelemetry globals).
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	Propagator     propagation.TextMapPropagator
	// Health takes readiness checks (AddCheck); a component that
	// implements health.Checker is added by itself.
	Health *health.Server
}

// Providers returns the telemetry providers of s, as natsbus and
// eventtrace take them.
func (s Settings) Providers() telemetry.Providers {
	return telemetry.Providers{TracerProvider: s.TracerProvider, MeterProvider: s.MeterProvider, Propagator: s.Propagator}
}

// Config is a service's whole configuration: the service's own keys at
// the top level, and the platform's under http, telemetry and log (names a
// service's own keys must not use).
type Config[C any] struct {
	Service   C                `mapstructure:",squash"`
	HTTP      health.Config    `mapstructure:"http"`
	Telemetry telemetry.Config `mapstructure:"telemetry"`
	Log       LogConfig        `mapstructure:"log"`
}

// LogConfig is the log section.
type LogConfig struct {
	// Level is debug, info, warn or error (log.level, default info).
	Level string `mapstructure:"level"`
	// Format is json or text (log.format, default json).
	Format string `mapstructure:"format"`
}

// Validate checks the platform sections and then the service's own
// configuration when it has a Validate method.
func (c *Config[C]) Validate() error {
	if _, err := c.Log.level(); err != nil {
		return err
	}
	if c.Log.Format != "json" && c.Log.Format != "text" {
		return fmt.Errorf("%w: log.format: %q (want json or text)", config.ErrInvalid, c.Log.Format)
	}
	if err := c.HTTP.Validate(); err != nil {
		return err
	}
	if err := c.Telemetry.Validate(); err != nil {
		return err
	}
	if v, ok := any(&c.Service).(config.Validator); ok {
		return v.Validate()
	}
	return nil
}

func (l LogConfig) level() (slog.Level, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.Level)); err != nil {
		return 0, fmt.Errorf("%w: log.level: %q (want debug, info, warn or error)", config.ErrInvalid, l.Level)
	}
	return lv, nil
}

// Binary is the service's command name, runtimetruth-<name>.
func (s Service[C]) Binary() string { return "runtimetruth-" + s.Name }

// EnvPrefix is the prefix of the service's variables,
// RUNTIMETRUTH_<NAME>.
func (s Service[C]) EnvPrefix() string {
	return "RUNTIMETRUTH_" + strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
}

func (s Service[C]) defaults() Config[C] {
	return Config[C]{
		Service:   s.DefaultConfig(),
		HTTP:      health.NewDefaultConfig(),
		Telemetry: telemetry.NewDefaultConfig(),
		Log:       LogConfig{Level: "info", Format: "json"},
	}
}

// LoadConfig loads and checks the configuration as --check-config does
// without flags: the file at path (empty for none) and the environment over
// the defaults, strictly decoded, validated, then Check.
func (s Service[C]) LoadConfig(path string) (Config[C], error) {
	return s.LoadConfigWith(path, nil)
}

// LoadConfigWith is LoadConfig with overrides (key path → value, as the
// flags give them) over the environment.
func (s Service[C]) LoadConfigWith(path string, overrides map[string]any) (Config[C], error) {
	cfg := s.defaults()
	if err := config.Load(path, s.EnvPrefix(), &cfg, overrides); err != nil {
		return Config[C]{}, err
	}
	if s.Check != nil {
		if err := s.Check(cfg.Service); err != nil {
			return Config[C]{}, fmt.Errorf("invalid config: %w", err)
		}
	}
	return cfg, nil
}

// Main runs the service with the process's arguments, signals and
// standard streams, and returns the process's exit code for main to exit
// with: 0 after a clean stop, --version or a good --check-config; 1 with
// "runtimetruth-<name>: error: …" on stderr for anything else (usage
// errors included).
func Main[C any](s Service[C]) int {
	if err := Run(context.Background(), s, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "%s: error: %v\n", s.Binary(), err)
		return 1
	}
	return 0
}

// Run parses args and runs the service until ctx ends or the process gets
// SIGTERM or SIGINT, then shuts it down. It returns nil after a clean
// stop, --version, --help or a good --check-config.
func Run[C any](ctx context.Context, s Service[C], args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet(s.Binary(), flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "", "config file (YAML, TOML or JSON); "+s.EnvPrefix()+"_* variables override it")
	check := fs.Bool("check-config", false, "validate the configuration (strictly: an unknown key is an error) and exit")
	showVersion := fs.Bool("version", false, "print the version and exit")
	overrides := registerOverrides(fs)
	actions := make(map[string]*bool, len(s.Actions))
	for name, a := range s.Actions {
		actions[name] = fs.Bool(name, false, a.Usage)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *showVersion {
		_, err := fmt.Fprintln(stdout, s.Version)
		return err
	}
	cfg, err := s.LoadConfigWith(*path, overrides())
	if err != nil {
		return err
	}
	if *check {
		_, err := fmt.Fprintf(stdout, "%s: configuration ok\n", s.Binary())
		return err
	}
	for name, set := range actions {
		if *set {
			return s.Actions[name].Run(cfg.Service, stdout)
		}
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := newLogger(stderr, cfg.Log).With("service", s.Name, "version", s.Version)
	slog.SetDefault(log)

	tel, err := telemetry.Setup(ctx, telemetry.Info{Service: s.Binary(), Version: s.Version}, cfg.Telemetry)
	if err != nil {
		return err
	}
	tel.SetGlobal()
	hs := health.New(cfg.HTTP, log, tel.MetricsHandler())
	set := Settings{
		Logger:         log,
		Version:        s.Version,
		TracerProvider: tel.TracerProvider,
		MeterProvider:  tel.MeterProvider,
		Propagator:     tel.Propagator,
		Health:         hs,
	}
	svc, err := s.New(cfg.Service, set)
	if err != nil {
		return errors.Join(err, tel.Shutdown(context.WithoutCancel(ctx)))
	}
	if c, ok := svc.(health.Checker); ok {
		hs.AddCheck(s.Name, c.Ready)
	}
	timeout := DefaultShutdownTimeout
	if s.ShutdownTimeout != nil {
		timeout = s.ShutdownTimeout(cfg.Service)
	}
	return lifecycle.Run(ctx, log, timeout, hs, telemetryComponent{tel}, svc, hs.Gate())
}

func newLogger(w io.Writer, cfg LogConfig) *slog.Logger {
	lv, _ := cfg.level() // validated
	opts := &slog.HandlerOptions{Level: lv}
	if cfg.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// telemetryComponent flushes the telemetry after the service drained.
type telemetryComponent struct{ t *telemetry.Telemetry }

func (telemetryComponent) Name() string                         { return "telemetry" }
func (telemetryComponent) Start(context.Context) error          { return nil }
func (c telemetryComponent) Shutdown(ctx context.Context) error { return c.t.Shutdown(ctx) }
