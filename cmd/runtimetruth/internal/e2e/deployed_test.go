package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// TestSilenceAsDeployed: with the verifier under its rendered user, a
// host that goes quiet after a PASS turns STALE, and the verifier's
// periodic duties (the silence sweep, the registry's view) run: it stays
// ready. Without the grants of its key-value watches the sweep's listing
// is refused, the PASS stands for ever and readiness names the sweep.
func TestSilenceAsDeployed(t *testing.T) {
	ctx := t.Context()
	ps := runPolicyServer(t)
	_, op := ps.as(t, "operator")
	_, bus := ps.as(t, "collector")

	vcfg := verifier.NewDefaultConfig()
	vcfg.Instance, vcfg.StaleAfter = "deployed", time.Second
	vcfg.NATS = natsbus.Config{URL: ps.url, User: "verifier", Password: "verifier-pw"}
	ver, err := verifier.New(vcfg, verifier.Settings{})
	require.NoError(t, err)
	startComponent(ctx, t, ver)

	kv, err := op.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	_, err = verifier.NewHosts(kv, verifier.EnrollManual).Approve(ctx, "web", signtest.KeyID("web"), "operator")
	require.NoError(t, err)
	s := unitSnapshot(1)
	raw, err := s.Canonical()
	require.NoError(t, err)
	_, err = verifier.NewBaselines(op, "/cli/operator").Put(ctx, events.Baseline{Snapshot: raw, ApprovedBy: "operator"})
	require.NoError(t, err)

	p, err := events.NewEvidenceCollected("web", unitSnapshot(1), time.Minute)
	require.NoError(t, err)
	m, e, err := binding.NewMsg(events.Source("collector", "web"), p, signtest.Sign("web"))
	require.NoError(t, err)
	_, err = bus.PublishMsg(ctx, m)
	require.NoError(t, err)

	status := verifier.NewStatus(op)
	target := events.Target{Kind: "systemd.unit", Identifier: "agent.service"}
	var seen []events.Status
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		r, err := status.Get(ctx, "web", target)
		if err != nil {
			return err
		}
		if len(seen) == 0 || seen[len(seen)-1] != r.Verdict.Status {
			seen = append(seen, r.Verdict.Status)
		}
		if r.Verdict.Status != events.StatusStale {
			return fmt.Errorf("web is %s", r.Verdict.Status)
		}
		assert.Equal(t, e.ID(), r.EvidenceID, "the stale verdict names the last evidence")
		return nil
	})
	assert.Equal(t, []events.Status{events.StatusPass, events.StatusStale}, seen)
	require.NoError(t, ver.Ready(ctx), "every periodic duty runs")
}
