package cli

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/attestor"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// Through the bus: a baseline approved with a required identity gets error
// verdicts until the attestor signs it, then PASS; replaced without signing
// again, it gets error verdicts again.
func TestAttestedBaselineThroughTheBus(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	srv := attestationtest.NewServers(t)

	vcfg := verifier.NewDefaultConfig()
	vcfg.NATS.URL, vcfg.Instance = url, "test"
	vcfg.Enrollment = string(verifier.EnrollFirstUse) // the evidence is signed with signtest's keys
	v, err := verifier.New(vcfg, verifier.Settings{Conn: nc, TrustedMaterial: srv.TrustedRoot(t)})
	require.NoError(t, err)
	require.NoError(t, v.Start(ctx))
	defer func() { require.NoError(t, v.Shutdown(context.Background())) }()

	signer, err := attestation.NewKeylessSigner(attestation.KeylessConfig{FulcioURL: srv.FulcioURL, TSAURL: srv.TSAURL},
		attestation.StaticToken(attestationtest.Token(attestIdentity, attestIssuer)))
	require.NoError(t, err)
	acfg := attestor.NewDefaultConfig()
	acfg.NATS.URL, acfg.Instance = url, "test"
	a, err := attestor.New(acfg, attestor.Settings{Conn: nc, Signer: signer})
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	defer func() { require.NoError(t, a.Shutdown(context.Background())) }()

	load := func(name string) *snapshot.Snapshot {
		s, err := readSnapshot(attestFixture(name), "snapshot", nil)
		require.NoError(t, err)
		return s
	}
	before, after := load("before.json"), load("after.json")
	target := events.Target{Kind: before.Target.Kind, Identifier: before.Target.Identifier}
	baselines := verifier.NewBaselines(js, events.Source("cli", "test"))
	put := func(s *snapshot.Snapshot) {
		canon, err := s.Canonical()
		require.NoError(t, err)
		_, err = baselines.Put(ctx, events.Baseline{Snapshot: canon, ApprovedBy: "reviewer",
			RequiredIdentity: &events.SignerIdentity{Issuer: attestIssuer, Identity: attestIdentity}})
		require.NoError(t, err)
	}
	status := verifier.NewStatus(js)
	verdictFor := func(s *snapshot.Snapshot) events.Verdict {
		p, err := events.NewEvidenceCollected("host-1", s, 0)
		require.NoError(t, err)
		m, e, err := binding.NewMsg(events.Source("collector", "host-1"), p, signtest.Sign("host-1"))
		require.NoError(t, err)
		_, err = js.PublishMsg(ctx, m)
		require.NoError(t, err)
		var got events.Verdict
		natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
			r, err := status.Get(ctx, "host-1", target)
			if err != nil {
				return err
			}
			if r.EvidenceID != e.ID() {
				return fmt.Errorf("no verdict for %s yet", e.ID())
			}
			got = r.Verdict
			return nil
		})
		return got
	}

	// Each baseline in turn, in order: stored, its verdict is an error
	// (unsigned says why) until the attestor signs it, then a pass.
	for _, step := range []struct {
		baseline *snapshot.Snapshot
		unsigned string
	}{
		{before, "no attestation is stored"},
		{after, "statement does not match the baseline"}, // replaced without signing again
	} {
		put(step.baseline)
		v := verdictFor(step.baseline)
		require.Equal(t, events.StatusError, v.Status)
		assert.Contains(t, v.Error, step.unsigned)

		_, err = attestor.RequestSign(ctx, nc, "", attestor.SignRequest{Target: target})
		require.NoError(t, err)
		v = verdictFor(step.baseline)
		require.Equal(t, events.StatusPass, v.Status, v.Error)
	}

	list, err := baselines.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 1, "the attestation record is not listed as a baseline")
}
