package deployed_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// console: runtimetruth console runs as the console's NATS user, behind
// an OpenID Connect login (a mock provider in the harness): a viewer sees
// web's drift on the fleet and target pages and may not approve (403); an
// approver approves the drifted snapshot the target page shows (the
// baselines bucket, read as the operator, holds its digest and the
// approver, and web passes again), enrolls a new host's key by its id,
// and asks web's collector to collect
// now (the reply signed by web's enrolled key). Everything it did went
// through the console's own permissions.
func (p *pipeline) console() {
	t := p.t
	m, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })
	secret := filepath.Join(p.dir, "oidc-client-secret")
	require.NoError(t, os.WriteFile(secret, []byte(m.Config().ClientSecret+"\n"), 0o600))
	proc := startProc(t, p.log, "console", bins.cli, environ(p.home), append([]string{"console", "--listen", "127.0.0.1:0",
		"--oidc-issuer", m.Issuer(), "--oidc-client-id", m.Config().ClientID, "--oidc-client-secret-file", secret,
		"--viewer-group", "rt-viewers", "--approver-group", "rt-approvers"}, p.flags(idConsole)...)...)
	line := regexp.MustCompile(`(?m)^console: (http://127\.0\.0\.1:\d+)/$`)
	var base string
	natstest.CheckFor(t, deadline, poll, func() error {
		require.False(t, proc.exited(), "the console exited")
		proc.out.mu.Lock()
		found := line.FindStringSubmatch(proc.out.all.String())
		proc.out.mu.Unlock()
		if found == nil {
			return errors.New("no console line yet")
		}
		base = found[1]
		return nil
	})
	target, err := events.ParseTarget(p.target)
	require.NoError(t, err)
	page := url.Values{"host": {web}, "kind": {target.Kind}, "id": {target.Identifier}}

	viewer := signIn(t, m, base, &mockoidc.MockUser{Subject: "v", Email: "viewer@example.com", Groups: []string{"rt-viewers"}})
	fleet := get(t, viewer, base+"/?host=web")
	assert.Contains(t, fleet, web)
	assert.Contains(t, fleet, `<span class="badge DRIFT">DRIFT</span>`)
	assert.Contains(t, get(t, viewer, base+"/target?"+page.Encode()), "You may view; approving needs the approver role.")
	resp, err := viewer.PostForm(base+"/approve", url.Values{"host": {web}, "kind": {target.Kind}, "id": {target.Identifier}, "digest": {"sha256:" + strings.Repeat("0", 64)}})
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "a viewer approves nothing")

	approver := signIn(t, m, base, &mockoidc.MockUser{Subject: "a", Email: "approver@example.com", Groups: []string{"rt-approvers"}})
	shown := regexp.MustCompile(`name="digest" value="(sha256:[0-9a-f]{64})"`).FindStringSubmatch(get(t, approver, base+"/target?"+page.Encode()))
	require.NotNil(t, shown, "the target page offers its snapshot")
	form := url.Values{"host": {web}, "kind": {target.Kind}, "id": {target.Identifier}, "digest": {shown[1]}}
	approved := post(t, approver, base+"/approve", form)
	assert.Contains(t, approved, "Approved: <code>"+shown[1]+"</code>")
	b, err := verifier.NewBaselines(p.js, "").Get(t.Context(), target)
	require.NoError(t, err)
	assert.Equal(t, shown[1], b.Digest, "exactly the digest shown")
	assert.Equal(t, "approver@example.com", b.ApprovedBy)
	p.waitRecord(web, "PASS after the console's approval", signedWith(p.key, events.StatusPass))

	// A host's key, named by the approver before its first evidence:
	// enrolled, and announced for the audit chain (audit).
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	p.consoleKey = dsse.KeyID(pub)
	post(t, approver, base+"/host/approve", url.Values{"host": {late}, "key": {p.consoleKey}})
	assert.Equal(t, events.KeyEnrolled, p.host(late).KeyOf(p.consoleKey).State)
	assert.Equal(t, "approver@example.com", p.host(late).KeyOf(p.consoleKey).By)

	collected := post(t, approver, base+"/host/collect", url.Values{"host": {web}})
	assert.Contains(t, collected, "by its enrolled key <code>"+p.key+"</code>")
	assert.Regexp(t, `<tr><td>collected</td>`, collected)
	assert.Equal(t, 0, proc.stop(), "the console stops cleanly")
	assert.NotContains(t, strings.ToLower(proc.out.String()), "permissions violation")

	// The README committed: web drifts from the baseline approved here
	// (dirty no more), as the steps after this one expect it to.
	cmd := exec.Command("git", "-C", p.repo, "-c", "user.name=deployed", "-c", "user.email=deployed@example.com", "commit", "-q", "-am", "readme")
	cmd.Env = environ(p.home)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	p.waitRecord(web, "DRIFT after the commit", signedWith(p.key, events.StatusDrift))
}

// signIn is a client with its own cookies, signed in to the console at
// base as user through the mock provider.
func signIn(t require.TestingT, m *mockoidc.MockOIDC, base string, user *mockoidc.MockUser) *http.Client {
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	c := &http.Client{Jar: jar, Transport: &http.Transport{DisableKeepAlives: true}}
	m.QueueUser(user)
	resp, err := c.Get(base + "/")
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "signed in as %s", user.Email)
	return c
}

// get is a page's body (unescaped), which must be 200.
func get(t require.TestingT, c *http.Client, u string) string {
	resp, err := c.Get(u)
	require.NoError(t, err)
	return body(t, resp)
}

// post posts a form, follows the redirect, and returns the final page.
func post(t require.TestingT, c *http.Client, u string, form url.Values) string {
	resp, err := c.PostForm(u, form)
	require.NoError(t, err)
	return body(t, resp)
}

func body(t require.TestingT, resp *http.Response) string {
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return html.UnescapeString(string(b))
}
