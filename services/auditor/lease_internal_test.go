package auditor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// TestLeaseRenewalWhoseAnswerWasLost renews a lease whose previous renewal
// reached the server but not its answer (a reconnect): the lease still
// holds this process's value, so it is still ours; a lease another
// process wrote is lost.
func TestLeaseRenewalWhoseAnswerWasLost(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lost := make(chan error, 1)
	ls, err := acquireLeases(ctx, js, 1, 30*time.Second, "a", "auditor", []string{"EVIDENCE"}, func(err error) { lost <- err })
	require.NoError(t, err)
	defer ls.release(context.Background())
	key := leaseKey("auditor", "EVIDENCE")

	// The renewal the server applied, whose answer never came.
	_, err = ls.kv.Update(ctx, key, ls.val, ls.revs[key])
	require.NoError(t, err)
	require.NoError(t, ls.renew(ctx), "still ours")
	require.NoError(t, ls.check(ctx))

	// Another instance's write.
	e, err := ls.kv.Get(ctx, key)
	require.NoError(t, err)
	_, err = ls.kv.Update(ctx, key, []byte(`{"instance":"b","token":"other"}`), e.Revision())
	require.NoError(t, err)
	require.ErrorIs(t, ls.renew(ctx), ErrLeaseLost)
	assert.Empty(t, lost, "renew reports the loss; the renewal loop calls onLost")
}
