package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// Live updates: GET /events is a stream of Server-Sent Events, one
// "verdict" event per verdict record stored (the verifiers' key-value
// bucket watched from a revision), its id the record's bucket revision.
// A page names the revision it was rendered at (?after=N), and a browser
// that reconnects sends the last id it saw (Last-Event-ID), so the stream
// resumes after it and misses nothing. live.js applies the events to the
// page.

// keepAlive is how often an idle stream carries a comment, so that a
// proxy or the browser does not take it for dead.
const keepAlive = 15 * time.Second

// liveWrite bounds one event's write: a client that reads nothing for
// that long is let go (its browser reconnects and resumes).
const liveWrite = 10 * time.Second

// LiveRow is a "verdict" event's data: the fleet row a verdict record
// makes (its Key is the row's target page, which names it on the page).
type LiveRow struct {
	Key     string `json:"key"`
	Host    string `json:"host"`
	Kind    string `json:"kind"`
	ID      string `json:"id"`
	Status  string `json:"status"`
	Verdict string `json:"verdict"`
	Seen    string `json:"seen"`
	Digest  string `json:"digest"`
	Detail  string `json:"detail"`
}

// live serves GET /events.
func (s *Server) live(w http.ResponseWriter, r *http.Request) {
	after, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
	if err != nil {
		after, err = strconv.ParseUint(r.URL.Query().Get("after"), 10, 64)
	}
	if err != nil {
		http.Error(w, "name the revision the page was rendered at (after=N) or the last event's id (Last-Event-ID)", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.stopping, cancel)
	defer stop()
	updates, err := verifier.NewStatus(s.js).Watch(ctx, after)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// No verifier has stored a verdict yet: the browser retries.
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = fmt.Fprintf(w, "retry: 2000\n\n")
		return
	}
	if err != nil {
		s.log.Warn("console: live", "err", err)
		http.Error(w, "the verifier's records cannot be read now", http.StatusServiceUnavailable)
		return
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		var msg []byte
		select {
		case u, ok := <-updates:
			if !ok {
				return
			}
			msg = liveEvent(u)
		case <-tick.C:
			msg = []byte(": keep-alive\n\n")
		}
		_ = rc.SetWriteDeadline(time.Now().Add(liveWrite))
		if _, err := w.Write(msg); err != nil || rc.Flush() != nil {
			return
		}
	}
}

// liveEvent is the "verdict" event of u.
func liveEvent(u verifier.VerdictUpdate) []byte {
	row := rowOf(u.Record)
	data, _ := json.Marshal(LiveRow{ // strings and times only: never fails
		Key: targetURL(row), Host: row.Host, Kind: row.Target.Kind, ID: row.Target.Identifier,
		Status: row.Status, Verdict: row.Verdict.UTC().Format(time.RFC3339), Seen: row.Seen.UTC().Format(time.RFC3339),
		Digest: row.Digest, Detail: row.Detail,
	})
	return fmt.Appendf(nil, "id: %d\nevent: verdict\ndata: %s\n\n", u.Revision, data)
}
