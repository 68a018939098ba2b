package verifier_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

func newKey(t *testing.T) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return dsse.KeyID(pub)
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
	require.ErrorIs(t, h.Admit(ctx, "web-01", k2), verifier.ErrKeyChanged, "still pending, another key than the enrolled one")
	require.NoError(t, h.Admit(ctx, "web-01", k1), "the enrolled key stays accepted meanwhile")

	rec, err := h.Get(ctx, "web-01")
	require.NoError(t, err)
	require.Len(t, rec.Keys, 2)
	assert.Equal(t, events.KeyEnrolled, rec.KeyOf(k1).State)
	assert.Equal(t, "first-use", rec.KeyOf(k1).By)
	assert.Equal(t, events.KeyPending, rec.KeyOf(k2).State)

	_, err = h.Approve(ctx, "web-01", "", "alice")
	require.ErrorIs(t, err, verifier.ErrNoKeyNamed, "never the pending key on its own")
	got, err := h.Approve(ctx, "web-01", k2, "alice")
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

// TestHostsRotate: rotate enrolls the key the operator names beside the
// current one; both are accepted until the host's first evidence signed
// by the new key, which revokes the old. A key the operator did not name
// waits as pending, even while rotating, and is never enrolled on its own
// (the attacker's key in finding 4 of the fleet-bulkheads issue).
func TestHostsRotate(t *testing.T) {
	h := verifier.NewHosts(hostsBucket(t), verifier.EnrollFirstUse)
	ctx := t.Context()
	k1, k2, attacker := newKey(t), newKey(t), newKey(t)
	require.NoError(t, h.Admit(ctx, "web-01", k1))
	require.ErrorIs(t, h.Rotate(ctx, "web-01", "", "alice"), verifier.ErrNoKeyNamed)
	require.ErrorIs(t, h.Rotate(ctx, "nowhere", k2, "alice"), verifier.ErrNoSuchHost)
	require.NoError(t, h.Rotate(ctx, "web-01", k2, "alice"))
	require.ErrorIs(t, h.Admit(ctx, "web-01", attacker), verifier.ErrKeyChanged, "a key nobody named waits")
	_, err := h.Approve(ctx, "web-01", "", "alice")
	require.ErrorIs(t, err, verifier.ErrNoKeyNamed)
	require.NoError(t, h.Admit(ctx, "web-01", k1), "the current key, while rotating")
	require.NoError(t, h.Admit(ctx, "web-01", k2), "the new key")
	require.ErrorIs(t, h.Admit(ctx, "web-01", k1), verifier.ErrRevoked, "replaced once the new key signed")
	require.ErrorIs(t, h.Admit(ctx, "web-01", attacker), verifier.ErrKeyChanged, "pending, another key than the enrolled one")
	rec, err := h.Get(ctx, "web-01")
	require.NoError(t, err)
	assert.False(t, rec.Rotating)
	assert.Equal(t, "rotation", rec.KeyOf(k1).By)
	assert.Equal(t, "alice", rec.KeyOf(k2).By)
	assert.Equal(t, events.KeyPending, rec.KeyOf(attacker).State)

	_, err = h.Approve(ctx, "web-01", "not-a-key", "alice")
	require.Error(t, err)
	require.ErrorIs(t, h.Rotate(ctx, "web-01", k1, "alice"), verifier.ErrRevoked)
}

