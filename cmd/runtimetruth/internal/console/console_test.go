package console_test

import (
	"cmp"
	"context"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/console"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// fleetBus is an embedded JetStream server with a verifier (first-use
// enrollment: each host's first key is pinned) judging what the tests
// publish.
type fleetBus struct {
	js      jetstream.JetStream
	signers map[string]*dsse.Signer
}

func startFleet(t testing.TB) *fleetBus { return startFleetTrusting(t, nil) }

// startFleetTrusting is startFleet's, its verifier checking attestations
// against trusted.
func startFleetTrusting(t testing.TB, trusted root.TrustedMaterial) *fleetBus {
	t.Helper()
	_, u := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, u)
	cfg := verifier.NewDefaultConfig()
	cfg.Instance = "test"
	cfg.Enrollment = string(verifier.EnrollFirstUse)
	v, err := verifier.New(cfg, verifier.Settings{Conn: nc, TrustedMaterial: trusted})
	require.NoError(t, err)
	require.NoError(t, v.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, v.Shutdown(ctx))
	})
	return &fleetBus{js: js, signers: map[string]*dsse.Signer{}}
}

// snap is a git repository's snapshot with one field.
func snap(repo, commit string) *snapshot.Snapshot {
	return snapshot.New(snapshot.Target{Kind: "git.repository", Identifier: repo}, snapshot.Record{
		Plane: snapshot.Resolved, Kind: "git.repository", Source: snapshot.Source{Collector: "git", Method: "test"},
		Data: snapshot.Data{"commit": snapshot.String(commit)},
	})
}

// collected publishes s as collected on host, signed by host's key, and
// waits for its verdict.
func (b *fleetBus) collected(t *testing.T, host string, s *snapshot.Snapshot) {
	t.Helper()
	sg, ok := b.signers[host]
	if !ok {
		sg = signtest.Random()
		b.signers[host] = sg
	}
	p, err := events.NewEvidenceCollected(host, s, time.Minute)
	require.NoError(t, err)
	m, _, err := binding.NewMsg(events.Source("collector", host), p, binding.WithSigner(sg))
	require.NoError(t, err)
	_, err = b.js.PublishMsg(t.Context(), m)
	require.NoError(t, err)
	target := events.Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		r, err := verifier.NewStatus(b.js).Get(t.Context(), host, target)
		if err != nil {
			return err
		}
		if r.Verdict.SnapshotDigest != p.Digest {
			return fmt.Errorf("verdict of %s, not %s yet", r.Verdict.SnapshotDigest, p.Digest)
		}
		return nil
	})
}

