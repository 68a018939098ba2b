package console

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCConfig configures the console's OpenID Connect login, for a
// deployment (runtimetruth console): who may view, and who may also
// approve, from a groups claim of the ID token.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (discovery at Start).
	Issuer string
	// ClientID and ClientSecret are the console's client at the provider.
	ClientID, ClientSecret string
	// RedirectURL is the callback the provider sends the browser back to,
	// <the console's external URL>/auth/callback ("" for the listening
	// address's).
	RedirectURL string
	// GroupsClaim names the ID token's claim listing the user's groups
	// ("groups" when empty).
	GroupsClaim string
	// ViewerGroups may view (any user the provider signs in when empty);
	// ApproverGroups may also approve baselines and keys and collect now
	// (nobody when empty: approval is off).
	ViewerGroups, ApproverGroups []string
	// SessionTTL bounds a session (8 hours when 0).
	SessionTTL time.Duration
}

// loginCookie carries a login's state through the provider's redirect.
const loginCookie = "runtimetruth_login"

// Bounds on what the OIDC front door keeps: logins started and not
// finished go first, then the oldest sessions.
const (
	maxLogins   = 1024
	maxSessions = 4096
	loginTTL    = 10 * time.Minute
)

// oidcAccess is the console's front door for a deployment: an OpenID
// Connect login (authorization code with PKCE, the ID token's nonce
// checked) opens a session; roles come from the groups claim.
type oidcAccess struct {
	cfg      OIDCConfig
	oauth    oauth2.Config
	verifier *oidc.IDTokenVerifier
	now      func() time.Time

	mu       sync.Mutex
	logins   map[string]login             // by state
	sessions map[[sha256.Size]byte]opened // by SHA-256 of the cookie
}

type login struct {
	nonce, verifier string
	until           time.Time
}

type opened struct {
	user  User
	until time.Time
}

// newOIDC discovers the provider and returns the front door.
func newOIDC(ctx context.Context, cfg OIDCConfig, redirect string, now func() time.Time) (*oidcAccess, error) {
	provider, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("console: OIDC provider %s: %w", cfg.Issuer, err)
	}
	if cfg.RedirectURL == "" {
		cfg.RedirectURL = redirect
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	return &oidcAccess{
		cfg: cfg, now: now,
		oauth: oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: provider.Endpoint(),
			RedirectURL: cfg.RedirectURL, Scopes: []string{oidc.ScopeOpenID, "email", "profile", "groups"}},
		verifier: provider.Verifier(&oidc.Config{ClientID: cfg.ClientID}),
		logins:   map[string]login{}, sessions: map[[sha256.Size]byte]opened{},
	}, nil
}

// Wrap returns next behind the login: /auth/login and /auth/callback
// open a session; any other request needs one (a page is sent to the
// login, anything else refused, 401).
func (o *oidcAccess) Wrap(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /auth/login", o.login)
	mux.HandleFunc("GET /auth/callback", o.callback)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := o.session(r)
		if !ok {
			if r.Method == http.MethodGet && r.URL.Path != "/events" {
				http.Redirect(w, r, "/auth/login", http.StatusSeeOther)
				return
			}
			deny(w, http.StatusUnauthorized, "no console session: sign in at /auth/login")
			return
		}
		next.ServeHTTP(w, r.WithContext(withUser(r.Context(), u)))
	}))
	return mux
}

// login sends the browser to the provider, with a fresh state (also in a
// cookie, so that only this browser finishes the login), nonce and PKCE
// verifier.
func (o *oidcAccess) login(w http.ResponseWriter, r *http.Request) {
	state, nonce, verifier := randomText(), randomText(), oauth2.GenerateVerifier()
	now := o.now()
	o.mu.Lock()
	for s, l := range o.logins {
		if now.After(l.until) || len(o.logins) >= maxLogins {
			delete(o.logins, s)
		}
	}
	o.logins[state] = login{nonce: nonce, verifier: verifier, until: now.Add(loginTTL)}
	o.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: state, Path: "/auth/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		MaxAge: int(loginTTL / time.Second)})
	http.Redirect(w, r, o.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), http.StatusFound)
}

