package verifier_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// countingKV counts the reads of a bucket.
type countingKV struct {
	jetstream.KeyValue
	gets atomic.Int64
}

func (c *countingKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	c.gets.Add(1)
	return c.KeyValue.Get(ctx, key)
}

// viewAt waits until revision (of a view) holds host's record as it is
// in kv now.
func viewAt(ctx context.Context, t *testing.T, kv jetstream.KeyValue, host string, revision func(string) uint64) {
	t.Helper()
	e, err := kv.Get(ctx, host)
	require.NoError(t, err)
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if got := revision(host); got < e.Revision() {
			return fmt.Errorf("the view holds revision %d of %s, want %d", got, host, e.Revision())
		}
		return nil
	})
}

// TestHostsViewAdmitsWithoutARead: a key the view holds as enrolled is
// admitted without reading the bucket; anything else is read and
// recorded as before (an unknown key waits as pending), and a change to
// the record (a revocation) takes effect once the watch delivers it. The
// rejection logs beside the records, and a record that is not one, are
// left out of the view.
func TestHostsViewAdmitsWithoutARead(t *testing.T) {
	kv := &countingKV{KeyValue: hostsBucket(t)}
	ctx := t.Context()
	operator := verifier.NewHosts(kv.KeyValue, verifier.EnrollManual)
	k1, k2 := newKey(t), newKey(t)
	_, err := operator.Approve(ctx, "web-01", k1, "alice")
	require.NoError(t, err)
	_, err = kv.Put(ctx, "rejections.web-01", []byte(`{"host":"web-01","total":1,"recent":[]}`))
	require.NoError(t, err)
	_, err = kv.Put(ctx, "db-01", []byte(`{"host":"web-01","keys":[{"key":"`+k1+`","state":"enrolled"}]}`))
	require.NoError(t, err)

	h := verifier.NewHosts(kv, verifier.EnrollManual)
	revision, stop := verifier.WithView(h)
	defer stop()
	viewAt(ctx, t, kv.KeyValue, "web-01", revision)

	kv.gets.Store(0)
	for range 100 {
		require.NoError(t, h.Admit(ctx, "web-01", k1))
	}
	assert.Zero(t, kv.gets.Load(), "an enrolled key in the view costs no read")

	require.ErrorIs(t, h.Admit(ctx, "web-01", k2), verifier.ErrKeyChanged, "an unknown key is read and recorded")
	assert.NotZero(t, kv.gets.Load())
	rec, err := operator.Get(ctx, "web-01")
	require.NoError(t, err)
	assert.Equal(t, events.KeyPending, rec.KeyOf(k2).State)
	require.Error(t, h.Admit(ctx, "db-01", k1), "a record of another host under db-01 is not db-01's")
	assert.Zero(t, revision("db-01"), "nor in the view")

	require.NoError(t, operator.Revoke(ctx, "web-01", "bob"))
	viewAt(ctx, t, kv.KeyValue, "web-01", revision)
	require.ErrorIs(t, h.Admit(ctx, "web-01", k1), verifier.ErrRevoked)
}

// TestRevokedKeyRefused: a host's key revoked while the verifier runs
// (its view of the registry admitting it without a read) is refused as
// soon as the view has the revocation: its evidence is dead-lettered as
// revoked and gets no verdict.
func TestRevokedKeyRefused(t *testing.T) {
	ctx, url, js := server(t)
	v := start(ctx, t, url, func(c *verifier.Config) { c.Enrollment = string(verifier.EnrollManual) })
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	operator := verifier.NewHosts(kv, verifier.EnrollManual)
	host := "revoked-01"
	_, err = operator.Approve(ctx, host, signtest.KeyID(host), "alice")
	require.NoError(t, err)
	viewAt(ctx, t, kv, host, v.ViewRevision)
	first := publishSnapshot(ctx, t, js, host, snap(unit(1)))
	assert.Equal(t, host, verdictOf(ctx, t, js, first).Host)

	require.NoError(t, operator.Revoke(ctx, host, "bob"))
	viewAt(ctx, t, kv, host, v.ViewRevision)
	refused := publishSnapshot(ctx, t, js, host, snap(unit(2)))
	got := rejections(ctx, t, js, 1)
	assert.Contains(t, got[refused], "rejected evidence (revoked)")
	settled(ctx, t, js, topology.ConsumerVerifier)
	all, n := verdicts(ctx, t, js)
	assert.Equal(t, 1, n, "no verdict after the revocation: %v", all)
}
