package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// enroll approves the signing key of the collector of cfg in the host
// registry, as an operator does with `runtimetruth host approve HOST
// --key KEY` after reading `runtimetruth-collector --print-identity`: the
// verifiers run with the default manual enrollment, so the collector's
// evidence counts only once its key is enrolled. The registry is the
// verifier's (it exists once a verifier has started).
func enroll(ctx context.Context, t *testing.T, js jetstream.JetStream, cfg collector.Config) {
	t.Helper()
	id, err := collector.LoadIdentity(cfg)
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	_, err = verifier.NewHosts(kv, verifier.EnrollManual).Approve(ctx, cfg.Host, id.KeyID(), "e2e")
	require.NoError(t, err)
}

// startEnrolled starts comps in order, then col, the collector of ccfg,
// once its key is enrolled (through js, the operator's): its evidence is
// authentic from the first. Each is shut down when the test ends, in
// reverse order.
func startEnrolled(ctx context.Context, t *testing.T, js jetstream.JetStream, ccfg collector.Config, col lifecycle.Component, comps ...lifecycle.Component) {
	t.Helper()
	for _, c := range comps {
		startComponent(ctx, t, c)
	}
	enroll(ctx, t, js, ccfg)
	startComponent(ctx, t, col)
}

// startComponent starts c and shuts it down when the test ends.
func startComponent(ctx context.Context, t *testing.T, c lifecycle.Component) {
	t.Helper()
	require.NoError(t, c.Start(ctx))
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		assert.NoError(t, c.Shutdown(sctx))
	})
}