// TestHostsBounded: evidence in a host's name signed by ever new keys
// (anyone who may publish as the host can send it) records only the
// first MaxPendingKeys as pending; the others are refused without a
// write, so the record never grows past the bucket's value limit (64 KiB:
// about 300 keys once filled it, and every write of the host's record
// failed, approval included) and the flood costs the bucket nothing; and
// rotations keep the newest MaxRevokedKeys revoked keys.
func TestHostsBounded(t *testing.T) {
	ctx, _, js := server(t)
	cfg := verifier.Topology(1, "").Buckets
	var hostsCfg jetstream.KeyValueConfig
	for _, b := range cfg {
		if b.Bucket == "hosts" {
			hostsCfg = b
		}
	}
	require.Positive(t, hostsCfg.MaxValueSize)
	kv, err := js.CreateKeyValue(ctx, hostsCfg)
	require.NoError(t, err)
	h := verifier.NewHosts(kv, verifier.EnrollManual)
	own := newKey(t)
	_, err = h.Approve(ctx, "web-01", own, "alice")
	require.NoError(t, err)
	const flood = 400
	var sent []string
	var rev uint64
	for i := range flood {
		k := newKey(t)
		require.ErrorIs(t, h.Admit(ctx, "web-01", k), verifier.ErrKeyChanged, "key %d", i)
		sent = append(sent, k)
		if i == verifier.MaxPendingKeys-1 {
			e, err := kv.Get(ctx, "web-01")
			require.NoError(t, err)
			rev = e.Revision()
		}
	}
	e, err := kv.Get(ctx, "web-01")
	require.NoError(t, err)
	assert.Equal(t, rev, e.Revision(), "keys past the pending ones cost no write")
	rec, err := h.Get(ctx, "web-01")
	require.NoError(t, err)
	pending := 0
	for _, k := range rec.Keys {
		if k.State == events.KeyPending {
			pending++
		}
	}
	assert.Equal(t, verifier.MaxPendingKeys, pending)
	for _, k := range sent[:verifier.MaxPendingKeys] {
		assert.NotNil(t, rec.KeyOf(k), "the first pending keys are kept")
	}
	require.NoError(t, h.Admit(ctx, "web-01", own), "the host's own key stays accepted")

	for range 2 * verifier.MaxRevokedKeys {
		next := newKey(t)
		_, err := h.Approve(ctx, "web-01", next, "alice")
		require.NoError(t, err, "approval always works")
	}
	rec, err = h.Get(ctx, "web-01")
	require.NoError(t, err)
	assert.LessOrEqual(t, len(rec.Keys), 1+verifier.MaxPendingKeys+verifier.MaxRevokedKeys)
	// The fullest record, with the longest approver name the CLI could
	// give, is far below the bucket's limit.
	for i := range rec.Keys {
		rec.Keys[i].By = strings.Repeat("x", 64)
	}
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	assert.Less(t, len(b), int(hostsCfg.MaxValueSize)/4, "%d bytes", len(b))
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

// TestHostsAnnounceTheirChanges: an announcing registry publishes each
// write that moves a key (pinned, recorded pending, enrolled, revoked, a
// rotation begun and ended) as host.key.changed, with its actor and an id
// of the host and revision; writes that move no key, and refusals that
// write nothing, publish nothing.
func TestHostsAnnounceTheirChanges(t *testing.T) {
	ctx, js := buckets(t)
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	h := verifier.NewHosts(kv, verifier.EnrollFirstUse).Announcing(js, "/verifier/v-0")
	op := verifier.NewHosts(kv, verifier.EnrollManual).Announcing(js, "/cli/alice")
	k1, k2, k3, k4 := newKey(t), newKey(t), newKey(t), newKey(t)

	require.NoError(t, h.Admit(ctx, "web-01", k1))                         // pinned
	require.NoError(t, h.Admit(ctx, "web-01", k1))                         // nothing written
	require.ErrorIs(t, h.Admit(ctx, "web-01", k2), verifier.ErrKeyChanged) // recorded pending
	require.ErrorIs(t, h.Admit(ctx, "web-01", k2), verifier.ErrKeyChanged) // nothing written
	_, err = op.Approve(ctx, "web-01", k2, "alice")                        // k2 enrolled, k1 revoked
	require.NoError(t, err)
	_, err = op.Approve(ctx, "web-01", k2, "alice") // already enrolled: no key moves
	require.NoError(t, err)
	require.NoError(t, op.Rotate(ctx, "web-01", k3, "bob"))                 // k3 enrolled beside k2
	require.NoError(t, h.Admit(ctx, "web-01", k3))                          // the rotation ends: k2 revoked
	require.NoError(t, op.Revoke(ctx, "web-01", "carol"))                   // k3 revoked
	require.ErrorIs(t, h.Admit(ctx, "web-01", k4), verifier.ErrNotEnrolled) // a revoked host's new key waits

	type change = events.KeyChange
	want := []struct {
		source, actor string
		rotating      bool
		keys          []change
	}{
		{"/verifier/v-0", "first-use", false, []change{{Key: k1, State: events.KeyEnrolled}}},
		{"/verifier/v-0", "first-use", false, []change{{Key: k2, State: events.KeyPending}}},
		{"/cli/alice", "alice", false, []change{
			{Key: k1, State: events.KeyRevoked, Previous: events.KeyEnrolled},
			{Key: k2, State: events.KeyEnrolled, Previous: events.KeyPending},
		}},
		{"/cli/alice", "bob", true, []change{{Key: k3, State: events.KeyEnrolled}}},
		{"/verifier/v-0", "rotation", false, []change{{Key: k2, State: events.KeyRevoked, Previous: events.KeyEnrolled}}},
		{"/cli/alice", "carol", false, []change{{Key: k3, State: events.KeyRevoked, Previous: events.KeyEnrolled}}},
		{"/verifier/v-0", "first-use", false, []change{{Key: k4, State: events.KeyPending}}},
	}
	got := streamEvents(ctx, t, js, topology.StreamBaselines)
	require.Len(t, got, len(want))
	ids := map[string]bool{}
	for i, w := range want {
		p := got[i].Payload.(events.HostKeyChanged)
		assert.Equal(t, "web-01", p.Host, i)
		assert.Equal(t, w.source, got[i].Source, i)
		assert.Equal(t, w.actor, p.Actor, i)
		assert.Equal(t, w.rotating, p.Rotating, i)
		assert.Equal(t, w.keys, p.Keys, i)
		assert.False(t, ids[got[i].ID], "%d: a repeated id", i)
		ids[got[i].ID] = true
	}
	e, err := kv.Get(ctx, "web-01")
	require.NoError(t, err)
	assert.Equal(t, events.HostKeyChangedIDs.ID("web-01", strconv.FormatUint(e.Revision(), 10)), got[len(got)-1].ID,
		"the id derives from the host and the revision written")

	// A registry not made Announcing publishes nothing.
	_, err = verifier.NewHosts(kv, verifier.EnrollManual).Approve(ctx, "web-02", k4, "alice")
	require.NoError(t, err)
	assert.Len(t, streamEvents(ctx, t, js, topology.StreamBaselines), len(want))
}

// TestHostsReportAChangeNotAnnounced: a write whose announcement cannot
// be published is kept (the record is the state) and reported.
func TestHostsReportAChangeNotAnnounced(t *testing.T) {
	ctx, js := buckets(t)
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	require.NoError(t, js.DeleteStream(ctx, topology.StreamBaselines))
	k := newKey(t)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = verifier.NewHosts(kv, verifier.EnrollManual).Announcing(js, "/cli/alice").Approve(short, "web-01", k, "alice")
	require.ErrorIs(t, err, verifier.ErrNotAnnounced)
	rec, err := verifier.NewHosts(kv, verifier.EnrollManual).Get(ctx, "web-01")
	require.NoError(t, err)
	assert.Equal(t, events.KeyEnrolled, rec.KeyOf(k).State)
}
