package console_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// A target's page approves exactly the snapshot it shows, by its digest,
// with the code of `baseline approve --digest`: adopted (the baseline and
// its baseline.changed event name the approver), or, when the host's
// evidence changed after the page was rendered, 409 naming both digests
// with the baseline unchanged; a snapshot that differs from the one shown
// only in its capture time is the one shown. A cross-site form changes
// nothing (403).
func TestApproveByDigest(t *testing.T) {
	b := startFleet(t)
	ctx := t.Context()
	target := events.Target{Kind: "git.repository", Identifier: "/srv/app"}
	baselines := verifier.NewBaselines(b.js, "")
	first := snap("/srv/app", "a1")
	b.collected(t, "web-1", first)
	_, err := baselines.Approve(ctx, target, verifier.ApproveOptions{Host: "web-1", Digest: digest(t, first), By: "test"})
	require.NoError(t, err)
	changed := b.js.Conn()
	announced, err := changed.SubscribeSync(events.FilterBaseline)
	require.NoError(t, err)

	_, base := startConsole(t, b)
	session := login(t, base)
	path := "/target?host=web-1&kind=git.repository&id=%2Fsrv%2Fapp"
	show := func() string {
		t.Helper()
		resp := do(t, base, request{path: path, session: session})
		require.Equal(t, http.StatusOK, resp.code, resp.body)
		return resp.body
	}
	approve := func(d string, header map[string]string) reply {
		t.Helper()
		return do(t, base, request{method: http.MethodPost, path: "/approve", session: session, header: header,
			form: url.Values{"host": {"web-1"}, "kind": {target.Kind}, "id": {target.Identifier}, "digest": {d}}})
	}
	current := func() string {
		t.Helper()
		bl, err := baselines.Get(ctx, target)
		require.NoError(t, err)
		return bl.Digest
	}

	// The page offers the snapshot it shows.
	second := snap("/srv/app", "b2")
	b.collected(t, "web-1", second)
	page := show()
	assert.Contains(t, page, `<input type="hidden" name="digest" value="`+digest(t, second)+`">`)

	// A cross-site form is refused before it is read.
	resp := approve(digest(t, second), map[string]string{"Sec-Fetch-Site": "cross-site"})
	assert.Equal(t, http.StatusForbidden, resp.code)
	assert.Equal(t, digest(t, first), current(), "nothing adopted")

	// Adopted, by the approver, and announced.
	resp = approve(digest(t, second), nil)
	require.Equal(t, http.StatusSeeOther, resp.code, resp.body)
	assert.Contains(t, resp.header.Get("Location"), "approved="+url.QueryEscape(digest(t, second)))
	bl, err := baselines.Get(ctx, target)
	require.NoError(t, err)
	assert.Equal(t, digest(t, second), bl.Digest)
	assert.Equal(t, "tester", bl.ApprovedBy)
	m, err := announced.NextMsg(10 * time.Second)
	require.NoError(t, err)
	e, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(t, err)
	var ev events.BaselineChanged
	require.NoError(t, e.DataAs(&ev))
	assert.Equal(t, events.BaselineChanged{Target: target, Change: events.BaselineUpdated, Digest: digest(t, second),
		PreviousDigest: digest(t, first), Actor: "tester"}, ev)
	assert.Equal(t, "/console/tester", e.Source())

	// Shown, then changed on the host: 409, both digests named, nothing
	// adopted.
	third := snap("/srv/app", "c3")
	b.collected(t, "web-1", third)
	show()
	fourth := snap("/srv/app", "d4")
	b.collected(t, "web-1", fourth)
	resp = approve(digest(t, third), nil)
	assert.Equal(t, http.StatusConflict, resp.code)
	assert.Contains(t, resp.body, digest(t, third))
	assert.Contains(t, resp.body, digest(t, fourth))
	assert.Equal(t, digest(t, second), current(), "nothing adopted")

	// Shown, then collected again unchanged (a new capture time, so a new
	// digest): the snapshot shown is adopted.
	show()
	again := snap("/srv/app", "d4")
	again.CapturedAt = snapshot.FormatTime(time.Now().UTC().Add(time.Minute))
	require.NotEqual(t, digest(t, fourth), digest(t, again))
	b.collected(t, "web-1", again)
	resp = approve(digest(t, fourth), nil)
	require.Equal(t, http.StatusSeeOther, resp.code, resp.body)
	assert.Equal(t, digest(t, fourth), current())
	assert.Contains(t, show(), "Baseline <code>"+digest(t, fourth)+"</code>, approved by tester")

	// What the form cannot name.
	for _, form := range []url.Values{
		{"host": {"web-1"}, "kind": {target.Kind}, "id": {target.Identifier}},
		{"host": {"web-1"}, "kind": {"a/b"}, "id": {"x"}, "digest": {digest(t, fourth)}},
	} {
		resp := do(t, base, request{method: http.MethodPost, path: "/approve", session: session, form: form})
		assert.Equal(t, http.StatusBadRequest, resp.code, form)
	}
	resp = do(t, base, request{method: http.MethodPost, path: "/approve", session: session,
		form: url.Values{"host": {"web-9"}, "kind": {target.Kind}, "id": {target.Identifier}, "digest": {digest(t, fourth)}}})
	assert.Equal(t, http.StatusNotFound, resp.code)
}

