package console_test

import (
	"context"
	"html"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/attestor"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// A target's page shows its baseline's signature: not signed; then, for a
// baseline that requires a signer, the stored attestation (its signer,
// issuer and transparency log index) and the verifier's check of it,
// here failed (the test's verifier trusts no Sigstore root), with why.
func TestSignatureStatus(t *testing.T) {
	b := startFleet(t)
	ctx := t.Context()
	target := events.Target{Kind: "git.repository", Identifier: "/srv/app"}
	baselines := verifier.NewBaselines(b.js, "")
	first := snap("/srv/app", "a1")
	b.collected(t, "web-1", first)
	_, err := baselines.Approve(ctx, target, verifier.ApproveOptions{Host: "web-1", Digest: digest(t, first), By: "test"})
	require.NoError(t, err)
	b.collected(t, "web-1", snap("/srv/app", "a1"))

	_, base := startConsole(t, b)
	session := login(t, base)
	path := "/target?host=web-1&kind=git.repository&id=%2Fsrv%2Fapp"
	show := func() string {
		t.Helper()
		resp := do(t, base, request{path: path, session: session})
		require.Equal(t, http.StatusOK, resp.code, resp.body)
		return html.UnescapeString(resp.body)
	}
	assert.Contains(t, show(), "<dt>Signature</dt><dd>not signed</dd>")

	required := &events.SignerIdentity{Identity: "https://github.com/org/repo/.github/workflows/sign.yml@refs/heads/main",
		Issuer: "https://token.actions.githubusercontent.com"}
	signed := snap("/srv/app", "a2")
	raw, err := signed.Marshal(false)
	require.NoError(t, err)
	bl, err := baselines.Put(ctx, events.Baseline{Target: target, Snapshot: raw, Protect: []string{"git.repository.commit"},
		RequiredIdentity: required, ApprovedBy: "test"})
	require.NoError(t, err)
	kv, err := b.js.KeyValue(ctx, topology.BucketBaselines)
	require.NoError(t, err)
	_, err = attestation.PutRecord(ctx, kv, attestation.Record{Target: target, BaselineDigest: bl.Digest, Statement: "{}",
		Bundle: []byte(`{"verificationMaterial":{"tlogEntries":[{"logIndex":"4242"}]}}`), CertificateIdentity: required.Identity,
		OIDCIssuer: required.Issuer, SignedAt: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)})
	require.NoError(t, err)
	b.collected(t, "web-1", snap("/srv/app", "a2"))

	page := show()
	assert.Contains(t, page, "signed by <code>"+required.Identity+"</code> (issuer <code>"+required.Issuer+"</code>)")
	assert.Contains(t, page, "transparency log index 4242")
	assert.NotContains(t, page, "attests another digest")
	assert.Contains(t, page, `<span class="badge ERROR">failed</span> baseline requires a verified attestation`)
}

// A baseline signed by the signer it requires (an attestor signing
// keyless against a Fulcio and a timestamp authority on loopback, the
// verifier trusting their root): the page shows the signer, its issuer
// and that the verifier verified it before its latest verdict, a PASS.
func TestSignatureVerified(t *testing.T) {
	const identity, issuer = "release@example.com", "https://accounts.example.com"
	srv := attestationtest.NewServers(t)
	b := startFleetTrusting(t, srv.TrustedRoot(t))
	ctx := t.Context()
	signer, err := attestation.NewKeylessSigner(attestation.KeylessConfig{FulcioURL: srv.FulcioURL, TSAURL: srv.TSAURL},
		attestation.StaticToken(attestationtest.Token(identity, issuer)))
	require.NoError(t, err)
	acfg := attestor.NewDefaultConfig()
	acfg.Instance = "test"
	a, err := attestor.New(acfg, attestor.Settings{Conn: b.js.Conn(), Signer: signer})
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	t.Cleanup(func() { require.NoError(t, a.Shutdown(context.Background())) })

	target := events.Target{Kind: "git.repository", Identifier: "/srv/app"}
	raw, err := snap("/srv/app", "a1").Marshal(false)
	require.NoError(t, err)
	_, err = verifier.NewBaselines(b.js, "").Put(ctx, events.Baseline{Target: target, Snapshot: raw, ApprovedBy: "test",
		RequiredIdentity: &events.SignerIdentity{Identity: identity, Issuer: issuer}})
	require.NoError(t, err)
	_, err = attestor.RequestSign(ctx, b.js.Conn(), "", attestor.SignRequest{Target: target})
	require.NoError(t, err)
	b.collected(t, "web-1", snap("/srv/app", "a1"))

	_, base := startConsole(t, b)
	session := login(t, base)
	resp := do(t, base, request{path: "/target?host=web-1&kind=git.repository&id=%2Fsrv%2Fapp", session: session})
	require.Equal(t, http.StatusOK, resp.code, resp.body)
	page := html.UnescapeString(resp.body)
	assert.Contains(t, page, `<span class="badge PASS">PASS</span>`)
	assert.Contains(t, page, "signed by <code>"+identity+"</code> (issuer <code>"+issuer+"</code>)")
	assert.Contains(t, page, "no transparency log entry", "signed with a timestamp, not logged")
	assert.Contains(t, page, `<span class="badge PASS">verified</span> by the verifier before its latest verdict`)
}
