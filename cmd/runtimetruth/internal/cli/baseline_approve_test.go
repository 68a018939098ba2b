package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
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
	mode      verifier.Enrollment
	// signers and keys are each host's collector key (mode not off).
	signers map[string]*dsse.Signer
	keys    map[string]string
}

// startApproveBus runs a verifier pinning the first key of each host
// (enrollment first-use): collected evidence is signed and authentic.
func startApproveBus(t *testing.T) *approveBus {
	t.Helper()
	return startApproveBusWith(t, verifier.EnrollFirstUse)
}

// startApproveBusWith runs a verifier with enrollment mode; under off,
// collected evidence is unsigned, as no verifier checks it.
func startApproveBusWith(t *testing.T, mode verifier.Enrollment) *approveBus {
	t.Helper()
	t.Setenv("RUNTIMETRUTH_STATE_DIR", t.TempDir()) // the snapshots reviews keep
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	cfg := verifier.NewDefaultConfig()
	cfg.Instance = "test"
	cfg.Enrollment = string(mode)
	v, err := verifier.New(cfg, verifier.Settings{Conn: nc})
	require.NoError(t, err)
	startComponent(t, v)
	return &approveBus{url: url, js: js, ver: v, baselines: verifier.NewBaselines(js, ""), mode: mode,
		signers: map[string]*dsse.Signer{}, keys: map[string]string{}}
}

// startComponent starts c, a service component, and shuts it down when
// the test ends.
func startComponent(t *testing.T, c lifecycle.Component) {
	t.Helper()
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, c.Shutdown(ctx))
	})
}

