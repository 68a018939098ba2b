package console

import (
	"context"
	"net/http"
)

// User is who a request comes from: the name recorded as the approver,
// and whether they may approve (and collect now) or only view.
type User struct {
	Name     string
	Approver bool
}

// An access is the console's front door: Wrap lets a request through to
// next only with a session, and puts its User in the request's context.
// Guard (loopback, runtimetruth up) and oidcAccess (a deployment) are
// the two.
type access interface {
	Wrap(next http.Handler) http.Handler
}

type userKey struct{}

func withUser(ctx context.Context, u User) context.Context {
	return context.WithValue(ctx, userKey{}, u)
}

// userOf is the User the front door let r through as.
func userOf(r *http.Request) User {
	u, _ := r.Context().Value(userKey{}).(User)
	return u
}

// mayApprove refuses (403) a request whose user may only view.
func mayApprove(w http.ResponseWriter, r *http.Request) bool {
	if userOf(r).Approver {
		return true
	}
	deny(w, http.StatusForbidden, "approving and collecting need the approver role")
	return false
}

// secured sets the security headers of every response and refuses unsafe
// methods from another origin (403).
func secured(cross *http.CrossOriginProtection, next http.Handler) http.Handler {
	inner := cross.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		inner.ServeHTTP(w, r)
	})
}