// startConsole starts a console over b and returns it with its URL.
func startConsole(t testing.TB, b *fleetBus) (*console.Server, *url.URL) {
	t.Helper()
	s, err := console.New(console.Config{Listen: "127.0.0.1:0", Approver: "tester"}, b.js, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	u, err := url.Parse(s.URL())
	require.NoError(t, err)
	return s, u
}

// client does not follow redirects and keeps no cookies: each request
// says what it carries.
var client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type request struct {
	method, path, host string
	session            string
	header             map[string]string
	// form, when set, is posted as the body.
	form url.Values
}

// reply is what a request got back.
type reply struct {
	code    int
	header  http.Header
	cookies []*http.Cookie
	body    string
}

func do(t testing.TB, base *url.URL, r request) reply {
	t.Helper()
	var body io.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	}
	req, err := http.NewRequestWithContext(t.Context(), cmp.Or(r.method, http.MethodGet), "http://"+base.Host+r.path, body)
	require.NoError(t, err)
	if r.form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if r.host != "" {
		req.Host = r.host
	}
	if r.session != "" {
		req.AddCookie(&http.Cookie{Name: console.SessionCookie, Value: r.session})
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return reply{code: resp.StatusCode, header: resp.Header, cookies: resp.Cookies(), body: string(got)}
}

// login swaps the console's launch token for a session.
func login(t testing.TB, base *url.URL) string {
	t.Helper()
	resp := do(t, base, request{path: "/?" + base.RawQuery})
	require.Equal(t, http.StatusSeeOther, resp.code)
	for _, c := range resp.cookies {
		if c.Name == console.SessionCookie {
			return c.Value
		}
	}
	t.Fatal("no session cookie")
	return ""
}

// On loopback the console opens a session once, for the launch token, and
// refuses every request without it (401), to another Host (421, DNS
// rebinding) and, for an unsafe method, from another site (403); every
// response forbids framing.
func TestLoopbackGuard(t *testing.T) {
	b := startFleet(t)
	_, base := startConsole(t, b)
	token := base.Query().Get("token")
	require.NotEmpty(t, token)

	resp := do(t, base, request{path: "/"})
	assert.Equal(t, http.StatusUnauthorized, resp.code, "no session")
	assert.Equal(t, "default-src 'self'; frame-ancestors 'none'", resp.header.Get("Content-Security-Policy"))
	resp = do(t, base, request{path: "/?token=" + url.QueryEscape(token+"x")})
	assert.Equal(t, http.StatusUnauthorized, resp.code, "a wrong token")
	resp = do(t, base, request{path: "/?token=" + url.QueryEscape(token), host: "rebound.example:" + base.Port()})
	assert.Equal(t, http.StatusMisdirectedRequest, resp.code, "the token on a rebinding Host")

	resp = do(t, base, request{path: "//elsewhere.example/?token=" + url.QueryEscape(token)})
	require.Equal(t, http.StatusSeeOther, resp.code)
	assert.Equal(t, "/", resp.header.Get("Location"), "the token leaves the address bar, and the browser stays")
	var session *http.Cookie
	for _, c := range resp.cookies {
		if c.Name == console.SessionCookie {
			session = c
		}
	}
	require.NotNil(t, session)
	assert.True(t, session.HttpOnly)
	assert.Equal(t, http.SameSiteStrictMode, session.SameSite)

	resp = do(t, base, request{path: "/?token=" + url.QueryEscape(token)})
	assert.Equal(t, http.StatusUnauthorized, resp.code, "the token a second time")

	for _, tc := range []struct {
		name string
		r    request
		want int
	}{
		{"the session", request{path: "/"}, http.StatusOK},
		{"localhost", request{path: "/", host: "localhost:" + base.Port()}, http.StatusOK},
		{"[::1]", request{path: "/", host: "[::1]:" + base.Port()}, http.StatusOK},
		{"a rebinding Host", request{path: "/", host: "rebound.example:" + base.Port()}, http.StatusMisdirectedRequest},
		{"another port", request{path: "/", host: "127.0.0.1:1"}, http.StatusMisdirectedRequest},
		{"a forged session", request{path: "/", session: "forged"}, http.StatusUnauthorized},
		{"a cross-site form", request{method: http.MethodPost, path: "/", header: map[string]string{"Sec-Fetch-Site": "cross-site"}}, http.StatusForbidden},
		{"a cross-origin form", request{method: http.MethodPost, path: "/", header: map[string]string{"Origin": "http://attacker.example"}}, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.r.session == "" {
				tc.r.session = session.Value
			}
			resp := do(t, base, tc.r)
			assert.Equal(t, tc.want, resp.code)
			assert.Equal(t, "default-src 'self'; frame-ancestors 'none'", resp.header.Get("Content-Security-Policy"))
		})
	}
}

