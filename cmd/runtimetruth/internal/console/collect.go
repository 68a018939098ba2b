package console

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/services/collector"
)

// Collected is the page of a collect-now request: the authentic reply
// and the key that signed it, and the replies refused.
type Collected struct {
	Host    string
	Key     string
	Reply   collector.CollectNowReply
	Refused []string
	// More counts the refusals past collector.MaxRefusals.
	More int
}

// collectNow asks a host's collector to collect every target now: POST
// /host/collect with host. It is collector.Ask with the registry's
// enrolled keys of the host (verifier.Hosts.EnrolledKeys), the code of
// `runtimetruth collect HOST`: only a reply signed by an enrolled key of
// the host, to this request's nonce, is shown; the others are listed as
// refused.
func (s *Server) collectNow(w http.ResponseWriter, r *http.Request) {
	if !mayApprove(w, r) {
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "a malformed form", http.StatusBadRequest)
		return
	}
	host := r.PostForm.Get("host")
	if host == "" {
		http.Error(w, "name the host", http.StatusBadRequest)
		return
	}
	hosts, err := registry(r.Context(), s.js)
	if err != nil {
		s.refuse(w, "Not collected", err, http.StatusServiceUnavailable)
		return
	}
	key, err := hosts.EnrolledKeys(r.Context(), host)
	if err != nil {
		s.refuse(w, "Not collected", err, http.StatusConflict)
		return
	}
	req := collector.CollectNowRequest{}
	if req.Nonce, err = collector.NewNonce(); err != nil {
		s.refuse(w, "Not collected", err, http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), collector.ControlTimeout+30*time.Second)
	defer cancel()
	c := Collected{Host: host}
	c.Key, c.Reply, err = collector.Ask(ctx, s.js.Conn(), host, req, key, func(_ string, why error) error {
		if len(c.Refused) == collector.MaxRefusals {
			c.More++
			return nil
		}
		c.Refused = append(c.Refused, binding.Clip(why.Error(), collector.MaxRefusalBytes+len("…"), "…"))
		return nil
	})
	switch {
	case errors.Is(err, collector.ErrNoCollector):
		s.refuse(w, "Not collected", err, http.StatusBadGateway)
		return
	case errors.Is(err, collector.ErrNoAuthenticReply):
		s.refuse(w, "Not collected", err, http.StatusGatewayTimeout)
		return
	case err != nil:
		s.refuse(w, "Not collected", err, http.StatusServiceUnavailable)
		return
	}
	s.render(w, "collected.html", c)
}
