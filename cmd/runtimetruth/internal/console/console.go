package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

//go:embed assets
var assets embed.FS

// Config configures a Server.
type Config struct {
	// Listen is the address to serve on: a loopback address (the port 0
	// picks a free one).
	Listen string
	// Now is the clock the pages' ages are computed with (time.Now when
	// nil).
	Now func() time.Time
	// Audit is the audit log the audit and integrity pages read and
	// verify (nil: none).
	Audit *AuditLog
	// Approver names who approves through this console on loopback (the
	// baseline's approved_by, baseline.changed's actor and the host
	// key's "by"): the user who started it.
	Approver string
	// OIDC, when set, puts the console behind an OpenID Connect login
	// (on any address): the approver is the signed-in user, and only the
	// approver groups may approve.
	OIDC *OIDCConfig
	// Trends, when set, serve the trends page over ClickHouse.
	Trends *Trends
	// APITokens are the API tokens accepted beside the sessions (for
	// automation: "Authorization: Bearer <token>"), with OIDC only.
	APITokens []APIToken
}

// Server is the console's HTTP server over a JetStream connection.
type Server struct {
	cfg   Config
	js    jetstream.JetStream
	log   *slog.Logger
	pages *template.Template
	shown shown

	ln  net.Listener
	srv *http.Server
	// stopping ends when Shutdown begins: the live streams end with it.
	stopping context.Context
	stop     context.CancelFunc
	token    string
	done     chan error
}

// New returns a console over js; Start listens.
func New(cfg Config, js jetstream.JetStream, log *slog.Logger) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Approver == "" {
		cfg.Approver = "console"
	}
	s := &Server{cfg: cfg, js: js, log: log}
	var err error
	s.pages, err = template.New("").Funcs(template.FuncMap{
		"text":   snapshot.Printable,
		"age":    func(t time.Time) string { return age(cfg.Now().Sub(t)) },
		"when":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"link":   fleetURL,
		"add":    func(a, b int) int { return a + b },
		"target": targetURL,
		"side": func(sd report.Side) string {
			if !sd.Present {
				return "(absent)"
			}
			return sd.Value.String()
		},
		"statuses": func() []string { return []string{"PASS", "DRIFT", "ERROR", "STALE"} },
		"status":   func(s string) string { return verifier.StatusWord(events.Status(s)) },
		"local": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02T15:04")
		},
	}).ParseFS(assets, "assets/*.html")
	if err != nil {
		return nil, fmt.Errorf("console templates: %w", err)
	}
	return s, nil
}

// Name names the component in logs.
func (s *Server) Name() string { return "console" }

// Start listens on the configured address and serves in the background:
// with OIDC (a deployment) behind its login, else on loopback behind the
// launch token (Guard).
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	var front access
	if s.cfg.OIDC != nil {
		if front, err = newOIDC(ctx, *s.cfg.OIDC, "http://"+ln.Addr().String()+"/auth/callback", s.cfg.Now); err != nil {
			_ = ln.Close()
			return err
		}
	} else {
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			_ = ln.Close()
			return fmt.Errorf("console: %s is not a loopback address (a console on another address needs OIDC)", s.cfg.Listen)
		}
		front, s.token = NewGuard(port, s.cfg.Approver)
	}
	s.ln, s.done = ln, make(chan error, 1)
	s.stopping, s.stop = context.WithCancel(context.Background())
	routes := s.routes()
	door := front.Wrap(routes)
	if s.cfg.OIDC != nil && len(s.cfg.APITokens) > 0 {
		door = withTokens(s.cfg.APITokens, door, routes)
	}
	s.srv = &http.Server{Handler: secured(http.NewCrossOriginProtection(), door), ReadHeaderTimeout: 10 * time.Second}
	go func() { s.done <- s.srv.Serve(ln) }()
	return nil
}

