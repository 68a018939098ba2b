package cli_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// TestHostCommands: an operator enrolls the key a host's collector
// printed (never "the pending one", which anyone who may publish in the
// host's name can make), sees it in the list, rotates to a new key the
// host printed and revokes it, against the registry a verifier created on
// a real JetStream.
func TestHostCommands(t *testing.T) {
	b := startApproveBus(t)
	kv, err := b.js.KeyValue(t.Context(), topology.BucketHosts)
	require.NoError(t, err, "the verifier creates the hosts bucket")
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	key := dsse.KeyID(pub)
	// The verifier records the key of a host's first evidence (manual
	// enrollment: pending).
	reg := verifier.NewHosts(kv, verifier.EnrollManual)
	require.ErrorIs(t, reg.Admit(t.Context(), "web-01", key), verifier.ErrNotEnrolled)

	r := run(t, "host", "list", "--nats", b.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "HOST")
	assert.Regexp(t, `web-01\s+pending\s+`+regexpQuote(key), r.stdout)

	r = run(t, "host", "approve", "web-01", "--nats", b.url)
	require.Equal(t, 1, r.code, "no key named: nothing enrolled")
	assert.Contains(t, r.stderr, "runtimetruth: error: --key is required")
	assert.Contains(t, r.stderr, "pending keys seen on evidence in its name, hints only")
	assert.Contains(t, r.stderr, key)
	require.ErrorIs(t, reg.Admit(t.Context(), "web-01", key), verifier.ErrNotEnrolled)

	r = run(t, "host", "approve", "web-01", "--key", key, "--nats", b.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "enrolled "+key+" for host web-01\n", r.stdout)
	require.NoError(t, reg.Admit(t.Context(), "web-01", key))

	r = run(t, "host", "list", "--json", "--nats", b.url)
	require.Equal(t, 0, r.code, r.stderr)
	var recs []events.HostRecord
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &recs))
	require.Len(t, recs, 1)
	assert.Equal(t, events.KeyEnrolled, recs[0].KeyOf(key).State)

	r = run(t, "host", "rotate", "web-01", "--nats", b.url)
	require.Equal(t, 1, r.code, "rotate names the new key too")
	assert.Contains(t, r.stderr, "--key is required")
	next, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	r = run(t, "host", "rotate", "web-01", "--key", dsse.KeyID(next), "--nats", b.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, run(t, "host", "list", "--nats", b.url).stdout, "web-01 (rotating)")
	require.NoError(t, reg.Admit(t.Context(), "web-01", key), "the current key stays accepted")
	require.NoError(t, reg.Admit(t.Context(), "web-01", dsse.KeyID(next)), "the new one is accepted")
	require.ErrorIs(t, reg.Admit(t.Context(), "web-01", key), verifier.ErrRevoked, "and its first evidence ends the rotation")
	require.NoError(t, reg.Admit(t.Context(), "web-01", dsse.KeyID(next)))
	key = dsse.KeyID(next)

	r = run(t, "host", "revoke", "web-01", "--nats", b.url)
	require.Equal(t, 0, r.code, r.stderr)
	require.ErrorIs(t, reg.Admit(t.Context(), "web-01", key), verifier.ErrRevoked)

	r = run(t, "host", "approve", "db-01", "--key", "ed25519:nope", "--nats", b.url)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "want ed25519:<base64 of 32 bytes>")
	r = run(t, "host", "revoke", "nowhere", "--nats", b.url)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no such host")
}

// TestHostCommandsWithoutRegistry: on a bus no verifier has prepared, the
// commands say what is missing.
func TestHostCommandsWithoutRegistry(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	r := run(t, "host", "list", "--nats", url)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `no "hosts" bucket on this bus: a verifier creates it when it starts`)
}

// regexpQuote quotes a key id for a regexp.
func regexpQuote(s string) string { return regexp.QuoteMeta(s) }
