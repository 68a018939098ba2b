package attestor_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
	"github.com/runtimetruth/runtimetruth/pkg/platform/logtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/attestor"
)

const (
	identity = "attestor@example.com"
	issuer   = "https://issuer.example.com"
)

// keyConfig configures key signing; an encrypted key (cosign's format,
// password "hunter2" in a file) costs a scrypt derivation at New.
func keyConfig(t *testing.T, url string, encrypted bool) attestor.Config {
	t.Helper()
	dir := t.TempDir()
	key, err := attestation.GenerateKey()
	require.NoError(t, err)
	var password []byte
	if encrypted {
		password = []byte("hunter2")
	}
	pemKey, err := attestation.MarshalPrivateKey(key, password)
	require.NoError(t, err)
	cfg := attestor.NewDefaultConfig()
	cfg.NATS.URL = url
	cfg.Instance = "test"
	cfg.Signing = attestor.SigningConfig{
		Mode: attestor.ModeKey, KeyFile: filepath.Join(dir, "cosign.key"), KeyPasswordFile: filepath.Join(dir, "password"),
		Timeout: time.Second,
	}
	require.NoError(t, os.WriteFile(cfg.Signing.KeyFile, pemKey, 0o600))
	require.NoError(t, os.WriteFile(cfg.Signing.KeyPasswordFile, []byte("hunter2\n"), 0o600))
	return cfg
}

// keylessConfig configures keyless signing with token (in a file) and the
// test Fulcio, Rekor and timestamp authority at fulcioURL, rekorURL and
// tsaURL ("" for none), every bundle verified against trustedRoot (JSON,
// in a file).
func keylessConfig(t *testing.T, url, token, fulcioURL, rekorURL, tsaURL string, trustedRoot []byte) attestor.Config {
	t.Helper()
	dir := t.TempDir()
	cfg := attestor.NewDefaultConfig()
	cfg.NATS.URL, cfg.Instance = url, "test"
	cfg.Signing.IdentityTokenFile = filepath.Join(dir, "oidc-token")
	cfg.Signing.FulcioURL, cfg.Signing.RekorURL, cfg.Signing.TSAURL = fulcioURL, rekorURL, tsaURL
	cfg.Signing.TrustedRootFile = filepath.Join(dir, "trusted_root.json")
	require.NoError(t, os.WriteFile(cfg.Signing.IdentityTokenFile, []byte(token), 0o600))
	require.NoError(t, os.WriteFile(cfg.Signing.TrustedRootFile, trustedRoot, 0o600))
	return cfg
}

func TestLifecycle(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	ctx := context.Background()

	t.Run("shutdown without start", func(t *testing.T) {
		a, err := attestor.New(keyConfig(t, url, false), attestor.Settings{})
		require.NoError(t, err)
		require.NoError(t, a.Shutdown(ctx))
		require.NoError(t, a.Shutdown(ctx))
		require.ErrorIs(t, a.Start(ctx), attestor.ErrShutdown)
	})
	t.Run("start, shutdown twice", func(t *testing.T) {
		a := startAttestor(ctx, t, keyConfig(t, url, false), attestor.Settings{})
		require.Error(t, a.Start(ctx))
		require.NoError(t, a.Shutdown(ctx))
		require.NoError(t, a.Shutdown(ctx))
		require.ErrorIs(t, a.Start(ctx), attestor.ErrShutdown)
	})
	t.Run("bad key password", func(t *testing.T) {
		cfg := keyConfig(t, url, true)
		require.NoError(t, os.WriteFile(cfg.Signing.KeyPasswordFile, []byte("wrong"), 0o600))
		_, err := attestor.New(cfg, attestor.Settings{})
		require.ErrorIs(t, err, attestation.ErrKey)
		assert.NotContains(t, err.Error(), "wrong")
		assert.NotContains(t, err.Error(), "hunter2")
	})
	t.Run("missing key", func(t *testing.T) {
		cfg := keyConfig(t, url, false)
		cfg.Signing.KeyFile = filepath.Join(t.TempDir(), "missing.key")
		_, err := attestor.New(cfg, attestor.Settings{})
		require.Error(t, err)
	})
	t.Run("invalid config", func(t *testing.T) {
		cfg := keyConfig(t, url, false)
		cfg.Concurrency = 0
		_, err := attestor.New(cfg, attestor.Settings{})
		require.Error(t, err)
	})
}

