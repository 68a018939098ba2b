package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/console"
)

// sse is an open event stream.
type sse struct {
	resp  *http.Response
	lines *bufio.Scanner
}

// event is one Server-Sent Event.
type event struct {
	id, name string
	data     console.LiveRow
}

func openEvents(t *testing.T, addr, session, path, lastID string) *sse {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: console.SessionCookie, Value: session})
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	return &sse{resp: resp, lines: bufio.NewScanner(resp.Body)}
}

// next reads the next event (keep-alive comments skipped).
func (s *sse) next(t *testing.T) event {
	t.Helper()
	var e event
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case line == "" && e.name != "":
			return e
		case strings.HasPrefix(line, "id: "):
			e.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			e.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &e.data))
		}
	}
	t.Fatalf("the stream ended: %v", s.lines.Err())
	return e
}

// until reads events until one for host and commit's row.
func (s *sse) until(t *testing.T, host, status string) event {
	t.Helper()
	for {
		e := s.next(t)
		if e.data.Host == host && e.data.Status == status {
			return e
		}
	}
}

var liveAfter = regexp.MustCompile(`data-live-after="(\d+)"`)

// A page names the revision it was rendered at; its event stream
// delivers every verdict stored after it (one stored between the render
// and the stream's start too), each with its bucket revision as id, and a
// stream resumed with Last-Event-ID delivers what was stored while it was
// closed, and nothing before.
func TestLiveUpdates(t *testing.T) {
	b := startFleet(t)
	b.collected(t, "web-1", snap("/srv/app", "a1"))
	_, base := startConsole(t, b)
	session := login(t, base)

	page := do(t, base, request{path: "/", session: session})
	require.Equal(t, http.StatusOK, page.code)
	m := liveAfter.FindStringSubmatch(page.body)
	require.NotNil(t, m, "the page names its revision")
	assert.Contains(t, page.body, `<script src="/assets/live.js" defer></script>`)
	assert.Contains(t, page.body, `<tr data-key="/target?host=web-1&amp;id=%2Fsrv%2Fapp&amp;kind=git.repository" data-status="ERROR">`)

	// Stored after the render, before the stream opens.
	b.collected(t, "web-2", snap("/srv/app", "b1"))
	stream := openEvents(t, base.Host, session, "/events?after="+m[1], "")
	first := stream.next(t)
	assert.Equal(t, "verdict", first.name)
	assert.Equal(t, console.LiveRow{Key: "/target?host=web-2&id=%2Fsrv%2Fapp&kind=git.repository", Host: "web-2", Kind: "git.repository",
		ID: "/srv/app", Status: "ERROR", Verdict: first.data.Verdict, Seen: first.data.Seen, Digest: first.data.Digest,
		Detail: first.data.Detail}, first.data)
	rev, err := strconv.ParseUint(first.id, 10, 64)
	require.NoError(t, err)
	after, _ := strconv.ParseUint(m[1], 10, 64)
	assert.Greater(t, rev, after)

	// Stored while the stream is open.
	b.collected(t, "web-3", snap("/srv/app", "c1"))
	third := stream.until(t, "web-3", "ERROR")

	// Closed, one stored meanwhile, resumed from the last id seen.
	require.NoError(t, stream.resp.Body.Close())
	b.collected(t, "web-4", snap("/srv/app", "d1"))
	resumed := openEvents(t, base.Host, session, "/events", third.id)
	e := resumed.next(t)
	assert.Equal(t, "web-4", e.data.Host, "the first event after the last one seen")

	// A stream without a revision to start from is refused; one without a
	// session too.
	resp := do(t, base, request{path: "/events", session: session})
	assert.Equal(t, http.StatusBadRequest, resp.code)
	resp = do(t, base, request{path: "/events?after=0"})
	assert.Equal(t, http.StatusUnauthorized, resp.code)
}

// Shutdown ends the open streams rather than waiting for them.
func TestLiveShutdown(t *testing.T) {
	b := startFleet(t)
	b.collected(t, "web-1", snap("/srv/app", "a1"))
	s, base := startConsole(t, b)
	session := login(t, base)
	stream := openEvents(t, base.Host, session, "/events?after=0", "")
	stream.next(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, s.Shutdown(ctx))
	assert.False(t, stream.lines.Scan(), "the stream ended")
}
