package verifier_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

func newKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return events.KeyID(pub)
}

func hostsBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	ctx, _, js := server(t)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "hosts-test", History: 4})
	require.NoError(t, err)
	return kv
}

// TestHostsFirstUse: the first key seen for a host is pinned; another key
// later is refused (pending, reported as a key change) until an operator
// approves it, which revokes the old one.
func TestHostsFirstUse(t *testing.T) {
	h := verifier.NewHosts(hostsBucket(t), verifier.EnrollFirstUse)
	ctx := t.Context()
	k1, k2 := newKey(t), newKey(t)
	require.NoError(t, h.Admit(ctx, "web-01", k1))
	require.NoError(t, h.Admit(ctx, "web-01", k1), "the pinned key again")
	require.ErrorIs(t, h.Admit(ctx, "web-01", k2), verifier.ErrKeyChanged)
	require.ErrorIs(t, h.Admit(ctx, "web-01", k2), verifier.ErrNotEnrolled, "still pending")
	require.NoError(t, h.Admit(ctx, "web-01", k1), "the enrolled key stays accepted meanwhile")

	rec, err := h.Get(ctx, "web-01")
	require.NoError(t, err)
	require.Len(t, rec.Keys, 2)
	assert.Equal(t, events.KeyEnrolled, rec.KeyOf(k1).State)
	assert.Equal(t, "first-use", rec.KeyOf(k1).By)
	assert.Equal(t, events.KeyPending, rec.KeyOf(k2).State)

	got, err := h.Approve(ctx, "web-01", "", "alice")
	require.NoError(t, err)
	assert.Equal(t, k2, got.Key)
	require.NoError(t, h.Admit(ctx, "web-01", k2))
	require.ErrorIs(t, h.Admit(ctx, "web-01", k1), verifier.ErrRevoked, "the replaced key")
	rec, err = h.Get(ctx, "web-01")
	require.NoError(t, err)
	assert.Equal(t, "alice", rec.KeyOf(k2).By)
	assert.Equal(t, "alice", rec.KeyOf(k1).By)
}

// TestHostsManual: a new host's key waits as pending; its evidence is
// refused until approved. Revoking refuses it again, and a revoked key is
// never approved again; a revoked host's new key waits, even under
// first-use.
func TestHostsManual(t *testing.T) {
	kv := hostsBucket(t)
	h := verifier.NewHosts(kv, verifier.EnrollManual)
	ctx := t.Context()
	k1, k2 := newKey(t), newKey(t)
	list, err := h.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
	require.ErrorIs(t, h.Admit(ctx, "db-01", k1), verifier.ErrNotEnrolled)
	require.ErrorIs(t, h.Admit(ctx, "db-01", k1), verifier.ErrNotEnrolled)
	_, err = h.Approve(ctx, "db-01", k1, "bob")
	require.NoError(t, err)
	require.NoError(t, h.Admit(ctx, "db-01", k1))

	require.NoError(t, h.Revoke(ctx, "db-01", "bob"))
	require.ErrorIs(t, h.Admit(ctx, "db-01", k1), verifier.ErrRevoked)
	_, err = h.Approve(ctx, "db-01", k1, "bob")
	require.ErrorIs(t, err, verifier.ErrRevoked)

	fu := verifier.NewHosts(kv, verifier.EnrollFirstUse)
	require.ErrorIs(t, fu.Admit(ctx, "db-01", k2), verifier.ErrNotEnrolled, "a revoked host is not enrolled on first use")
	require.ErrorIs(t, h.Revoke(ctx, "nowhere", "bob"), verifier.ErrNoSuchHost)
}

// TestHostsRotate: after rotate, a new key waits as pending even under
// first-use, the current key stays accepted, and approving the new one
// revokes it.
func TestHostsRotate(t *testing.T) {
	h := verifier.NewHosts(hostsBucket(t), verifier.EnrollFirstUse)
	ctx := t.Context()
	k1, k2 := newKey(t), newKey(t)
	require.NoError(t, h.Admit(ctx, "web-01", k1))
	require.NoError(t, h.Rotate(ctx, "web-01"))
	require.ErrorIs(t, h.Admit(ctx, "web-01", k2), verifier.ErrKeyChanged)
	require.NoError(t, h.Admit(ctx, "web-01", k1))
	_, err := h.Approve(ctx, "web-01", k2, "alice")
	require.NoError(t, err)
	require.ErrorIs(t, h.Admit(ctx, "web-01", k1), verifier.ErrRevoked)
	rec, err := h.Get(ctx, "web-01")
	require.NoError(t, err)
	assert.False(t, rec.Rotating)

	_, err = h.Approve(ctx, "web-01", "not-a-key", "alice")
	require.Error(t, err)
}

// TestHostsConcurrentFirstUse: verifiers racing on a new host's first
// evidence pin one key, never two.
func TestHostsConcurrentFirstUse(t *testing.T) {
	kv := hostsBucket(t)
	ctx := t.Context()
	keys := []string{newKey(t), newKey(t), newKey(t), newKey(t)}
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Go(func() { _ = verifier.NewHosts(kv, verifier.EnrollFirstUse).Admit(ctx, "web-01", k) })
	}
	wg.Wait()
	rec, err := verifier.NewHosts(kv, verifier.EnrollFirstUse).Get(ctx, "web-01")
	require.NoError(t, err)
	enrolled := 0
	for _, k := range rec.Keys {
		if k.State == events.KeyEnrolled {
			enrolled++
		}
	}
	assert.Equal(t, 1, enrolled, "%+v", rec.Keys)
	assert.Len(t, rec.Keys, len(keys))

	list, err := verifier.NewHosts(kv, verifier.EnrollManual).List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "web-01", list[0].Host)
}