// One request end to end, key-based: sign, store, announce.
func TestSignRequestWithKey(t *testing.T) {
	ctx, url, nc, js := bus(t)
	cfg := keyConfig(t, url, true)
	tel := telemetrytest.New(t)
	a := startAttestor(ctx, t, cfg, attestor.Settings{Telemetry: tel.Providers})
	defer func() { require.NoError(t, a.Shutdown(context.Background())) }()

	kv := baselines(ctx, t, js)
	before := fixture(t, "before.json")
	digest := putBaseline(ctx, t, kv, before, identity, issuer)
	rep, err := attestor.RequestSign(ctx, nc, "", attestor.SignRequest{Target: targetOf(before), Digest: digest})
	require.NoError(t, err)
	assert.Equal(t, digest, rep.BaselineDigest)
	assert.NotEmpty(t, rep.KeyHint)
	assert.Empty(t, rep.CertificateIdentity)

	rec, err := attestation.GetRecord(ctx, kv, targetOf(before))
	require.NoError(t, err)
	keyPEM, err := os.ReadFile(cfg.Signing.KeyFile)
	require.NoError(t, err)
	key, err := attestation.LoadPrivateKey(keyPEM, []byte("hunter2"))
	require.NoError(t, err)
	v, err := attestation.NewVerifier(attestation.Policy{PublicKey: &key.PublicKey})
	require.NoError(t, err)
	_, err = v.Verify(digest, 1, []byte(rec.Statement), rec.Bundle)
	require.NoError(t, err)
	assert.Equal(t, int64(1), tel.Sum(t, attestor.MetricRequests))
	assert.Equal(t, int64(1), tel.Sum(t, attestor.MetricSignatures))
	assert.Equal(t, int64(0), tel.Sum(t, attestor.MetricSignFailures))
}

