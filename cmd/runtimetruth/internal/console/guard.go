package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"sync"
)

// SessionCookie is the name of the console's session cookie.
const SessionCookie = "runtimetruth_console"

// Guard is the console's front door on loopback: the Host check, the
// cross-origin check, the one-time launch token and the session it
// opens, and the security headers of every response (package doc).
type Guard struct {
	port string
	// user is who the session is: the user who started up.
	user User

	mu      sync.Mutex
	token   [sha256.Size]byte // SHA-256 of the launch token
	spent   bool
	session [sha256.Size]byte // SHA-256 of the session, once opened
	opened  bool
}

// NewGuard returns a guard for a console listening on port, and its
// launch token.
func NewGuard(port, approver string) (*Guard, string) {
	token := randomText()
	return &Guard{port: port, user: User{Name: approver, Approver: true}, token: sha256.Sum256([]byte(token))}, token
}

// randomText is 32 random bytes, URL-safe base64.
func randomText() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Wrap returns next behind the guard.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.loopback(r.Host) {
			deny(w, http.StatusMisdirectedRequest, "the console answers to 127.0.0.1, localhost and [::1] on its own port only")
			return
		}
		if tok := r.URL.Query().Get("token"); tok != "" {
			g.launch(w, r, tok)
			return
		}
		if !g.inSession(r) {
			deny(w, http.StatusUnauthorized, "no console session: open the URL runtimetruth up printed (its token works once)")
			return
		}
		next.ServeHTTP(w, r.WithContext(withUser(r.Context(), g.user)))
	})
}

// loopback reports whether host (a request's Host) names this console on
// a loopback name.
func (g *Guard) loopback(host string) bool {
	name, port, err := net.SplitHostPort(host)
	if err != nil || port != g.port {
		return false
	}
	return name == "127.0.0.1" || name == "localhost" || name == "::1"
}

// launch swaps the launch token for a session: once, on a GET, sent on
// to the fleet page without the token.
func (g *Guard) launch(w http.ResponseWriter, r *http.Request, token string) {
	sum := sha256.Sum256([]byte(token))
	g.mu.Lock()
	ok := r.Method == http.MethodGet && !g.spent && subtle.ConstantTimeCompare(sum[:], g.token[:]) == 1
	var session string
	if ok {
		g.spent = true
		session = randomText()
		g.session, g.opened = sha256.Sum256([]byte(session)), true
	}
	g.mu.Unlock()
	if !ok {
		deny(w, http.StatusUnauthorized, "the launch token is spent or wrong: restart runtimetruth up for a new one")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
	// To the fleet page, whatever the path: a path such as //elsewhere
	// would send the browser off the console.
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// inSession reports whether r carries the session's cookie.
func (g *Guard) inSession(r *http.Request) bool {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(c.Value))
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opened && subtle.ConstantTimeCompare(sum[:], g.session[:]) == 1
}

// deny writes a refusal as plain text.
func deny(w http.ResponseWriter, code int, why string) {
	http.Error(w, http.StatusText(code)+": "+why, code)
}