// A host's new key waits as pending (first use pinned the old one); the
// page shows it with its own form, which enrolls exactly that key, by
// the approver, and revokes the old one.
func TestApproveHostKey(t *testing.T) {
	b := startFleet(t)
	ctx := t.Context()
	b.collected(t, "web-1", snap("/srv/app", "a1"))
	old := b.signers["web-1"].KeyID()

	next := signtest.Random()
	p, err := events.NewEvidenceCollected("web-1", snap("/srv/app", "a2"), time.Minute)
	require.NoError(t, err)
	m, _, err := binding.NewMsg(events.Source("collector", "web-1"), p, binding.WithSigner(next))
	require.NoError(t, err)
	_, err = b.js.PublishMsg(ctx, m)
	require.NoError(t, err)

	_, base := startConsole(t, b)
	session := login(t, base)
	path := "/target?host=web-1&kind=git.repository&id=%2Fsrv%2Fapp"
	var page string
	require.Eventually(t, func() bool {
		resp := do(t, base, request{path: path, session: session})
		page = html.UnescapeString(resp.body)
		return resp.code == http.StatusOK && strings.Contains(page, next.KeyID()+"</code></td><td>pending")
	}, 30*time.Second, 20*time.Millisecond, "the pending key on the page")
	assert.Contains(t, page, `<input type="hidden" name="key" value="`+next.KeyID()+`">`)

	enroll := func(key string) reply {
		return do(t, base, request{method: http.MethodPost, path: "/host/approve", session: session,
			form: url.Values{"host": {"web-1"}, "key": {key}, "back": {path}}})
	}
	assert.Equal(t, http.StatusBadRequest, enroll("the pending one").code)
	resp := enroll(next.KeyID())
	require.Equal(t, http.StatusSeeOther, resp.code, resp.body)
	assert.Equal(t, path, resp.header.Get("Location"))
	page = html.UnescapeString(do(t, base, request{path: path, session: session}).body)
	for _, want := range []string{next.KeyID() + "</code></td><td>enrolled", old + "</code></td><td>revoked"} {
		assert.Contains(t, page, want)
	}
	assert.Contains(t, page, "<td>tester</td>")

	// The approval is announced, by its approver, for the audit chain.
	var approvals []events.HostKeyChanged
	for _, raw := range natstest.Stored(ctx, t, b.js, topology.StreamBaselines) {
		e, err := binding.FromNATS(raw.Header, raw.Data)
		require.NoError(t, err)
		if e.Source() != "/console/tester" {
			continue
		}
		c, err := binding.Decode[events.HostKeyChanged](e)
		require.NoError(t, err)
		approvals = append(approvals, c)
	}
	require.Len(t, approvals, 1)
	assert.Equal(t, events.HostKeyChanged{Host: "web-1", Actor: "tester", Keys: []events.KeyChange{
		{Key: old, State: events.KeyRevoked, Previous: events.KeyEnrolled},
		{Key: next.KeyID(), State: events.KeyEnrolled, Previous: events.KeyPending},
	}}, approvals[0])
}

// Collect now needs an enrolled key of the host to check the reply with:
// a host the registry does not hold is refused before anything is sent.
func TestCollectNowNeedsAnEnrolledHost(t *testing.T) {
	b := startFleet(t)
	b.collected(t, "web-1", snap("/srv/app", "a1"))
	_, base := startConsole(t, b)
	session := login(t, base)
	resp := do(t, base, request{method: http.MethodPost, path: "/host/collect", session: session, form: url.Values{"host": {"nowhere"}}})
	assert.Equal(t, http.StatusConflict, resp.code)
	assert.Contains(t, resp.body, "host nowhere is not enrolled")
	resp = do(t, base, request{method: http.MethodPost, path: "/host/collect", session: session, form: url.Values{"host": {"web-1"}}})
	assert.Equal(t, http.StatusBadGateway, resp.code, "no collector runs here")
	assert.Contains(t, resp.body, "no collector is listening")
}