// The keyless flow through the bus, as the verifier sees it: a baseline
// naming a required identity, a sign request, the stored attestation that
// verifies (and is then answered from the cache), the event; then the
// baseline replaced without signing again, which no longer verifies.
func TestSignRequestKeylessThroughTheBus(t *testing.T) {
	ctx, url, nc, js := bus(t)
	srv := attestationtest.NewServers(t)
	token := attestationtest.Token(identity, issuer)
	cfg := keylessConfig(t, url, token, srv.FulcioURL, "", srv.TSAURL, srv.TrustedRootJSON(t))
	var logs logtest.Buffer
	tel := telemetrytest.New(t)
	a := startAttestor(ctx, t, cfg, attestor.Settings{Logger: newLogger(&logs), Telemetry: tel.Providers})

	kv := baselines(ctx, t, js)
	before := fixture(t, "before.json")
	target := targetOf(before)
	digest := putBaseline(ctx, t, kv, before, identity, issuer)

	rep, err := attestor.RequestSign(ctx, nc, cfg.Subject, attestor.SignRequest{Target: target})
	require.NoError(t, err)
	assert.Equal(t, identity, rep.CertificateIdentity)
	assert.Equal(t, issuer, rep.OIDCIssuer)
	assert.Equal(t, events.AttestationKey(target), rep.Key)
	assert.Equal(t, topology.BaselineKey(target)+".attestation", rep.Key)

	// The verifier's check: verified, then cached by digest.
	checks := telemetrytest.New(t)
	checker := attestation.NewChecker(srv.TrustedRoot(t), attestation.CheckerOptions{Telemetry: checks.Providers})
	b := attestation.Baseline{Target: target, Digest: digest, Identity: identity, Issuer: issuer}
	res, err := checker.CheckStored(ctx, kv, b)
	require.NoError(t, err)
	assert.Equal(t, identity, res.Identity)
	_, err = checker.CheckStored(ctx, kv, b)
	require.NoError(t, err)
	assert.Equal(t, [2]int64{1, 1}, [2]int64{
		checks.Sum(t, attestation.MetricChecks, attestation.AttrResult.String(attestation.CheckHit)),
		checks.Sum(t, attestation.MetricChecks, attestation.AttrResult.String(attestation.CheckMiss))})

	// The event, on the BASELINES stream.
	stream, err := js.Stream(ctx, topology.StreamBaselines)
	require.NoError(t, err)
	raw, err := stream.GetLastMsgForSubject(ctx, events.AttestationSubject(target))
	require.NoError(t, err)
	e, err := binding.FromNATS(raw.Header, raw.Data)
	require.NoError(t, err)
	assert.Equal(t, rep.EventID, e.ID())
	assert.Equal(t, "/attestor/test", e.Source())
	ev, err := binding.Decode[events.AttestationCreated](e)
	require.NoError(t, err)
	require.NoError(t, ev.Validate())
	assert.Equal(t, digest, ev.BaselineDigest)
	assert.Equal(t, statement.PredicateType, ev.PredicateType)
	assert.Equal(t, identity, ev.CertificateIdentity)
	assert.Equal(t, rep.BundleDigest, ev.BundleDigest)

	// Signing the same bundle again would announce the same id; a new
	// signature is a new event.
	rep2, err := attestor.RequestSign(ctx, nc, cfg.Subject, attestor.SignRequest{Target: target, Digest: digest})
	require.NoError(t, err)
	assert.NotEqual(t, rep.EventID, rep2.EventID)

	// Replace the baseline without signing again: the stored attestation
	// no longer verifies.
	after := fixture(t, "after.json")
	newDigest := putBaseline(ctx, t, kv, after, identity, issuer)
	_, err = checker.CheckStored(ctx, kv, attestation.Baseline{Target: target, Digest: newDigest, Identity: identity, Issuer: issuer})
	require.ErrorIs(t, err, attestation.ErrAttestationRequired)
	require.ErrorIs(t, err, statement.ErrDigestMismatch)

	// Refusals: another digest than the stored one, no baseline, bad
	// requests. Each is answered, and logged without the token.
	_, err = attestor.RequestSign(ctx, nc, cfg.Subject, attestor.SignRequest{Target: target, Digest: digest})
	require.ErrorContains(t, err, "not the requested")
	_, err = attestor.RequestSign(ctx, nc, cfg.Subject, attestor.SignRequest{Target: events.Target{Kind: "git.repository", Identifier: "/nowhere"}})
	require.ErrorContains(t, err, "no baseline for git.repository:/nowhere")
	m, err := nc.RequestWithContext(ctx, cfg.Subject, []byte(`{"target":{"kind":"x","identifier":"y"},"extra":1}`))
	require.NoError(t, err)
	assert.Contains(t, string(m.Data), "invalid sign request")

	// A token Fulcio refuses: the error reaches the reply and the log,
	// the token does not.
	require.NoError(t, os.WriteFile(cfg.Signing.IdentityTokenFile, []byte("not.a-jwt-at-all.token"), 0o600))
	_, err = attestor.RequestSign(ctx, nc, cfg.Subject, attestor.SignRequest{Target: target})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "a-jwt-at-all")

	require.NoError(t, a.Shutdown(context.Background()))
	assert.Equal(t, int64(6), tel.Sum(t, attestor.MetricRequests))
	assert.Equal(t, int64(2), tel.Sum(t, attestor.MetricSignatures))
	assert.Equal(t, int64(4), tel.Sum(t, attestor.MetricSignFailures))

	// The token appears in no log line, reply or event.
	out := logs.String()
	assert.Contains(t, out, "attestor started")
	assert.Contains(t, out, "sign request failed")
	for _, secret := range append([]string{token, "a-jwt-at-all"}, strings.Split(token, ".")...) {
		assert.NotContains(t, out, secret)
		assert.NotContains(t, string(raw.Data), secret)
		rec, err := attestation.GetRecord(ctx, kv, target)
		require.NoError(t, err)
		data, err := json.Marshal(rec)
		require.NoError(t, err)
		assert.NotContains(t, string(data), secret)
	}
}

