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
