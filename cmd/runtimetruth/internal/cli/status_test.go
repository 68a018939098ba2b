package cli_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// status lists, after the verdicts, every host in whose name evidence was
// refused since its last authentic one: how many, the last reason; --json
// carries it on the host's records.
func TestStatusShowsRefusedEvidence(t *testing.T) {
	bus := startApproveBus(t)
	ctx := t.Context()
	bus.collected(t, "host-a", fixtureSnapshot(t, "before.json"))
	r := run(t, "status", "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "REFUSED")

	impostor := signtest.Random()
	for range 2 {
		bus.publish(t, "host-a", fixtureSnapshot(t, "after.json"), binding.WithSigner(impostor))
	}
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		s, err := bus.js.Stream(ctx, topology.StreamDLQ)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		if info.State.Msgs < 2 {
			return fmt.Errorf("%d dead letters", info.State.Msgs)
		}
		return nil
	})
	r = run(t, "status", "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	i := strings.Index(r.stdout, "REFUSED")
	require.GreaterOrEqual(t, i, 0, r.stdout)
	// The impostor's first refusal is key_changed, the next not_enrolled
	// (its key pending); two in one batch may be logged in either order.
	assert.Regexp(t, `REFUSED +host-a +2 +\S+ \S+ +(key_changed|not_enrolled)\n`, r.stdout[i:])
	assert.Regexp(t, `PASS|ERROR`, r.stdout[:i], "the verdict stands")

	r = run(t, "status", "--nats", bus.url, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var recs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &recs))
	require.Len(t, recs, 1)
	rej := recs[0]["rejected"].(map[string]any)
	assert.Equal(t, "host-a", rej["host"])
	assert.EqualValues(t, 2, rej["since_authentic"])
}
