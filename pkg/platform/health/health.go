// Package health serves a service's small HTTP port: /healthz (the process
// is alive and serving), /readyz (the components started, the service is
// not shutting down, and every readiness check passes) and /metrics (the
// Prometheus exposition of its OpenTelemetry metrics).
//
// Readiness follows the lifecycle: false until Gate().Start, false again
// from Gate().Shutdown on, which lifecycle.Run calls first when the
// service is asked to stop, before the components drain; the HTTP server
// itself stops last.
package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
)

// Config is the http section of a service configuration.
type Config struct {
	// Listen is the address of the health and metrics port
	// (http.listen), host:port; ":9090" listens on every interface, as
	// Kubernetes probes need. Empty (the default) serves nothing.
	Listen string `mapstructure:"listen"`
	// ShutdownDelay is how long /readyz answers 503 before the drain
	// starts (http.shutdown_delay, default 0s), for whoever watches
	// readiness to notice.
	ShutdownDelay time.Duration `mapstructure:"shutdown_delay"`
}

// NewDefaultConfig returns the defaults: no HTTP port, no delay.
func NewDefaultConfig() Config { return Config{} }

// Validate checks the listen address and the delay.
func (c Config) Validate() error {
	if c.ShutdownDelay < 0 {
		return fmt.Errorf("%w: http.shutdown_delay: %s (want 0 or more)", config.ErrInvalid, c.ShutdownDelay)
	}
	if c.Listen == "" {
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("%w: http.listen: %q is not host:port", config.ErrInvalid, c.Listen)
	}
	return nil
}

// Check reports whether a part of the service is ready (nil) or why not.
// It gets a context bounded by CheckTimeout.
type Check func(ctx context.Context) error

// Checker is implemented by components that report their own readiness
// (a NATS connection established, a consumer bound).
type Checker interface {
	Ready(ctx context.Context) error
}

// CheckTimeout bounds one readiness check.
const CheckTimeout = 2 * time.Second

type state int

const (
	starting state = iota
	running
	stopping
)

func (s state) String() string {
	return [...]string{"starting", "ready", "shutting down"}[s]
}

type namedCheck struct {
	name string
	fn   Check
}

// Server is the health and metrics HTTP server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics http.Handler

	mu     sync.Mutex
	state  state
	checks []namedCheck

	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// New returns a server for cfg serving metrics on /metrics (nil: 404). It
// listens only once started, and only when cfg.Listen is set.
func New(cfg Config, log *slog.Logger, metrics http.Handler) *Server {
	return &Server{cfg: cfg, log: lifecycle.Logger(log), metrics: metrics}
}

// Name names the component in logs.
func (s *Server) Name() string { return "http" }

// AddCheck adds a readiness check; /readyz fails while it fails.
func (s *Server) AddCheck(name string, fn Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, namedCheck{name: name, fn: fn})
}

// Handler serves /healthz, /readyz and /metrics.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		text(w, http.StatusOK, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := s.Ready(r.Context()); err != nil {
			text(w, http.StatusServiceUnavailable, "not ready: "+err.Error())
			return
		}
		text(w, http.StatusOK, "ok")
	})
	if s.metrics != nil {
		mux.Handle("GET /metrics", s.metrics)
	}
	return mux
}

func text(w http.ResponseWriter, code int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = fmt.Fprintln(w, body)
}

// Ready reports whether the service is ready: started, not shutting down,
// and every check passing (each within CheckTimeout).
func (s *Server) Ready(ctx context.Context) error {
	s.mu.Lock()
	st := s.state
	checks := slices.Clone(s.checks)
	s.mu.Unlock()
	if st != running {
		return errors.New(st.String())
	}
	var failed []string
	for _, c := range checks {
		cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
		err := c.fn(cctx)
		cancel()
		if err != nil {
			failed = append(failed, c.name+": "+err.Error())
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

func (s *Server) setState(st state) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = st
}

// Start listens on cfg.Listen (nothing when it is empty) and serves in the
// background. An address that cannot be bound is an error.
func (s *Server) Start(context.Context) error {
	if s.cfg.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen http %s: %w", s.cfg.Listen, err)
	}
	s.mu.Lock()
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.done = make(chan struct{})
	srv, done := s.srv, s.done
	s.mu.Unlock()
	s.log.Info("serving health and metrics", "addr", ln.Addr().String())
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	}()
	return nil
}

// Addr is the address the server listens on ("" before Start or when
// off); with port 0 in cfg.Listen it names the port chosen.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops the server: it finishes the requests in progress within
// ctx, then closes. Safe without Start and twice.
func (s *Server) Shutdown(ctx context.Context) error {
	s.setState(stopping)
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, srv.Close())
	}
	<-done
	return err
}

// Gate returns the component that opens readiness when started and closes
// it when shut down, waiting cfg.ShutdownDelay after closing. Place it last
// in lifecycle.Run, so that it starts after every other component and is
// shut down first.
func (s *Server) Gate() *Gate { return &Gate{s: s} }

// Gate is the readiness gate component (see Server.Gate).
type Gate struct{ s *Server }

// Name names the component in logs.
func (g *Gate) Name() string { return "readiness" }

// Start marks the service ready (subject to the checks).
func (g *Gate) Start(context.Context) error {
	g.s.setState(running)
	return nil
}

// Shutdown marks the service not ready, then waits the shutdown delay (or
// until ctx ends).
func (g *Gate) Shutdown(ctx context.Context) error {
	g.s.mu.Lock()
	was := g.s.state
	g.s.state = stopping
	g.s.mu.Unlock()
	if was != running || g.s.cfg.ShutdownDelay <= 0 {
		return nil
	}
	t := time.NewTimer(g.s.cfg.ShutdownDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}
