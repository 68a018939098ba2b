package cli_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/attestor"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// signBus is a JetStream server with an attestor signing with a key
// (cosign's encrypted format), started in process the way `up` would embed
// it: attestor.New(attestor.NewKeyConfig(keyFile, passwordFile), Settings{Conn}).
type signBus struct {
	url      string
	record   func(ctx context.Context) *attestation.Record // the stored attestation of before.json
	key      []byte                                        // the key file's content
	password string
	pub      *attestation.Verifier
	hint     string
}

func startSignBus(t *testing.T) *signBus {
	t.Helper()
	ctx := t.Context()
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	// The streams and buckets a deployment has (the baselines store needs
	// the verifier's evidence-latest bucket).
	require.NoError(t, verifier.Topology(1, topology.ConsumerVerifier).Ensure(ctx, js))
	key := attestationtest.WriteCosignKey(t, t.TempDir(), "correct horse battery staple")

	cfg := attestor.NewKeyConfig(key.KeyFile, key.WritePasswordFile(t))
	cfg.Instance = "test"
	a, err := attestor.New(cfg, attestor.Settings{Conn: nc})
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	t.Cleanup(func() { require.NoError(t, a.Shutdown(context.Background())) })

	v, err := attestation.NewVerifier(attestation.Policy{PublicKey: &key.Key.PublicKey})
	require.NoError(t, err)
	hint, err := attestation.KeyHint(&key.Key.PublicKey)
	require.NoError(t, err)
	return &signBus{
		url: url, key: key.PEM, password: key.Password, pub: v, hint: hint,
		record: func(ctx context.Context) *attestation.Record {
			kv, err := js.KeyValue(ctx, topology.BucketBaselines)
			require.NoError(t, err)
			rec, err := attestation.GetRecord(ctx, kv, fixtureTarget(t, "before.json"))
			require.NoError(t, err)
			return rec
		},
	}
}

func fixtureTarget(t *testing.T, name string) events.Target {
	t.Helper()
	s := fixtureSnapshot(t, name)
	return events.Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}
}

func fixtureSnapshot(t *testing.T, name string) *snapshot.Snapshot {
	t.Helper()
	data, err := os.ReadFile(fixture(name))
	require.NoError(t, err)
	return parseSnapshot(t, data)
}

// parseSnapshot parses the snapshot document doc (a command's output).
func parseSnapshot(t *testing.T, doc []byte) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Parse(doc)
	require.NoError(t, err)
	return s
}

// digestOf is the digest of s.
func digestOf(t *testing.T, s *snapshot.Snapshot) string {
	t.Helper()
	d, err := s.Digest()
	require.NoError(t, err)
	return d
}