// collected publishes s as collected on host (signed by host's key unless
// the verifier runs with enrollment off) and waits until the verifier has
// recorded it as the host's latest snapshot of its target.
func (b *approveBus) collected(t *testing.T, host string, s *snapshot.Snapshot) {
	t.Helper()
	ctx := t.Context()
	var opts []binding.Option
	if b.mode != verifier.EnrollOff {
		sg, ok := b.signers[host]
		if !ok {
			sg = signtest.Random()
			b.signers[host], b.keys[host] = sg, sg.KeyID()
		}
		opts = append(opts, binding.WithSigner(sg))
	}
	p := b.publish(t, host, s, opts...)
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

// publish publishes s as collected on host, with opts, and returns the
// payload; it does not wait for the verifier.
func (b *approveBus) publish(t *testing.T, host string, s *snapshot.Snapshot, opts ...binding.Option) events.EvidenceCollected {
	t.Helper()
	p, err := events.NewEvidenceCollected(host, s, time.Minute)
	require.NoError(t, err)
	m, _, err := binding.NewMsg(events.Source("collector", host), p, opts...)
	require.NoError(t, err)
	_, err = b.js.PublishMsg(t.Context(), m)
	require.NoError(t, err)
	return p
}

func fixtureDigest(t *testing.T, name string) string {
	t.Helper()
	return digestOf(t, fixtureSnapshot(t, name))
}

// noBaseline checks that target still has no baseline.
func (b *approveBus) noBaseline(t *testing.T, target events.Target) {
	t.Helper()
	_, err := b.baselines.Get(t.Context(), target)
	require.ErrorIs(t, err, verifier.ErrNoBaseline)
}

// baseline approve promotes the latest snapshot of a target, once the
// operator names the digest the preview showed: without --host while
// every host agrees, with --host to pick one when they differ;
// --identity and --issuer set the signer the baseline requires, kept by a
// later approve that does not name one.
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

	// One host: the preview shows it, and approves nothing.
	bus.collected(t, "host-a", fixtureSnapshot(t, "before.json"))
	obs, err := bus.baselines.Observations(ctx, target)
	require.NoError(t, err)
	require.Len(t, obs, 1)
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url)
	assert.Equal(t, 1, r.code)
	head, rest, ok := strings.Cut(r.stdout, "  evidence:\n")
	require.True(t, ok, "the review shows what the snapshot says: %s", r.stdout)
	evidence, tail, ok := strings.Cut(rest, "  current baseline:")
	require.True(t, ok, r.stdout)
	assert.Equal(t, "REVIEW: "+target.String()+" (not approved)\n  digest: "+before+"\n  host: host-a\n"+
		"  key: "+bus.keys["host-a"]+" (enrolled)\n"+
		"  collected: "+obs[0].Time.UTC().Format(time.RFC3339)+" (evidence "+obs[0].EvidenceID+")\n", head)
	assert.Contains(t, evidence, "    live git.repository (git, git rev-parse/status)\n      branch: main\n      detached: false\n")
	assert.Contains(t, evidence, "      head_commit: 1111111111111111111111111111111111111111\n")
	assert.Equal(t, " none (approving creates it)\n"+
		"approve exactly this snapshot with:\n  runtimetruth baseline approve "+target.String()+" --nats "+bus.url+" --host host-a --digest "+before+"\n", tail)
	assert.Equal(t, "runtimetruth: error: nothing approved: review the snapshot above, then approve it with --digest "+before+"\n", r.stderr)
	bus.noBaseline(t, target)
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--digest", before, "--dry-run")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "REVIEW: ")
	assert.Contains(t, r.stderr, "nothing approved (--dry-run)")
	bus.noBaseline(t, target)

	// One host: approve needs no --host.
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--by", "reviewer", "--digest", before)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "APPROVED: "+target.String()+"\n  digest: "+before+"\n  host: host-a\n  key: "+bus.keys["host-a"]+"\n", r.stdout)
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
	for _, args := range [][]string{{"--digest", after}, {}} {
		r = run(t, append([]string{"baseline", "approve", target.String(), "--nats", bus.url}, args...)...)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "ambiguous snapshot")
		assert.Contains(t, r.stderr, "--host HOST")
		assert.Empty(t, r.stdout)
	}
	b, err = bus.baselines.Get(ctx, target)
	require.NoError(t, err)
	assert.Equal(t, before, b.Digest, "unchanged")

	// The preview of host-b's shows its changes against the baseline, as
	// runtimetruth diff does.
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--host", "host-b")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "  digest: "+after+"\n  host: host-b\n  key: "+bus.keys["host-b"]+" (enrolled)\n")
	assert.Regexp(t, "  current baseline: "+before+` \(approved \S+ by reviewer, from host-a\)\n`, r.stdout)
	res, err := diff.Compare(fixtureSnapshot(t, "before.json"), fixtureSnapshot(t, "after.json"))
	require.NoError(t, err)
	want := "  changes against the current baseline:\n    " + strings.ReplaceAll(res.Render(), "\n", "\n    ") + "\n"
	assert.Contains(t, strings.ReplaceAll(r.stdout, "    \n", "\n"), strings.ReplaceAll(want, "    \n", "\n"))
	assert.Contains(t, r.stdout, "dirty: false -> true")

	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--host", "host-b", "--digest", after,
		"--identity", identity, "--issuer", issuer, "--protect", "systemd.unit")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "APPROVED: "+target.String()+"\n  digest: "+after+"\n  host: host-b\n  key: "+bus.keys["host-b"]+"\n"+
		"  required_identity: "+identity+" (issuer "+issuer+")\n", r.stdout)
	b, err = bus.baselines.Get(ctx, target)
	require.NoError(t, err)
	assert.Equal(t, after, b.Digest)
	assert.Equal(t, "host-b", b.Host)
	assert.Equal(t, &events.SignerIdentity{Identity: identity, Issuer: issuer}, b.RequiredIdentity)
	assert.Equal(t, []string{"systemd.unit"}, b.Protect)

	// Back to host-a's: the identity and selectors stay.
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--host", "host-a", "--digest", before)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "  digest: "+before+"\n")
	b, err = bus.baselines.Get(ctx, target)
	require.NoError(t, err)
	assert.Equal(t, before, b.Digest)
	assert.Equal(t, &events.SignerIdentity{Identity: identity, Issuer: issuer}, b.RequiredIdentity)
	assert.Equal(t, []string{"systemd.unit"}, b.Protect)

	r = run(t, "baseline", "get", target.String(), "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, before, digestOf(t, parseSnapshot(t, []byte(r.stdout))))

	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--host", "host-c", "--digest", before)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "no snapshot of "+target.String()+" from host-c")

	r = run(t, "baseline", "approve", target.String(), "--nats", "nats://127.0.0.1:1", "--digest", "sha256:abc")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, `--digest "sha256:abc": want sha256:<64 hex digits>`)
	assert.NotContains(t, r.stderr, "connect to NATS", "checked before connecting")
}

