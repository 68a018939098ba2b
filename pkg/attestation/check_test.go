package attestation_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
)

var checkTarget = events.Target{Kind: "systemd.unit", Identifier: "agent-worker.service"}

func record(digest string, stmt, bundle []byte) *attestation.Record {
	return &attestation.Record{Target: checkTarget, BaselineDigest: digest, Statement: string(stmt), Bundle: json.RawMessage(bundle)}
}

func TestCheckerCachesByDigest(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	otherDigest, _ := baseline(t, "after.json")
	vs := attestationtest.NewVirtual(t)
	rec := record(digest, stmt, vs.Sign(t, identity, issuer, stmt))
	now := time.Now()
	tel := telemetrytest.New(t)
	c := attestation.NewChecker(vs.TrustedRoot(t), attestation.CheckerOptions{FailureTTL: time.Minute, Now: func() time.Time { return now }, Telemetry: tel.Providers})
	checks := func(result string) int64 {
		return tel.Sum(t, attestation.MetricChecks, attestation.AttrResult.String(result))
	}
	good := attestation.Baseline{Target: checkTarget, Digest: digest, Identity: identity, Issuer: issuer}

	for range 3 {
		res, err := c.Check(good, rec)
		require.NoError(t, err)
		assert.Equal(t, identity, res.Identity)
	}
	assert.Equal(t, [2]int64{2, 1}, [2]int64{checks(attestation.CheckHit), checks(attestation.CheckMiss)})

	// Another baseline digest, identity or bundle is another entry.
	changed := good
	changed.Digest = otherDigest
	_, err := c.Check(changed, rec)
	require.ErrorIs(t, err, attestation.ErrAttestationRequired)
	require.ErrorIs(t, err, statement.ErrDigestMismatch)
	assert.Contains(t, err.Error(), "must be signed by "+identity)
	wrong := good
	wrong.Identity = "mallory@example.com"
	_, err = c.Check(wrong, rec)
	require.ErrorIs(t, err, attestation.ErrIdentity)
	assert.Equal(t, int64(3), checks(attestation.CheckMiss))

	// A failure is remembered for FailureTTL only.
	_, err = c.Check(wrong, rec)
	require.Error(t, err)
	assert.Equal(t, int64(3), checks(attestation.CheckMiss))
	now = now.Add(2 * time.Minute)
	_, err = c.Check(wrong, rec)
	require.Error(t, err)
	assert.Equal(t, int64(4), checks(attestation.CheckMiss))

	// A success verified with a signed time is remembered for good.
	_, err = c.Check(good, rec)
	require.NoError(t, err)
	assert.Equal(t, int64(4), checks(attestation.CheckMiss))
}

func TestCheckerFailsClosedWithoutTrustedRoot(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	vs := attestationtest.NewVirtual(t)
	c := attestation.NewChecker(nil, attestation.CheckerOptions{})
	_, err := c.Check(attestation.Baseline{Target: checkTarget, Digest: digest, Identity: identity, Issuer: issuer},
		record(digest, stmt, vs.Sign(t, identity, issuer, stmt)))
	require.ErrorIs(t, err, attestation.ErrAttestationRequired)
	assert.Contains(t, err.Error(), "trusted root")
}

func TestRecordValidate(t *testing.T) {
	digest, stmt := baseline(t, "before.json")
	good := *record(digest, stmt, []byte(`{}`))
	require.NoError(t, good.Validate())
	for name, edit := range map[string]func(r *attestation.Record){
		"no target":    func(r *attestation.Record) { r.Target = events.Target{} },
		"bad digest":   func(r *attestation.Record) { r.BaselineDigest = "sha256:abc" },
		"no statement": func(r *attestation.Record) { r.Statement = "" },
		"no bundle":    func(r *attestation.Record) { r.Bundle = nil },
	} {
		r := good
		edit(&r)
		require.ErrorIs(t, r.Validate(), attestation.ErrInvalidRecord, name)
	}
	assert.Equal(t, "systemd=2Eunit.agent-worker=2Eservice.attestation", attestation.RecordKey(checkTarget))
	assert.True(t, attestation.IsRecordKey(attestation.RecordKey(checkTarget)))
	assert.False(t, attestation.IsRecordKey("systemd=2Eunit.agent-worker=2Eservice"))
}