// baseline sign: the attestor signs the stored baseline; the command prints
// the signer, the digest and where the attestation is stored, which then
// verifies under the key.
func TestBaselineSign(t *testing.T) {
	bus := startSignBus(t)
	target := fixtureTarget(t, "before.json")
	digest, otherDigest := fixtureDigest(t, "before.json"), fixtureDigest(t, "after.json")

	r := run(t, "baseline", "put", fixture("before.json"), "--nats", bus.url, "--by", "reviewer")
	require.Equal(t, 0, r.code, r.stderr)

	r = run(t, "baseline", "sign", target.String(), "--nats", bus.url, "--digest", digest)
	require.Equal(t, 0, r.code, r.stderr)
	key := events.AttestationKey(target)
	assert.Regexp(t, "^SIGNED: "+regexp.QuoteMeta(target.String())+"\n"+
		"  digest: "+digest+"\n"+
		"  key_hint: "+regexp.QuoteMeta(bus.hint)+"\n"+
		"  stored: bucket baselines, key "+regexp.QuoteMeta(key)+", revision [0-9]+\n$", r.stdout)
	assert.Empty(t, r.stderr)

	rec := bus.record(t.Context())
	assert.Equal(t, digest, rec.BaselineDigest)
	assert.Equal(t, bus.hint, rec.KeyHint)
	res, err := bus.pub.Verify(digest, 1, []byte(rec.Statement), rec.Bundle)
	require.NoError(t, err)
	assert.Equal(t, digest, res.BaselineDigest)

	t.Run("json", func(t *testing.T) {
		r := run(t, "baseline", "sign", target.String(), "--nats", bus.url, "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var rep map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
		assert.EqualValues(t, 1, rep["report_schema_version"])
		assert.Equal(t, "signed", rep["status"])
		assert.Equal(t, digest, rep["baseline_digest"])
		assert.Equal(t, bus.hint, rep["key_hint"])
		assert.Equal(t, "baselines", rep["bucket"])
		assert.Equal(t, key, rep["key"])
		assert.Regexp(t, "^sha256:[0-9a-f]{64}$", rep["bundle_digest"])
		assert.NotEmpty(t, rep["event_id"])
		assert.NotContains(t, rep, "certificate_identity")
	})
	t.Run("the attestation record is not listed as a baseline", func(t *testing.T) {
		r := run(t, "baseline", "list", "--nats", bus.url, "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var list []map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))
		assert.Len(t, list, 1)
	})

	// Every failure: exit 1, the reason on stderr, nothing on stdout.
	fails := map[string]struct {
		args []string
		want string
	}{
		"another digest than the stored baseline": {
			[]string{target.String(), "--nats", bus.url, "--digest", otherDigest}, "not the requested " + otherDigest,
		},
		"no baseline": {
			[]string{"git.repository:/nowhere", "--nats", bus.url}, "no baseline for git.repository:/nowhere",
		},
		"bad target": {[]string{"nocolon", "--nats", bus.url}, "invalid target"},
		"bad digest": {[]string{target.String(), "--nats", bus.url, "--digest", "sha256:abc"}, "--digest"},
		"no target":  {[]string{"--nats", bus.url}, "usage: runtimetruth baseline sign TARGET"},
	}
	for name, tc := range fails {
		t.Run(name, func(t *testing.T) {
			r := run(t, append([]string{"baseline", "sign"}, tc.args...)...)
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "runtimetruth: error: ")
			assert.Contains(t, r.stderr, tc.want)
			assert.Empty(t, r.stdout)
		})
	}
	t.Run("no attestor on the bus", func(t *testing.T) {
		_, url := natstest.RunJetStream(t)
		r := run(t, "baseline", "sign", target.String(), "--nats", url, "--timeout", "5s")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "no attestor answers on rt.ctl.attest")
	})
	t.Run("no bus", func(t *testing.T) {
		r := run(t, "baseline", "sign", target.String(), "--nats", "nats://127.0.0.1:1")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "connect to NATS")
	})
	t.Run("the other subcommands share the session", func(t *testing.T) {
		r := run(t, "baseline", "get", target.String(), "--nats", bus.url)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, digest, digestOf(t, parseSnapshot(t, []byte(r.stdout))))
		r = run(t, "baseline", "approve", "nocolon", "--nats", bus.url)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "invalid target")
		r = run(t, "baseline", "approve", target.String(), "--nats", "nats://127.0.0.1:1", "--protect", "no.such.selector")
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "invalid selector", "checked before connecting")
		r = run(t, "baseline", "rm", target.String(), "--nats", bus.url)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, "REMOVED: "+target.String()+"\n", r.stdout)
		r = run(t, "baseline", "sign", target.String(), "--nats", bus.url)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "no baseline for")
	})
}

// The signing key and its password appear nowhere in what baseline sign
// prints, on success or failure.
func TestBaselineSignNeverShowsTheKey(t *testing.T) {
	bus := startSignBus(t)
	target := fixtureTarget(t, "before.json")
	var all strings.Builder
	for _, args := range [][]string{
		{"baseline", "sign", target.String(), "--nats", bus.url},
		{"baseline", "put", fixture("before.json"), "--nats", bus.url},
		{"baseline", "sign", target.String(), "--nats", bus.url},
		{"baseline", "sign", target.String(), "--nats", bus.url, "--json"},
	} {
		r := run(t, args...)
		all.WriteString(r.stdout + r.stderr)
	}
	out := all.String()
	assert.Contains(t, out, "SIGNED: ")
	assert.NotContains(t, out, bus.password)
	body := strings.Join(strings.Split(strings.TrimSpace(string(bus.key)), "\n")[1:], "")
	for i := 0; i+32 <= len(body); i += 32 {
		assert.NotContains(t, out, body[i:i+32])
	}
}
