package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/console"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// browserAs is a client with its own cookies that signs in to the console
// at base through the mock provider as user (its login followed through
// the redirects), and returns what the console's page said.
func browserAs(t *testing.T, m *mockoidc.MockOIDC, base string, user *mockoidc.MockUser) (*http.Client, int, string) {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar}
	m.QueueUser(user)
	resp, err := c.Get(base + "/")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	return c, resp.StatusCode, string(body)
}

// Behind OIDC (runtimetruth console for a deployment), a page sends the
// browser through the provider's login; a user of the viewer group views
// and gets 403 on approve, a user of the approver group approves (the
// baseline records them), a user of neither group gets no session (403),
// and a request with no session is refused (401).
func TestOIDCRoles(t *testing.T) {
	m, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })
	cfg := m.Config()

	b := startFleet(t)
	first := snap("/srv/app", "a1")
	b.collected(t, "web-1", first)
	s, err := console.New(console.Config{Listen: "127.0.0.1:0", OIDC: &console.OIDCConfig{
		Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		ViewerGroups: []string{"rt-viewers"}, ApproverGroups: []string{"rt-approvers"},
	}}, b.js, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	base := strings.TrimSuffix(s.URL(), "/")
	require.NotContains(t, base, "token=")

	form := url.Values{"host": {"web-1"}, "kind": {"git.repository"}, "id": {"/srv/app"}, "digest": {digest(t, first)}}
	target := events.Target{Kind: "git.repository", Identifier: "/srv/app"}

	resp, err := http.PostForm(base+"/approve", form)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no session")

	viewer, code, page := browserAs(t, m, base, &mockoidc.MockUser{Subject: "v1", Email: "viewer@example.com", Groups: []string{"rt-viewers"}})
	require.Equal(t, http.StatusOK, code, page)
	assert.Contains(t, page, "/srv/app")
	target1, err := viewer.Get(base + "/target?host=web-1&kind=git.repository&id=%2Fsrv%2Fapp")
	require.NoError(t, err)
	body, _ := io.ReadAll(target1.Body)
	_ = target1.Body.Close()
	assert.Contains(t, string(body), "You may view; approving needs the approver role.")
	assert.NotContains(t, string(body), `action="/approve"`)
	resp, err = viewer.PostForm(base+"/approve", form)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a viewer approves nothing")
	_, err = verifier.NewBaselines(b.js, "").Get(t.Context(), target)
	require.ErrorIs(t, err, verifier.ErrNoBaseline)

	_, code, page = browserAs(t, m, base, &mockoidc.MockUser{Subject: "x1", Email: "other@example.com", Groups: []string{"sales"}})
	assert.Equal(t, http.StatusForbidden, code, page)
	assert.Contains(t, page, "not in a group that may use the console")

	approver, code, page := browserAs(t, m, base, &mockoidc.MockUser{Subject: "a1", Email: "approver@example.com", Groups: []string{"rt-approvers"}})
	require.Equal(t, http.StatusOK, code, page)
	resp, err = approver.PostForm(base+"/approve", form)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "approved, and sent on to the target's page")
	bl, err := verifier.NewBaselines(b.js, "").Get(t.Context(), target)
	require.NoError(t, err)
	assert.Equal(t, digest(t, first), bl.Digest)
	assert.Equal(t, "approver@example.com", bl.ApprovedBy)
}

// API tokens, for automation beside the OIDC sessions: only their SHA-256
// is configured; a viewer token reads and may not approve (403), an
// approver token approves (recorded as token:<name>), any other token is
// refused (401) and never falls back to the login.
func TestAPITokens(t *testing.T) {
	m, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })
	cfg := m.Config()
	b := startFleet(t)
	first := snap("/srv/app", "a1")
	b.collected(t, "web-1", first)

	reader, readerLine, err := console.NewAPIToken("dashboard", console.ScopeViewer)
	require.NoError(t, err)
	deployer, deployerLine, err := console.NewAPIToken("deploy-bot", console.ScopeApprover)
	require.NoError(t, err)
	assert.NotContains(t, readerLine+deployerLine, reader, "the file holds no token")
	tokens, err := console.ParseAPITokens([]byte("# tokens\n" + readerLine + "\n\n" + deployerLine + "\n"))
	require.NoError(t, err)
	require.Len(t, tokens, 2)

	s, err := console.New(console.Config{Listen: "127.0.0.1:0", APITokens: tokens, OIDC: &console.OIDCConfig{
		Issuer: cfg.Issuer, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, ApproverGroups: []string{"rt-approvers"},
	}}, b.js, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	require.NoError(t, err)
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
	base := strings.TrimSuffix(s.URL(), "/")
	call := func(method, path, token string, form url.Values) int {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequestWithContext(t.Context(), method, base+path, body)
		require.NoError(t, err)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := noRedirects.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	form := url.Values{"host": {"web-1"}, "kind": {"git.repository"}, "id": {"/srv/app"}, "digest": {digest(t, first)}}
	target := events.Target{Kind: "git.repository", Identifier: "/srv/app"}

	assert.Equal(t, http.StatusOK, call(http.MethodGet, "/", reader, nil))
	assert.Equal(t, http.StatusForbidden, call(http.MethodPost, "/approve", reader, form))
	assert.Equal(t, http.StatusUnauthorized, call(http.MethodGet, "/", reader+"x", nil), "a token not accepted")
	assert.Equal(t, http.StatusUnauthorized, call(http.MethodPost, "/approve", "rtc_forged", form))
	_, err = verifier.NewBaselines(b.js, "").Get(t.Context(), target)
	require.ErrorIs(t, err, verifier.ErrNoBaseline)

	assert.Equal(t, http.StatusSeeOther, call(http.MethodPost, "/approve", deployer, form))
	bl, err := verifier.NewBaselines(b.js, "").Get(t.Context(), target)
	require.NoError(t, err)
	assert.Equal(t, "token:deploy-bot", bl.ApprovedBy)

	for _, bad := range []string{
		"bot superuser sha256:" + strings.Repeat("a", 64),
		"bot viewer sha256:abc",
		"bot viewer " + strings.Repeat("a", 64),
		"b/t viewer sha256:" + strings.Repeat("a", 64),
		"bot viewer sha256:" + strings.Repeat("a", 64) + "\nbot approver sha256:" + strings.Repeat("b", 64),
	} {
		_, err := console.ParseAPITokens([]byte(bad))
		assert.ErrorIs(t, err, console.ErrTokens, bad)
	}
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
