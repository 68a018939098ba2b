package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/console"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
)

// auditFixture writes an audit log of the fixture mix on two hosts, a
// runnable.modified of web-1, a baseline change and a host key approved
// through a console, sealed as the auditor seals them, and returns its path.
func auditFixture(t *testing.T) string {
	t.Helper()
	h := chain.NewHasher(nil)
	chains := auditortest.NewChains(h, events.Source("auditor", "fixture"))
	seqs := map[string]uint64{}
	var buf bytes.Buffer
	seal := func(i int, source string, p events.Payload) {
		m, _, err := binding.NewMsg(source, p, binding.WithID(fmt.Sprintf("01930000-0000-7000-8000-%012d", i)),
			binding.WithTime(auditortest.Time.Add(time.Duration(i)*time.Minute)))
		require.NoError(t, err)
		stream := auditortest.StreamOf(m.Subject)
		seqs[stream]++
		msg := auditortest.Message(t, stream, seqs[stream], m)
		msg.Stored = auditortest.Time.Add(time.Duration(i) * time.Minute)
		r := chains.Seal(t, msg)
		buf.Write(r.Line)
		buf.WriteByte('\n')
	}
	for i := range 30 {
		seal(i, events.Source("test", "fixture"), auditortest.Payload(t, []string{"web-1", "web-2"}, i))
	}
	seal(30, events.Source("collector", "web-1"), auditortest.Modified("web-1", 30))
	seal(31, events.Source("console", "tester"), events.BaselineChanged{Target: auditortest.Target(1), Change: events.BaselineUpdated,
		Digest: auditortest.Digest("new"), PreviousDigest: auditortest.Digest("old"), Actor: "tester"})
	seal(32, events.Source("console", "tester"), events.HostKeyChanged{Host: "web-1", Actor: "tester", Keys: []events.KeyChange{
		{Key: signtest.KeyID("web-1"), State: events.KeyEnrolled, Previous: events.KeyPending},
		{Key: signtest.KeyID("web-1-old"), State: events.KeyRevoked, Previous: events.KeyEnrolled},
	}})
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o600))
	return path
}

// verifyJSON is `runtimetruth audit verify --jsonl path --json`.
func verifyJSON(t *testing.T, path string) (status string, links int, broken map[string]any) {
	t.Helper()
	var out, errs bytes.Buffer
	cli.Run(t.Context(), cli.IO{In: strings.NewReader(""), Out: &out, Err: &errs}, "test", []string{"audit", "verify", "--jsonl", path, "--json"})
	var rep struct {
		Status string         `json:"status"`
		Links  int            `json:"links"`
		Broken map[string]any `json:"broken"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), errs.String())
	return rep.Status, rep.Links, rep.Broken
}

// The audit page lists the chain's links, newest first, filtered by host,
// target, event type, actor and time, under the chains' status as `audit
// verify` computes it from the same log: intact, then, once a link is
// changed, broken at the link audit verify names. The integrity page
// lists the runnable.modified links with their changed files.
func TestAuditPages(t *testing.T) {
	path := auditFixture(t)
	b := startFleet(t)
	s, err := console.New(console.Config{Listen: "127.0.0.1:0", Approver: "tester", Audit: &console.AuditLog{Path: path}}, b.js,
		slog.New(slog.NewTextHandler(os.Stderr, nil)))
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	base, err := url.Parse(s.URL())
	require.NoError(t, err)
	session := login(t, base)
	get := func(path string) string {
		t.Helper()
		resp := do(t, base, request{path: path, session: session})
		require.Equal(t, http.StatusOK, resp.code, resp.body)
		return html.UnescapeString(resp.body)
	}

	status, links, _ := verifyJSON(t, path)
	require.Equal(t, "intact", status)
	all := get("/audit")
	assert.Contains(t, all, fmt.Sprintf("INTACT</span> %d links in", links))
	assert.Contains(t, all, fmt.Sprintf("%d matching links", links))
	assert.Less(t, strings.Index(all, "baseline.changed"), strings.Index(all, "runnable.modified"), "newest first")

	web1 := get("/audit?host=web-1")
	assert.Contains(t, web1, "<td>web-1</td>")
	assert.NotContains(t, web1, "<td>web-2</td>")
	actor := get("/audit?actor=%2Fconsole%2F")
	assert.Contains(t, actor, "2 matching links,")
	assert.Contains(t, actor, "/console/tester")
	// What each approval changed, beside its type.
	assert.Contains(t, actor, "updated "+auditortest.Digest("new")+" by tester")
	assert.Contains(t, actor, signtest.KeyID("web-1")+" pending → enrolled; "+signtest.KeyID("web-1-old")+" enrolled → revoked by tester")
	keys := get("/audit?type=host.key&host=web-1")
	assert.Contains(t, keys, "1 matching link,")
	assert.Contains(t, keys, "host.key.changed.v1")
	typ := get("/audit?type=runnable.modified")
	assert.Contains(t, typ, "runnable.modified")
	assert.NotContains(t, typ, "baseline.changed")
	late := get("/audit?since=" + url.QueryEscape(auditortest.Time.Add(32*time.Minute).UTC().Format("2006-01-02T15:04")))
	assert.Contains(t, late, "1 matching link,")
	early := get("/audit?until=" + url.QueryEscape(auditortest.Time.Add(time.Minute).UTC().Format(time.RFC3339)))
	assert.Contains(t, early, "1 matching link,")
	assert.Equal(t, http.StatusBadRequest, do(t, base, request{path: "/audit?since=yesterday", session: session}).code)

	integrity := get("/integrity")
	assert.Contains(t, integrity, `<span class="badge DRIFT">modified</span> runspec_linux 0.20.30`)
	assert.Contains(t, integrity, "<code>runspec_linux/files.py</code> modified")
	assert.NotContains(t, integrity, "baseline.changed")

	// A link changed: broken, where audit verify says.
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := bytes.Split(raw, []byte("\n"))
	lines[10] = bytes.Replace(lines[10], []byte(`"web-`), []byte(`"wEb-`), 1)
	require.NoError(t, os.WriteFile(path, bytes.Join(lines, []byte("\n")), 0o600))
	status, _, broken := verifyJSON(t, path)
	require.Equal(t, "broken", status)
	page := get("/audit")
	assert.Contains(t, page, `<span class="badge ERROR">broken</span>`)
	assert.Contains(t, page, fmt.Sprintf("chain %q seq %v: %s: %s", broken["chain"], broken["seq"], broken["reason"], broken["detail"]))
}