// The fleet page lists every host and target with its latest verdict,
// the host's key state and the digest to approve, filters by status, host
// and kind, and pages server-side.
func TestFleetPage(t *testing.T) {
	b := startFleet(t)
	ctx := t.Context()
	baselines := verifier.NewBaselines(b.js, "")
	first := snap("/srv/app", "a1")
	b.collected(t, "web-1", first)
	target := events.Target{Kind: "git.repository", Identifier: "/srv/app"}
	_, err := baselines.Approve(ctx, target, verifier.ApproveOptions{Host: "web-1", Digest: digest(t, first), By: "test"})
	require.NoError(t, err)
	b.collected(t, "web-1", snap("/srv/app", "a1"))
	drifted := snap("/srv/app", "b2")
	b.collected(t, "web-2", drifted)
	for i := range console.PageSize + 3 {
		b.collected(t, "batch", snap(fmt.Sprintf("/srv/job-%02d", i), "c"))
	}

	_, base := startConsole(t, b)
	session := login(t, base)
	page := func(path string) string {
		t.Helper()
		resp := do(t, base, request{path: path, session: session})
		require.Equal(t, http.StatusOK, resp.code, resp.body)
		return resp.body
	}

	all := page("/")
	assert.Contains(t, all, fmt.Sprintf("%d host and target pairs, page 1 of 2", console.PageSize+5))
	assert.Contains(t, all, `<a class="badge PASS" href="/?status=PASS">PASS <span data-count="PASS">1</span></a>`)
	assert.Contains(t, all, `<a class="badge DRIFT" href="/?status=DRIFT">DRIFT <span data-count="DRIFT">1</span></a>`)
	assert.Contains(t, all, `href="/?page=2"`)

	drift := page("/?status=DRIFT")
	assert.Contains(t, drift, "1 host and target pair<")
	assert.Contains(t, drift, "web-2")
	assert.NotContains(t, drift, ">web-1<")
	assert.Contains(t, drift, digest(t, drifted)[:19], "the digest to approve")
	assert.Contains(t, drift, "1 change(s), first git.repository.commit")
	assert.Contains(t, drift, "enrolled", "first use pinned the host's key")

	pass := page("/?status=PASS&host=web")
	assert.Contains(t, pass, ">web-1<")
	assert.NotContains(t, pass, "web-2")

	second := page("/?page=2")
	assert.Contains(t, second, "page 2 of 2")
	assert.Contains(t, second, `rel="prev" href="/"`)
	assert.Equal(t, 5, strings.Count(second, "<tr data-key="), "the rows past the first page")

	none := page("/?kind=systemd.unit")
	assert.Contains(t, none, "No host and target matches these filters.")
}

func digest(t *testing.T, s *snapshot.Snapshot) string {
	t.Helper()
	d, err := s.Digest()
	require.NoError(t, err)
	return d
}

// A target's page shows its drift field by field as `verify --json`
// reports it (the report the diff and report packages make of the
// baseline and the snapshot), and the host's latest evidence.
func TestTargetPage(t *testing.T) {
	b := startFleet(t)
	ctx := t.Context()
	first := snap("/srv/app", "a1")
	b.collected(t, "web-1", first)
	target := events.Target{Kind: "git.repository", Identifier: "/srv/app"}
	_, err := verifier.NewBaselines(b.js, "").Approve(ctx, target, verifier.ApproveOptions{Host: "web-1", Digest: digest(t, first), By: "test"})
	require.NoError(t, err)
	drifted := snapshot.New(first.Target, first.Evidence[0], snapshot.Record{
		Plane: snapshot.Live, Kind: "git.remotes", Source: snapshot.Source{Collector: "git", Method: "test"},
		Data: snapshot.Data{"origin": snapshot.String("https://example.com/<app>.git")},
	})
	drifted.Evidence[0].Data = snapshot.Data{"commit": snapshot.String("b2"), "branch": snapshot.String("main")}
	b.collected(t, "web-2", drifted)

	_, base := startConsole(t, b)
	session := login(t, base)
	resp := do(t, base, request{path: "/target?host=web-2&kind=git.repository&id=%2Fsrv%2Fapp", session: session})
	require.Equal(t, http.StatusOK, resp.code, resp.body)
	page := resp.body

	res, err := diff.Verify(first, drifted, nil)
	require.NoError(t, err)
	want := report.New(res, nil)
	require.NotEmpty(t, want.Changes)
	for _, c := range want.Changes {
		if len(c.Fields) == 0 {
			assert.Contains(t, page, fmt.Sprintf("<tr><td>%s</td><td>%s</td><td></td>", c.Kind, c.Status))
		}
		for _, f := range c.Fields {
			side := func(s report.Side) string {
				if !s.Present {
					return "(absent)"
				}
				return html.EscapeString(s.Value.String())
			}
			assert.Contains(t, page, fmt.Sprintf("<tr><td>%s</td><td>%s</td><td>%s</td><td><code>%s</code></td><td><code>%s</code></td></tr>",
				c.Kind, c.Status, f.Field, side(f.Before), side(f.After)), "the change of %s.%s", c.Kind, f.Field)
		}
	}
	assert.Contains(t, page, digest(t, drifted), "the snapshot to approve")
	assert.Contains(t, page, "<dt>origin</dt><dd><code>https://example.com/&lt;app&gt;.git</code></dd>", "the latest evidence, escaped")

	resp = do(t, base, request{path: "/target?host=web-3&kind=git.repository&id=%2Fsrv%2Fapp", session: session})
	assert.Equal(t, http.StatusNotFound, resp.code)
}