// The digests approve takes are where operators look: baseline show lists
// each host's latest snapshot by digest and key, status prints it per
// host (for --json too, as an added member).
func TestBaselineShowAndStatusPrintTheDigest(t *testing.T) {
	bus := startApproveBus(t)
	target := fixtureTarget(t, "before.json")
	before, after := fixtureDigest(t, "before.json"), fixtureDigest(t, "after.json")
	bus.collected(t, "host-a", fixtureSnapshot(t, "before.json"))
	r := run(t, "baseline", "show", target.String(), "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "BASELINE: "+target.String()+"\n  none\n")
	assert.Regexp(t, `host-a\s+`+regexp.QuoteMeta(before)+`\s+`+regexp.QuoteMeta(bus.keys["host-a"]), r.stdout)

	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--digest", before, "--by", "reviewer")
	require.Equal(t, 0, r.code, r.stderr)
	bus.collected(t, "host-b", fixtureSnapshot(t, "after.json"))
	r = run(t, "baseline", "show", target.String(), "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Regexp(t, "BASELINE: "+regexp.QuoteMeta(target.String())+"\n  digest: "+before+"\n  approved: \\S+ by reviewer\n  host: host-a\n", r.stdout)
	assert.Regexp(t, `host-a\s+`+regexp.QuoteMeta(before)+`\s+\S+\s+\S+\s+the baseline`, r.stdout)
	assert.Regexp(t, `host-b\s+`+regexp.QuoteMeta(after)+`\s+`+regexp.QuoteMeta(bus.keys["host-b"]), r.stdout)
	r = run(t, "baseline", "show", target.String(), "--nats", bus.url, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var doc struct {
		Baseline struct{ Digest string } `json:"baseline"`
		Latest   []struct {
			Host, Digest, Key string
		} `json:"latest"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	assert.Equal(t, before, doc.Baseline.Digest)
	require.Len(t, doc.Latest, 2)
	assert.Equal(t, after, doc.Latest[1].Digest)
	assert.Equal(t, bus.keys["host-b"], doc.Latest[1].Key)

	var recs []map[string]any
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		r = run(t, "status", "--nats", bus.url, "--json")
		if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil {
			return err
		}
		if len(recs) != 2 {
			return fmt.Errorf("%d verdicts", len(recs))
		}
		return nil
	})
	for i, want := range []string{before, after} {
		assert.Equal(t, want, recs[i]["latest_digest"])
		assert.Contains(t, recs[i], "verdict", "the record's members stay")
		assert.Contains(t, recs[i], "evidence_id")
	}
	r = run(t, "status", "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "LATEST DIGEST")
	assert.Regexp(t, `host-a\s+\S+\s+\S+\s+`+before, r.stdout)
	assert.Regexp(t, `host-b\s+\S+\s+\S+\s+`+after, r.stdout)
}

// A snapshot that changed between the review and the approval is refused,
// naming both digests, and nothing changes.
func TestBaselineApproveRefusesAChangedSnapshot(t *testing.T) {
	bus := startApproveBus(t)
	target := fixtureTarget(t, "before.json")
	bus.collected(t, "host-a", fixtureSnapshot(t, "before.json"))
	r := run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--json")
	assert.Equal(t, 1, r.code)
	var preview struct {
		Version int    `json:"report_schema_version"`
		Status  string `json:"status"`
		Digest  string `json:"digest"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &preview))
	assert.Equal(t, 1, preview.Version)
	assert.Equal(t, "preview", preview.Status)
	reviewed := preview.Digest
	require.Equal(t, fixtureDigest(t, "before.json"), reviewed)

	bus.collected(t, "host-a", fixtureSnapshot(t, "after.json"))
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--digest", reviewed)
	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "the latest snapshot of "+target.String()+" from host-a is "+fixtureDigest(t, "after.json")+", not the reviewed "+reviewed)
	assert.Contains(t, r.stderr, "nothing approved")
	bus.noBaseline(t, target)
}

// An unchanged target gets a new digest at every collection (only
// captured_at differs): the snapshot the review showed stays approvable
// by its digest while the host reports the same evidence, at a person's
// pace, and is the one adopted; the review shows what it says.
func TestBaselineApproveAtAPersonsPace(t *testing.T) {
	bus := startApproveBus(t)
	target := fixtureTarget(t, "before.json")
	bus.collected(t, "host-a", fixtureSnapshot(t, "before.json"))
	r := run(t, "baseline", "approve", target.String(), "--nats", bus.url)
	assert.Equal(t, 1, r.code)
	reviewed := fixtureDigest(t, "before.json")
	assert.Contains(t, r.stdout, "  digest: "+reviewed)
	assert.Contains(t, r.stdout, "  evidence:\n", "the review shows what the snapshot says")
	assert.Regexp(t, `\n      [a-z_]+: `, r.stdout, "field by field")

	later := fixtureSnapshot(t, "before.json")
	later.CapturedAt = snapshot.FormatTime(time.Now().UTC())
	bus.collected(t, "host-a", later) // the host collects again while the operator reads
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--digest", reviewed)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "APPROVED")
	b, err := bus.baselines.Get(t.Context(), target)
	require.NoError(t, err)
	assert.Equal(t, reviewed, b.Digest, "the reviewed snapshot is adopted")
}

// Only evidence signed by an enrolled key of its host is approved: once
// the host's key is revoked, the preview says approve would refuse the
// snapshot (and prints no command to approve it), and approve refuses it.
func TestBaselineApproveRefusesARevokedKey(t *testing.T) {
	bus := startApproveBus(t)
	target := fixtureTarget(t, "before.json")
	digest := fixtureDigest(t, "before.json")
	bus.collected(t, "host-a", fixtureSnapshot(t, "before.json"))
	r := run(t, "host", "revoke", "host-a", "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)

	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "  key: "+bus.keys["host-a"]+" (NOT AN ENROLLED KEY OF THIS HOST: approve refuses it)\n")
	assert.Contains(t, r.stdout, "the key is revoked")
	assert.NotContains(t, r.stdout, "approve exactly this snapshot")
	assert.Contains(t, r.stderr, "approve would refuse this snapshot")

	for _, args := range [][]string{{}, {"--allow-unauthenticated"}} {
		r = run(t, append([]string{"baseline", "approve", target.String(), "--nats", bus.url, "--digest", digest}, args...)...)
		assert.Equal(t, 1, r.code)
		assert.Contains(t, r.stderr, "evidence signed by a key that is not its host's enrolled one: "+bus.keys["host-a"])
		assert.Contains(t, r.stderr, "the key is revoked")
		assert.Empty(t, r.stdout)
		bus.noBaseline(t, target)
	}
}

// With enrollment off nothing is authenticated: the preview says so in
// capitals, approve refuses without --allow-unauthenticated and says in
// capitals what it approved with it.
func TestBaselineApproveUnauthenticated(t *testing.T) {
	bus := startApproveBusWith(t, verifier.EnrollOff)
	target := fixtureTarget(t, "before.json")
	digest := fixtureDigest(t, "before.json")
	bus.collected(t, "host-a", fixtureSnapshot(t, "before.json"))

	r := run(t, "baseline", "approve", target.String(), "--nats", bus.url)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "  key: NONE: UNAUTHENTICATED EVIDENCE.")
	assert.Contains(t, r.stdout, "--digest "+digest+" --allow-unauthenticated\n")
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--json")
	assert.Equal(t, 1, r.code)
	var preview map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &preview))
	assert.Equal(t, false, preview["authentic"])
	assert.Contains(t, preview["refusal"], "unauthenticated evidence")
	assert.NotContains(t, preview, "key")

	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--digest", digest)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "unauthenticated evidence: the latest snapshot of "+target.String()+" from host-a carries no verified signature")
	assert.Contains(t, r.stderr, "--allow-unauthenticated")
	bus.noBaseline(t, target)

	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--digest", digest, "--allow-unauthenticated")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "APPROVED: "+target.String()+"\n  digest: "+digest+"\n  host: host-a\n"+
		"  key: NONE: UNAUTHENTICATED EVIDENCE approved (--allow-unauthenticated): nothing proves this host sent it\n", r.stdout)
	b, err := bus.baselines.Get(t.Context(), target)
	require.NoError(t, err)
	assert.Equal(t, digest, b.Digest)
}