// errLogin is a login the console refuses.
var errLogin = errors.New("login refused")

// callback finishes a login: the state must be this browser's, the code
// is exchanged with its PKCE verifier, and the ID token must verify, be
// for this client and carry the login's nonce. The user's groups give
// the role; a user in none of the viewer groups gets no session (403).
func (o *oidcAccess) callback(w http.ResponseWriter, r *http.Request) {
	u, err := o.finish(r)
	if err != nil {
		code := http.StatusUnauthorized
		if errors.Is(err, errNotViewer) {
			code = http.StatusForbidden
		}
		deny(w, code, err.Error())
		return
	}
	value := randomText()
	o.mu.Lock()
	now := o.now()
	for k, s := range o.sessions {
		if now.After(s.until) || len(o.sessions) >= maxSessions {
			delete(o.sessions, k)
		}
	}
	o.sessions[sha256.Sum256([]byte(value))] = opened{user: u, until: now.Add(o.cfg.SessionTTL)}
	o.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/auth/", MaxAge: -1})
	// Lax: the browser arrives from the provider's site; no GET changes
	// anything, and unsafe methods from another origin are refused.
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode,
		MaxAge: int(o.cfg.SessionTTL / time.Second)})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// errNotViewer: the user is in none of the viewer groups.
var errNotViewer = errors.New("not in a group that may use the console")

func (o *oidcAccess) finish(r *http.Request) (User, error) {
	q := r.URL.Query()
	state := q.Get("state")
	c, err := r.Cookie(loginCookie)
	if err != nil || state == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(state)) != 1 {
		return User{}, fmt.Errorf("%w: the login was not started by this browser", errLogin)
	}
	o.mu.Lock()
	l, ok := o.logins[state]
	delete(o.logins, state)
	o.mu.Unlock()
	if !ok || o.now().After(l.until) {
		return User{}, fmt.Errorf("%w: the login expired or was used", errLogin)
	}
	if e := q.Get("error"); e != "" {
		return User{}, fmt.Errorf("%w: the provider says %s", errLogin, e)
	}
	tok, err := o.oauth.Exchange(r.Context(), q.Get("code"), oauth2.VerifierOption(l.verifier))
	if err != nil {
		return User{}, fmt.Errorf("%w: code exchange: %w", errLogin, err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok {
		return User{}, fmt.Errorf("%w: no ID token", errLogin)
	}
	id, err := o.verifier.Verify(r.Context(), raw)
	if err != nil {
		return User{}, fmt.Errorf("%w: ID token: %w", errLogin, err)
	}
	if subtle.ConstantTimeCompare([]byte(id.Nonce), []byte(l.nonce)) != 1 {
		return User{}, fmt.Errorf("%w: the ID token's nonce is not the login's", errLogin)
	}
	claims := map[string]any{}
	if err := id.Claims(&claims); err != nil {
		return User{}, fmt.Errorf("%w: ID token claims: %w", errLogin, err)
	}
	var groups []string
	if list, ok := claims[o.cfg.GroupsClaim].([]any); ok {
		for _, g := range list {
			if s, ok := g.(string); ok {
				groups = append(groups, s)
			}
		}
	}
	in := func(want []string) bool {
		return slices.ContainsFunc(groups, func(g string) bool { return slices.Contains(want, g) })
	}
	u := User{Name: id.Subject, Approver: in(o.cfg.ApproverGroups)}
	for _, k := range []string{"email", "preferred_username"} {
		if s, ok := claims[k].(string); ok && s != "" {
			u.Name = s
			break
		}
	}
	if !u.Approver && len(o.cfg.ViewerGroups) > 0 && !in(o.cfg.ViewerGroups) {
		return User{}, fmt.Errorf("%w (%s)", errNotViewer, u.Name)
	}
	return u, nil
}

// session is the user of r's session cookie, if it is open.
func (o *oidcAccess) session(r *http.Request) (User, bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return User{}, false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.sessions[sha256.Sum256([]byte(c.Value))]
	if !ok || o.now().After(s.until) {
		return User{}, false
	}
	return s.user, true
}
