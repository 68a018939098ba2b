package cli_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// approveBus is a JetStream server with a verifier, which records the
// latest snapshot of every host and target it receives (the
// evidence-latest bucket that baseline approve promotes).
type approveBus struct {
	url       string
	js        jetstream.JetStream
	ver       *verifier.Verifier
	baselines *verifier.Baselines
}

func startApproveBus(t *testing.T) *approveBus {
	t.Helper()
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	cfg := verifier.NewDefaultConfig()
	cfg.Instance = "test"
	cfg.Enrollment = string(verifier.EnrollFirstUse) // collected signs with signtest's keys
	v, err := verifier.New(cfg, verifier.Settings{Conn: nc})
	require.NoError(t, err)
	require.NoError(t, v.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, v.Shutdown(ctx))
	})
	return &approveBus{url: url, js: js, ver: v, baselines: verifier.NewBaselines(js, "")}
}

// collected publishes s as collected on host and waits until the verifier
// has recorded it as the host's latest snapshot of its target.
func (b *approveBus) collected(t *testing.T, host string, s *snapshot.Snapshot) {
	t.Helper()
	ctx := t.Context()
	p, err := events.NewEvidenceCollected(host, s, time.Minute)
	require.NoError(t, err)
	m, _, err := events.NewMsg(events.Source("collector", host), p, signtest.Sign(host))
	require.NoError(t, err)
	_, err = b.js.PublishMsg(ctx, m)
	require.NoError(t, err)
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		obs, err := b.baselines.Observations(ctx, p.Target)
		if err != nil {
			return err
		}
		for _, o := range obs {
			if o.Host == host && o.Digest == p.Digest {
				return nil
			}
		}
		return fmt.Errorf("the snapshot from %s is not the latest yet", host)
	})
}

func fixtureDigest(t *testing.T, name string) string {
	t.Helper()
	d, err := fixtureSnapshot(t, name).Digest()
	require.NoError(t, err)
	return d
}

// baseline approve promotes the latest snapshot of a target: without
// --host while every host agrees, with --host to pick one when they
// differ; --identity and --issuer set the signer the baseline requires,
// kept by a later approve that does not name one.
func TestBaselineApprove(t *testing.T) {
	bus := startApproveBus(t)
	ctx := t.Context()
	target := fixtureTarget(t, "before.json")
	before, after := fixtureDigest(t, "before.json"), fixtureDigest(t, "after.json")
	const (
		identity = "release@example.com"
		issuer   = "https://accounts.example.com"
	)

	r := run(t, "baseline", "approve", target.String(), "--nats", bus.url)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no snapshot of "+target.String())

	// One host: approve needs no --host.
	bus.collected(t, "host-a", fixtureSnapshot(t, "before.json"))
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--by", "reviewer")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "APPROVED: "+target.String()+"\n  digest: "+before+"\n  host: host-a\n", r.stdout)
	assert.Empty(t, r.stderr)
	b, err := bus.baselines.Get(ctx, target)
	require.NoError(t, err)
	assert.Equal(t, before, b.Digest)
	assert.Equal(t, "host-a", b.Host)
	assert.Equal(t, "reviewer", b.ApprovedBy)
	assert.Nil(t, b.RequiredIdentity)
	assert.Nil(t, b.Protect)

	// A second host with another snapshot: ambiguous until --host names
	// one.
	bus.collected(t, "host-b", fixtureSnapshot(t, "after.json"))
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "ambiguous snapshot")
	assert.Contains(t, r.stderr, "--host HOST")
	assert.Empty(t, r.stdout)
	b, err = bus.baselines.Get(ctx, target)
	require.NoError(t, err)
	assert.Equal(t, before, b.Digest, "unchanged")

	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--host", "host-b",
		"--identity", identity, "--issuer", issuer, "--protect", "systemd.unit")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "APPROVED: "+target.String()+"\n  digest: "+after+"\n  host: host-b\n"+
		"  required_identity: "+identity+" (issuer "+issuer+")\n", r.stdout)
	b, err = bus.baselines.Get(ctx, target)
	require.NoError(t, err)
	assert.Equal(t, after, b.Digest)
	assert.Equal(t, "host-b", b.Host)
	assert.Equal(t, &verifier.Identity{Identity: identity, Issuer: issuer}, b.RequiredIdentity)
	assert.Equal(t, []string{"systemd.unit"}, b.Protect)

	// Back to host-a's: the identity and selectors stay.
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--host", "host-a")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "  digest: "+before+"\n")
	b, err = bus.baselines.Get(ctx, target)
	require.NoError(t, err)
	assert.Equal(t, before, b.Digest)
	assert.Equal(t, &verifier.Identity{Identity: identity, Issuer: issuer}, b.RequiredIdentity)
	assert.Equal(t, []string{"systemd.unit"}, b.Protect)

	r = run(t, "baseline", "get", target.String(), "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	got, err := snapshot.Parse([]byte(r.stdout))
	require.NoError(t, err)
	d, err := got.Digest()
	require.NoError(t, err)
	assert.Equal(t, before, d)

	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--host", "host-c")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no snapshot of "+target.String()+" from host-c")
}

// baseline put stores the required identity too; half of one is a usage
// error, found before connecting.
func TestBaselinePutIdentity(t *testing.T) {
	bus := startApproveBus(t)
	target := fixtureTarget(t, "after.json")
	r := run(t, "baseline", "put", fixture("after.json"), "--nats", bus.url,
		"--identity", "release@example.com", "--issuer", "https://accounts.example.com")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, "^STORED: "+regexp.QuoteMeta(target.String())+"\n  digest: sha256:[0-9a-f]{64}\n"+
		"  required_identity: release@example\\.com \\(issuer https://accounts\\.example\\.com\\)\n$", r.stdout)
	b, err := bus.baselines.Get(t.Context(), target)
	require.NoError(t, err)
	assert.Equal(t, &verifier.Identity{Identity: "release@example.com", Issuer: "https://accounts.example.com"}, b.RequiredIdentity)
	assert.Empty(t, b.Host, "put directly")

	for name, args := range map[string][]string{
		"put, identity alone":     {"put", fixture("before.json"), "--identity", "release@example.com"},
		"put, issuer alone":       {"put", fixture("before.json"), "--issuer", "https://accounts.example.com"},
		"approve, issuer alone":   {"approve", target.String(), "--issuer", "https://accounts.example.com"},
		"approve, blank identity": {"approve", target.String(), "--identity", " ", "--issuer", "https://accounts.example.com"},
	} {
		t.Run(name, func(t *testing.T) {
			r := run(t, append(append([]string{"baseline"}, args...), "--nats", "nats://127.0.0.1:1")...)
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "--identity and --issuer go together")
			assert.NotContains(t, r.stderr, "connect to NATS")
			assert.Empty(t, r.stdout)
		})
	}
}