// --json: the preview carries the digest, host, key, time and the changes
// against the current baseline as a diff report; the approval what it
// adopted.
func TestBaselineApproveJSON(t *testing.T) {
	bus := startApproveBus(t)
	target := fixtureTarget(t, "before.json")
	before, after := fixtureDigest(t, "before.json"), fixtureDigest(t, "after.json")
	bus.collected(t, "host-a", fixtureSnapshot(t, "before.json"))
	r := run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--digest", before, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var approved map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &approved))
	assert.Equal(t, "approved", approved["status"])
	assert.Equal(t, before, approved["digest"])
	assert.Equal(t, bus.keys["host-a"], approved["key"])
	assert.Equal(t, true, approved["authentic"])
	assert.NotZero(t, approved["revision"])

	bus.collected(t, "host-a", fixtureSnapshot(t, "after.json"))
	obs, err := bus.baselines.Observations(t.Context(), target)
	require.NoError(t, err)
	r = run(t, "baseline", "approve", target.String(), "--nats", bus.url, "--json")
	assert.Equal(t, 1, r.code)
	var preview struct {
		Status      string        `json:"status"`
		Target      events.Target `json:"target"`
		Digest      string        `json:"digest"`
		Host        string        `json:"host"`
		Key         string        `json:"key"`
		KeySequence uint64        `json:"key_sequence"`
		CollectedAt time.Time     `json:"collected_at"`
		EvidenceID  string        `json:"evidence_id"`
		Authentic   bool          `json:"authentic"`
		Current     struct {
			Digest string `json:"digest"`
		} `json:"current_baseline"`
		Diff *report.Report `json:"diff"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &preview))
	assert.Equal(t, "preview", preview.Status)
	assert.Equal(t, target, preview.Target)
	assert.Equal(t, after, preview.Digest)
	assert.Equal(t, "host-a", preview.Host)
	assert.Equal(t, bus.keys["host-a"], preview.Key)
	assert.Equal(t, uint64(2), preview.KeySequence)
	assert.True(t, obs[0].Time.Equal(preview.CollectedAt))
	assert.Equal(t, obs[0].EvidenceID, preview.EvidenceID)
	assert.True(t, preview.Authentic)
	assert.Equal(t, before, preview.Current.Digest)
	require.NotNil(t, preview.Diff)
	res, err := diff.Compare(fixtureSnapshot(t, "before.json"), fixtureSnapshot(t, "after.json"))
	require.NoError(t, err)
	assert.Equal(t, report.New(res, nil), preview.Diff, "the report of runtimetruth diff --json")
	assert.Contains(t, r.stderr, "nothing approved")
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
	assert.Equal(t, &events.SignerIdentity{Identity: "release@example.com", Issuer: "https://accounts.example.com"}, b.RequiredIdentity)
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