// URL is the address to open the console with, its launch token in it
// on loopback; "" before Start.
func (s *Server) URL() string {
	switch {
	case s.ln == nil:
		return ""
	case s.token == "":
		return "http://" + s.ln.Addr().String() + "/"
	}
	return "http://" + s.ln.Addr().String() + "/?token=" + url.QueryEscape(s.token)
}

// Shutdown stops serving and waits for the requests in flight.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	s.stop()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	s.srv = nil
	return err
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.fleet)
	mux.HandleFunc("GET /target", s.target)
	mux.HandleFunc("GET /events", s.live)
	mux.HandleFunc("GET /audit", s.audit)
	mux.HandleFunc("GET /integrity", s.audit)
	mux.HandleFunc("GET /trends", s.trends)
	mux.HandleFunc("POST /approve", s.approveBaseline)
	mux.HandleFunc("POST /host/approve", s.approveKey)
	mux.HandleFunc("POST /host/collect", s.collectNow)
	mux.Handle("GET /assets/", http.FileServerFS(assets))
	return mux
}

// fleet serves the fleet page.
func (s *Server) fleet(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	page, _ := strconv.Atoi(v.Get("page"))
	f, err := readFleet(r.Context(), s.js, Query{Status: v.Get("status"), Host: v.Get("host"), Kind: v.Get("kind"), Page: page})
	if err != nil {
		s.log.Warn("console: fleet", "err", err)
		http.Error(w, "the verifier's records cannot be read now", http.StatusServiceUnavailable)
		return
	}
	s.render(w, "fleet.html", f)
}

// target serves a host and target's page: /target?host=H&kind=K&id=I.
func (s *Server) target(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	t, err := readTarget(r.Context(), s.js, v.Get("host"), events.Target{Kind: v.Get("kind"), Identifier: v.Get("id")})
	if t.Latest != nil {
		s.shown.keep(t.Latest.Digest, t.Latest.Snapshot)
	}
	t.Approved, t.Self, t.User = v.Get("approved"), r.URL.RequestURI(), userOf(r)
	switch {
	case errors.Is(err, verifier.ErrNoVerdict):
		http.Error(w, "no verdict for this host and target", http.StatusNotFound)
		return
	case err != nil:
		s.log.Warn("console: target", "err", err)
		http.Error(w, "the verifier's records cannot be read now", http.StatusServiceUnavailable)
		return
	}
	s.render(w, "target.html", t)
}

// targetURL is the page of row's host and target.
func targetURL(r Row) string {
	return "/target?" + url.Values{"host": {r.Host}, "kind": {r.Target.Kind}, "id": {r.Target.Identifier}}.Encode()
}

// render executes a page into a buffer first, so that a failure is a
// clean 500, not half a page.
func (s *Server) render(w http.ResponseWriter, name string, data any) {
	s.renderCode(w, http.StatusOK, name, data)
}

// renderCode is render with a status code.
func (s *Server) renderCode(w http.ResponseWriter, code int, name string, data any) {
	var b bytes.Buffer
	if err := s.pages.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Warn("console: render", "page", name, "err", err)
		http.Error(w, "the page cannot be shown", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = b.WriteTo(w)
}

// fleetURL is the fleet page's URL for q with one parameter changed.
func fleetURL(q Query, key, value string) string {
	v := url.Values{}
	set := func(k, val string) {
		if val != "" {
			v.Set(k, val)
		}
	}
	set("status", q.Status)
	set("host", q.Host)
	set("kind", q.Kind)
	if q.Page > 1 {
		set("page", strconv.Itoa(q.Page))
	}
	if key != "page" {
		v.Del("page") // a new filter starts at its first page
	}
	if value == "" || (key == "page" && value == "1") {
		v.Del(key)
	} else {
		v.Set(key, value)
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// age is a duration as "42s", "5m", "3h", "2d".
func age(d time.Duration) string {
	switch {
	case d < 0:
		return "now"
	case d < time.Minute:
		return strconv.Itoa(int(d/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}