// Two instances share the requests through the queue group; a request
// while shutting down is refused, not lost.
func TestQueueGroupAndDrain(t *testing.T) {
	ctx, url, nc, js := bus(t)
	cfg := keyConfig(t, url, false)
	var as []*attestor.Attestor
	tel := telemetrytest.New(t) // both instances report to it
	for range 2 {
		as = append(as, startAttestor(ctx, t, cfg, attestor.Settings{Conn: nc, Telemetry: tel.Providers}))
	}
	kv := baselines(ctx, t, js)
	before := fixture(t, "before.json")
	putBaseline(ctx, t, kv, before, identity, issuer)
	for range 6 {
		_, err := attestor.RequestSign(ctx, nc, "", attestor.SignRequest{Target: targetOf(before)})
		require.NoError(t, err)
	}
	assert.Equal(t, int64(6), tel.Sum(t, attestor.MetricRequests))
	for _, a := range as {
		require.NoError(t, a.Shutdown(ctx))
	}
	assert.False(t, nc.IsClosed(), "a given connection is not closed")
	_, err := attestor.RequestSign(ctx, nc, "", attestor.SignRequest{Target: targetOf(before)})
	require.Error(t, err, "no responders once both are gone")
}

// Keyless through the bus with a transparency log (the test Fulcio and
// Rekor, no timestamp authority): the stored bundle carries the log entry,
// and the verifier's check, under the trusted root listing the log,
// requires and verifies it.
func TestSignRequestKeylessWithRekor(t *testing.T) {
	ctx, url, nc, js := bus(t)
	srv := attestationtest.NewServers(t)
	cfg := keylessConfig(t, url, attestationtest.Token(identity, issuer), srv.FulcioURL, srv.RekorURL, "", srv.TrustedRootJSON(t, attestationtest.WithRekor()))
	a := startAttestor(ctx, t, cfg, attestor.Settings{Conn: nc})
	defer func() { require.NoError(t, a.Shutdown(context.Background())) }()

	kv := baselines(ctx, t, js)
	before := fixture(t, "before.json")
	target := targetOf(before)
	digest := putBaseline(ctx, t, kv, before, identity, issuer)
	rep, err := attestor.RequestSign(ctx, nc, events.AttestSubject, attestor.SignRequest{Target: target, Digest: digest})
	require.NoError(t, err)
	assert.Equal(t, identity, rep.CertificateIdentity)
	assert.Equal(t, 1, srv.Rekor.Size())

	rec, err := attestation.GetRecord(ctx, kv, target)
	require.NoError(t, err)
	var b struct {
		VerificationMaterial struct {
			TlogEntries []json.RawMessage `json:"tlogEntries"`
		} `json:"verificationMaterial"`
	}
	require.NoError(t, json.Unmarshal(rec.Bundle, &b))
	assert.Len(t, b.VerificationMaterial.TlogEntries, 1)

	base := attestation.Baseline{Target: target, Digest: digest, Identity: identity, Issuer: issuer}
	res, err := attestation.NewChecker(srv.TrustedRoot(t, attestationtest.WithRekor()), attestation.CheckerOptions{}).CheckStored(ctx, kv, base)
	require.NoError(t, err)
	assert.Len(t, res.Timestamps, 1, "the entry's integrated time")
	_, err = attestation.NewChecker(attestationtest.NewServers(t).TrustedRoot(t, attestationtest.WithRekor()), attestation.CheckerOptions{}).CheckStored(ctx, kv, base)
	require.ErrorIs(t, err, attestation.ErrAttestationRequired, "another CA and log")
}
