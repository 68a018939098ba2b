package console

import (
	"errors"
	"net/http"
	"net/url"
	"sync"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// approveBaseline adopts the snapshot a target's page showed as the
// target's baseline: POST /approve with host, kind, id and the digest the
// page displayed. It is verifier.Baselines.Approve, the code of
// `runtimetruth baseline approve --digest`: the snapshot is adopted only
// while the host's evidence is the one shown (else 409, naming both
// digests), only authentic evidence (403 otherwise), and the approval is
// announced as a baseline.changed event whose actor is the approver, which
// the auditor links into the chain.
func (s *Server) approveBaseline(w http.ResponseWriter, r *http.Request) {
	if !mayApprove(w, r) {
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "a malformed form", http.StatusBadRequest)
		return
	}
	f := r.PostForm
	host, digest := f.Get("host"), f.Get("digest")
	target, err := events.ParseTarget(f.Get("kind") + ":" + f.Get("id"))
	if err != nil || host == "" || digest == "" {
		http.Error(w, "name the host, the target and the digest shown", http.StatusBadRequest)
		return
	}
	o := verifier.ApproveOptions{
		Host: host, Digest: digest, By: userOf(r).Name, Reviewed: s.shown.get(digest),
		AllowUnauthenticated: f.Get("unauthenticated") == "yes",
	}
	b, err := verifier.NewBaselines(s.js, events.Source("console", userOf(r).Name)).Approve(r.Context(), target, o)
	if err != nil {
		s.refuse(w, "Not approved", err, approveCode(err))
		return
	}
	v := url.Values{"host": {host}, "kind": {target.Kind}, "id": {target.Identifier}, "approved": {b.Digest}}
	http.Redirect(w, r, "/target?"+v.Encode(), http.StatusSeeOther)
}

// approveCode is the status of a refused approval.
func approveCode(err error) int {
	switch {
	case errors.Is(err, verifier.ErrUnauthenticated), errors.Is(err, verifier.ErrSignerNotEnrolled):
		return http.StatusForbidden
	case errors.Is(err, verifier.ErrDigestChanged), errors.Is(err, verifier.ErrAmbiguous), errors.Is(err, verifier.ErrRevoked):
		return http.StatusConflict
	case errors.Is(err, verifier.ErrNoSnapshot), errors.Is(err, verifier.ErrBaselineGone):
		return http.StatusNotFound
	case errors.Is(err, verifier.ErrNoDigest), errors.Is(err, verifier.ErrNoKeyNamed):
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

// approveKey enrolls the key a target's page showed as its host's: POST
// /host/approve with host and key (the key's id as the page shows it,
// never "the pending one"). It is verifier.Hosts.Approve, the code of
// `runtimetruth host approve --key`; the registry records the approver.
func (s *Server) approveKey(w http.ResponseWriter, r *http.Request) {
	if !mayApprove(w, r) {
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "a malformed form", http.StatusBadRequest)
		return
	}
	host, key := r.PostForm.Get("host"), r.PostForm.Get("key")
	if _, err := dsse.ParseKeyID(key); err != nil || host == "" {
		http.Error(w, "name the host and the key shown", http.StatusBadRequest)
		return
	}
	hosts, err := registry(r.Context(), s.js)
	if err == nil {
		_, err = hosts.Announcing(s.js, events.Source("console", userOf(r).Name)).Approve(r.Context(), host, key, userOf(r).Name)
	}
	if err != nil {
		s.refuse(w, "Key not enrolled", err, approveCode(err))
		return
	}
	back := r.PostForm.Get("back")
	if u, perr := url.Parse(back); perr != nil || u.Path != "/target" || u.Host != "" || u.Scheme != "" {
		back = "/"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// refuse answers a refused action with code and a page saying why.
func (s *Server) refuse(w http.ResponseWriter, title string, err error, code int) {
	if code == http.StatusServiceUnavailable {
		s.log.Warn("console: action", "err", err)
	}
	s.renderCode(w, code, "refused.html", struct{ Title, Why string }{title, err.Error()})
}

// shownLimit is how many displayed snapshots the console keeps.
const shownLimit = 256

// shown keeps the snapshots target pages displayed, by digest: what an
// approval made after the host collected again adopts when the host's
// evidence is still the one shown (verifier.ApproveOptions.Reviewed,
// which checks the digest and the evidence itself). Bounded: the oldest
// go first.
type shown struct {
	mu    sync.Mutex
	docs  map[string][]byte
	order []string
}

func (sh *shown) keep(digest string, doc []byte) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.docs == nil {
		sh.docs = map[string][]byte{}
	}
	if _, ok := sh.docs[digest]; ok {
		return
	}
	if len(sh.order) == shownLimit {
		delete(sh.docs, sh.order[0])
		sh.order = sh.order[1:]
	}
	sh.docs[digest], sh.order = doc, append(sh.order, digest)
}

func (sh *shown) get(digest string) []byte {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.docs[digest]
}
