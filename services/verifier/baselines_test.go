package verifier_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// buckets starts a server with the verifier's topology in place, without a
// verifier.
func buckets(t *testing.T) (context.Context, jetstream.JetStream) {
	t.Helper()
	ctx, _, js := server(t)
	require.NoError(t, verifier.Topology(1, topology.ConsumerVerifier).Ensure(ctx, js))
	return ctx, js
}

func canonical(t *testing.T, s *snapshot.Snapshot) []byte {
	t.Helper()
	b, err := s.Canonical()
	require.NoError(t, err)
	return b
}

// announcements returns the baseline.changed events published so far.
func announcements(ctx context.Context, t *testing.T, js jetstream.JetStream) []events.BaselineChanged {
	t.Helper()
	var out []events.BaselineChanged
	for _, p := range streamEvents(ctx, t, js, topology.StreamBaselines) {
		if c, ok := p.Payload.(events.BaselineChanged); ok { // not a verifier's host.key.changed
			out = append(out, c)
			assert.Equal(t, "/cli/alice", p.Source)
		}
	}
	return out
}

func TestBaselinesPutGetListDelete(t *testing.T) {
	ctx, js := buckets(t)
	bls := verifier.NewBaselines(js, "/cli/alice")
	_, err := bls.Get(ctx, testTarget)
	require.ErrorIs(t, err, verifier.ErrNoBaseline)

	one := snap(unit(1))
	// Not canonical on input: stored canonical.
	pretty, err := one.Marshal(true)
	require.NoError(t, err)
	put, err := bls.Put(ctx, events.Baseline{Snapshot: pretty, Protect: []string{"systemd.unit.main_pid", "systemd.unit.main_pid"}, ApprovedBy: "alice"})
	require.NoError(t, err)
	assert.Equal(t, testTarget, put.Target)
	assert.Equal(t, digest(t, one), put.Digest)
	assert.Equal(t, string(canonical(t, one)), string(put.Snapshot))
	assert.Equal(t, []string{"systemd.unit.main_pid"}, put.Protect, "selectors de-duplicated")
	assert.False(t, put.ApprovedAt.IsZero())
	assert.NotZero(t, put.Revision)

	got, err := bls.Get(ctx, testTarget)
	require.NoError(t, err)
	assert.Equal(t, put.Digest, got.Digest)
	assert.Equal(t, put.Revision, got.Revision)
	assert.True(t, put.ApprovedAt.Equal(got.ApprovedAt))

	again, err := bls.Put(ctx, events.Baseline{Snapshot: pretty, Protect: []string{"systemd.unit.main_pid"}, ApprovedBy: "alice"})
	require.NoError(t, err, "putting the same baseline again changes nothing")
	assert.Equal(t, put.Revision, again.Revision)

	_, err = bls.Put(ctx, events.Baseline{Snapshot: pretty})
	require.ErrorIs(t, err, verifier.ErrUnchangedDigest, "a selector-only change cannot be announced")

	two := snap(unit(2))
	upd, err := bls.Put(ctx, events.Baseline{Snapshot: canonical(t, two), ApprovedBy: "alice"})
	require.NoError(t, err)
	assert.Greater(t, upd.Revision, put.Revision)

	other := events.Target{Kind: "git.repository", Identifier: "/srv/agent"}
	repo := snapshot.New(snapshot.Target{Kind: other.Kind, Identifier: other.Identifier})
	_, err = bls.Put(ctx, events.Baseline{Snapshot: canonical(t, repo)})
	require.NoError(t, err)

	list, err := bls.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, other, list[0].Target, "ordered by target")
	assert.Equal(t, upd.Digest, list[1].Digest)

	require.NoError(t, bls.Delete(ctx, testTarget, "alice"))
	require.ErrorIs(t, bls.Delete(ctx, testTarget, "alice"), verifier.ErrNoBaseline)
	_, err = bls.Get(ctx, testTarget)
	require.ErrorIs(t, err, verifier.ErrNoBaseline)

	assert.Equal(t, []events.BaselineChanged{
		{Target: testTarget, Change: events.BaselineCreated, Digest: put.Digest, Actor: "alice"},
		{Target: testTarget, Change: events.BaselineUpdated, Digest: upd.Digest, PreviousDigest: put.Digest, Actor: "alice"},
		{Target: other, Change: events.BaselineCreated, Digest: digest(t, repo)},
		{Target: testTarget, Change: events.BaselineRemoved, PreviousDigest: upd.Digest, Actor: "alice"},
	}, announcements(ctx, t, js))
}

// A baseline keeps its snapshot's captured_at as written: stored, read
// back and digested verbatim, as RuntimeTruth digests the file (here
// captured_at is written +00:00, not Z).
func TestBaselineKeepsCapturedAtVerbatim(t *testing.T) {
	ctx, js := buckets(t)
	bls := verifier.NewBaselines(js, "/cli/alice")
	s := snap(unit(1))
	s.CapturedAt = "2026-11-30T12:00:00+00:00"
	file, err := s.Marshal(true)
	require.NoError(t, err)
	require.Contains(t, string(file), `"captured_at": "2026-11-30T12:00:00+00:00"`)
	canon, err := canonjson.Transform(file) // RFC 8785 of the file as written
	require.NoError(t, err)
	sum := sha256.Sum256(canon)
	want := "sha256:" + hex.EncodeToString(sum[:])

	put, err := bls.Put(ctx, events.Baseline{Snapshot: file, ApprovedBy: "alice"})
	require.NoError(t, err)
	assert.Equal(t, want, put.Digest)
	assert.Equal(t, string(canon), string(put.Snapshot))

	got, err := bls.Get(ctx, testTarget)
	require.NoError(t, err)
	assert.Equal(t, want, got.Digest)
	assert.Equal(t, string(canon), string(got.Snapshot))
	stored, err := snapshot.Parse(got.Snapshot)
	require.NoError(t, err)
	assert.Equal(t, "2026-11-30T12:00:00+00:00", stored.CapturedAt)
	assert.Equal(t, want, digest(t, stored))

	// The same instant written Z is another snapshot, with its own digest.
	s.CapturedAt = "2026-11-30T12:00:00Z"
	assert.NotEqual(t, want, digest(t, s))
	assert.Equal(t, []events.BaselineChanged{
		{Target: testTarget, Change: events.BaselineCreated, Digest: want, Actor: "alice"},
	}, announcements(ctx, t, js))
}

// The attestation record stored next to a baseline is not listed as a
// baseline, and goes when the baseline is deleted.
func TestBaselinesListAndDeleteSkipTheAttestationRecord(t *testing.T) {
	ctx, js := buckets(t)
	bls := verifier.NewBaselines(js, "/cli/alice")
	_, err := bls.Put(ctx, events.Baseline{Snapshot: canonical(t, snap(unit(1)))})
	require.NoError(t, err)
	kv, err := js.KeyValue(ctx, topology.BucketBaselines)
	require.NoError(t, err)
	_, err = kv.Put(ctx, attestation.RecordKey(testTarget), []byte(`{}`))
	require.NoError(t, err)

	list, err := bls.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, testTarget, list[0].Target)

	require.NoError(t, bls.Delete(ctx, testTarget, "alice"))
	_, err = kv.Get(ctx, attestation.RecordKey(testTarget))
	require.ErrorIs(t, err, jetstream.ErrKeyNotFound)
	list, err = bls.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
}

func TestBaselinesRejectInvalidInput(t *testing.T) {
	ctx, js := buckets(t)
	bls := verifier.NewBaselines(js, "/cli/alice")
	good := canonical(t, snap(unit(1)))
	for name, tc := range map[string]struct {
		bl   events.Baseline
		want string
	}{
		"malformed snapshot": {events.Baseline{Snapshot: json.RawMessage(`{"schema_version":1`)}, "snapshot"},
		"duplicate key":      {events.Baseline{Snapshot: json.RawMessage(`{"schema_version":1,"schema_version":1}`)}, "duplicate"},
		"other target":       {events.Baseline{Target: events.Target{Kind: "systemd.unit", Identifier: "x"}, Snapshot: good}, "the snapshot's target is"},
		"wrong digest":       {events.Baseline{Snapshot: good, Digest: "sha256:" + strings.Repeat("0", 64)}, "digest"},
		"unknown selector":   {events.Baseline{Snapshot: good, Protect: []string{"systemd.units"}}, "unknown selector"},
		"half an identity":   {events.Baseline{Snapshot: good, RequiredIdentity: &events.SignerIdentity{Issuer: "https://accounts.example"}}, "required_identity"},
		"control characters": {events.Baseline{Snapshot: good, ApprovedBy: "al\nice"}, "approved_by"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := bls.Put(ctx, tc.bl)
			require.ErrorIs(t, err, verifier.ErrInvalidBaseline)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	list, err := bls.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list, "nothing stored")
	assert.Empty(t, announcements(ctx, t, js), "nothing announced")
}

// firstUse runs a verifier that authenticates evidence, pinning the first
// key of each host (as `up` does for its own host).
func firstUse(c *verifier.Config) { c.Enrollment = string(verifier.EnrollFirstUse) }

// fleet signs each host's evidence with that host's own key, as its
// collector does.
type fleet struct {
	signers map[string]*dsse.Signer
	keys    map[string]string
}

func newFleet() *fleet {
	return &fleet{signers: map[string]*dsse.Signer{}, keys: map[string]string{}}
}

// approving starts a JetStream server and a verifier that authenticates
// evidence (firstUse) on it, and returns alice's baselines and an empty
// fleet whose snapshots she approves.
func approving(t *testing.T) (context.Context, jetstream.JetStream, *verifier.Baselines, *fleet) {
	t.Helper()
	ctx, url, js := server(t)
	start(ctx, t, url, firstUse)
	return ctx, js, verifier.NewBaselines(js, "/cli/alice"), newFleet()
}

// publish publishes s as collected on host, signed by host's key, and
// returns the event id.
func (f *fleet) publish(ctx context.Context, t *testing.T, js jetstream.JetStream, host string, s *snapshot.Snapshot) string {
	t.Helper()
	sg, ok := f.signers[host]
	if !ok {
		sg, f.keys[host] = signer(t)
		f.signers[host] = sg
	}
	m, id := signedMsg(t, host, s, sg)
	_, err := js.PublishMsg(ctx, m)
	require.NoError(t, err)
	return id
}

func TestApprove(t *testing.T) {
	ctx, js, bls, hosts := approving(t)

	_, err := bls.Approve(ctx, testTarget, verifier.ApproveOptions{})
	require.ErrorIs(t, err, verifier.ErrNoSnapshot)

	// Two hosts with the same runtime: either snapshot will do.
	a, b := snap(unit(1)), snap(unit(1))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", a))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-02", b))
	bl, err := bls.Approve(ctx, testTarget, verifier.ApproveOptions{By: "alice", Digest: digest(t, b), Protect: []string{"systemd.unit"}})
	require.NoError(t, err)
	assert.Equal(t, digest(t, b), bl.Digest, "the newest of equivalent snapshots")
	assert.Equal(t, "web-02", bl.Host)
	require.NotNil(t, bl.Evidence)
	assert.Equal(t, hosts.keys["web-02"], bl.Evidence.SignedBy, "what was adopted, and who signed it")

	// The hosts now differ: the approver must say which one.
	c := snap(unit(3))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", c))
	_, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{By: "alice", Digest: digest(t, c)})
	require.ErrorIs(t, err, verifier.ErrAmbiguous)
	assert.Contains(t, err.Error(), "web-02")

	bl, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{Host: "web-01", By: "alice", Digest: digest(t, c)})
	require.NoError(t, err)
	assert.Equal(t, digest(t, c), bl.Digest)
	assert.Equal(t, []string{"systemd.unit"}, bl.Protect, "the selectors of the baseline replaced are kept")

	_, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{Host: "web-03", Digest: digest(t, c)})
	require.ErrorIs(t, err, verifier.ErrNoSnapshot)

	obs, err := bls.Observations(ctx, testTarget)
	require.NoError(t, err)
	require.Len(t, obs, 2)
	assert.Equal(t, "web-01", obs[0].Host)
	assert.Equal(t, digest(t, c), obs[0].Digest)

	// The next snapshot of web-01 passes; web-02 drifts.
	assert.Equal(t, events.StatusPass, verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", snap(unit(3)))).Status)
	v := verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-02", snap(unit(1))))
	assert.Equal(t, events.StatusDrift, v.Status)
	require.NotNil(t, v.Report)
	require.Len(t, v.Report.Changes, 1)
	assert.Equal(t, "main_pid", v.Report.Changes[0].Fields[0].Field)
	assert.Equal(t, []string{"systemd.unit"}, v.Report.Protected)
}

// Approve adopts only the digest the operator reviewed: a snapshot that
// changed between review (Candidate) and approval is refused, naming
// both digests, and changes nothing; so is an approval naming no digest.
func TestApproveOnlyTheReviewedDigest(t *testing.T) {
	ctx, js, bls, hosts := approving(t)
	reviewed := snap(unit(1))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", reviewed))

	c, err := bls.Candidate(ctx, testTarget, "")
	require.NoError(t, err)
	assert.Equal(t, digest(t, reviewed), c.Observation.Digest)
	assert.Equal(t, "web-01", c.Observation.Host)
	assert.Equal(t, hosts.keys["web-01"], c.Observation.SignedBy)
	assert.NoError(t, c.Unauthentic)
	assert.Nil(t, c.Current)

	// The host sends another snapshot before the operator approves.
	changed := snap(unit(2))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", changed))
	noBaseline := func() { _, err := bls.Get(ctx, testTarget); require.ErrorIs(t, err, verifier.ErrNoBaseline) }
	for name, tc := range map[string]struct {
		digest string
		want   error
		says   []string
	}{
		"the reviewed snapshot changed since": {digest(t, reviewed), verifier.ErrDigestChanged, []string{digest(t, reviewed), digest(t, changed), "from web-01"}},
		"no digest":                           {"", verifier.ErrNoDigest, []string{digest(t, changed)}},
		"not a digest":                        {"latest", verifier.ErrDigestChanged, []string{`not the reviewed latest`}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := bls.Approve(ctx, testTarget, verifier.ApproveOptions{Digest: tc.digest, By: "alice"})
			require.ErrorIs(t, err, tc.want)
			for _, s := range tc.says {
				assert.Contains(t, err.Error(), s)
			}
			noBaseline()
		})
	}
	assert.Empty(t, announcements(ctx, t, js), "nothing announced")

	bl, err := bls.Approve(ctx, testTarget, verifier.ApproveOptions{Digest: digest(t, changed), By: "alice"})
	require.NoError(t, err)
	assert.Equal(t, digest(t, changed), bl.Digest)
}

// TestApproveAtAPersonsPace: an unchanged target's snapshots differ only
// in captured_at, so every collection has a new digest; the snapshot the
// operator reviewed (Reviewed, its digest Digest) stays approvable while
// the host reports the same evidence, and is what is adopted. Once the
// evidence changed it is refused, naming both digests and what changed.
// (Before, any collection after the review refused it: "the latest
// snapshot is not the reviewed one" although nothing had changed.)
func TestApproveAtAPersonsPace(t *testing.T) {
	ctx, js, bls, hosts := approving(t)
	reviewed := snap(unit(1))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", reviewed))
	c, err := bls.Candidate(ctx, testTarget, "")
	require.NoError(t, err)
	review := c.Observation.Snapshot // what the operator reads
	for range 3 {                    // collections while the operator reads
		verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", snap(unit(1))))
	}
	c, err = bls.Candidate(ctx, testTarget, "")
	require.NoError(t, err)
	require.NotEqual(t, digest(t, reviewed), c.Observation.Digest, "the latest snapshot has a new digest")

	_, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{Digest: digest(t, reviewed), By: "alice"})
	require.ErrorIs(t, err, verifier.ErrDigestChanged, "without the reviewed snapshot, only the latest")
	tampered := snap(unit(1))
	_, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{Digest: digest(t, reviewed), Reviewed: mustCanonical(t, tampered), By: "alice"})
	require.ErrorIs(t, err, verifier.ErrDigestChanged, "a snapshot that is not the reviewed digest")

	bl, err := bls.Approve(ctx, testTarget, verifier.ApproveOptions{Digest: digest(t, reviewed), Reviewed: review, By: "alice"})
	require.NoError(t, err)
	assert.Equal(t, digest(t, reviewed), bl.Digest, "the reviewed snapshot is adopted")
	assert.Equal(t, "web-01", bl.Host)

	// The evidence changes: the reviewed snapshot is refused, naming both
	// digests and the change.
	drift := snap(unit(2))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", drift))
	_, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{Digest: digest(t, reviewed), Reviewed: review, By: "bob"})
	require.ErrorIs(t, err, verifier.ErrDigestChanged)
	for _, s := range []string{digest(t, reviewed), digest(t, drift), "main_pid"} {
		assert.Contains(t, err.Error(), s)
	}
	cur, err := bls.Get(ctx, testTarget)
	require.NoError(t, err)
	assert.Equal(t, digest(t, reviewed), cur.Digest, "nothing changed")
}

func mustCanonical(t *testing.T, s *snapshot.Snapshot) []byte {
	t.Helper()
	b, err := s.Canonical()
	require.NoError(t, err)
	return b
}

// Approve adopts only authentic evidence: signed by a key that is, at
// approval, an enrolled key of the host the snapshot came from. A key the
// registry holds as pending or revoked, another host's key, or a host the
// registry does not know are each refused with their reason.
func TestApproveOnlyAuthenticEvidence(t *testing.T) {
	ctx, js, bls, hosts := approving(t)
	s := snap(unit(1))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-01", s))
	verdictOf(ctx, t, js, hosts.publish(ctx, t, js, "web-02", snap(unit(2))))
	key, other := hosts.keys["web-01"], hosts.keys["web-02"]
	kv, err := js.KeyValue(ctx, topology.BucketHosts)
	require.NoError(t, err)
	pinned, err := kv.Get(ctx, events.Token("web-01"))
	require.NoError(t, err)
	registry := func(t *testing.T, keys ...events.HostKey) {
		t.Helper()
		if keys == nil {
			require.NoError(t, kv.Delete(ctx, events.Token("web-01")))
			return
		}
		v, err := json.Marshal(events.HostRecord{Host: "web-01", Keys: keys})
		require.NoError(t, err)
		_, err = kv.Put(ctx, events.Token("web-01"), v)
		require.NoError(t, err)
	}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	hostKey := func(id string, state events.KeyState) events.HostKey {
		return events.HostKey{Key: id, State: state, FirstSeen: at, Changed: at, By: "alice"}
	}

	for _, tc := range []struct {
		name string
		keys []events.HostKey
		want error
	}{
		{"the key is pending", []events.HostKey{hostKey(key, events.KeyPending)}, verifier.ErrNotEnrolled},
		{"the key is revoked", []events.HostKey{hostKey(key, events.KeyRevoked), hostKey(other, events.KeyEnrolled)}, verifier.ErrRevoked},
		{"the key is not the host's", []events.HostKey{hostKey(other, events.KeyEnrolled)}, verifier.ErrNoSuchKey},
		{"the host is not in the registry", nil, verifier.ErrNoSuchHost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			registry(t, tc.keys...)
			c, err := bls.Candidate(ctx, testTarget, "web-01")
			require.NoError(t, err)
			require.ErrorIs(t, c.Unauthentic, verifier.ErrSignerNotEnrolled)
			require.ErrorIs(t, c.Unauthentic, tc.want)
			_, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{Host: "web-01", Digest: digest(t, s), By: "alice", AllowUnauthenticated: true})
			require.ErrorIs(t, err, verifier.ErrSignerNotEnrolled, "AllowUnauthenticated does not cover a bad signer")
			require.ErrorIs(t, err, tc.want)
			assert.Contains(t, err.Error(), key)
			_, err = bls.Get(ctx, testTarget)
			require.ErrorIs(t, err, verifier.ErrNoBaseline)
		})
	}

	// Its key enrolled again, the same snapshot is adopted.
	_, err = kv.Put(ctx, events.Token("web-01"), pinned.Value())
	require.NoError(t, err)
	bl, err := bls.Approve(ctx, testTarget, verifier.ApproveOptions{Host: "web-01", Digest: digest(t, s), By: "alice"})
	require.NoError(t, err)
	assert.Equal(t, digest(t, s), bl.Digest)
	assert.Equal(t, key, bl.Evidence.SignedBy)
}

// Under enrollment off nothing is authenticated: Approve refuses the
// latest snapshot unless told to adopt unauthenticated evidence.
func TestApproveUnauthenticated(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, func(c *verifier.Config) { c.Enrollment = string(verifier.EnrollOff) })
	bls := verifier.NewBaselines(js, "/cli/alice")
	s := snap(unit(1))
	verdictOf(ctx, t, js, publishSnapshot(ctx, t, js, "web-01", s))

	c, err := bls.Candidate(ctx, testTarget, "")
	require.NoError(t, err)
	require.ErrorIs(t, c.Unauthentic, verifier.ErrUnauthenticated)
	assert.Empty(t, c.Observation.SignedBy)

	_, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{Digest: digest(t, s), By: "alice"})
	require.ErrorIs(t, err, verifier.ErrUnauthenticated)
	assert.Contains(t, err.Error(), "enrollment off")
	_, err = bls.Get(ctx, testTarget)
	require.ErrorIs(t, err, verifier.ErrNoBaseline)

	bl, err := bls.Approve(ctx, testTarget, verifier.ApproveOptions{Digest: digest(t, s), By: "alice", AllowUnauthenticated: true})
	require.NoError(t, err)
	assert.Equal(t, digest(t, s), bl.Digest)
	assert.Empty(t, bl.Evidence.SignedBy)
}

// recorded waits until the latest verdict of host's target is that of the
// evidence evidenceID (the verdict record is written after the verdict is
// published) and returns it.
func recorded(ctx context.Context, t *testing.T, js jetstream.JetStream, host, evidenceID string) *verifier.VerdictRecord {
	t.Helper()
	var rec *verifier.VerdictRecord
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		var err error
		rec, err = verifier.NewStatus(js).Get(ctx, host, testTarget)
		if err == nil && rec.EvidenceID != evidenceID {
			err = fmt.Errorf("the latest verdict is of %s", rec.EvidenceID)
		}
		return err
	})
	return rec
}

// A snapshot with its baseline's evidence (most of a fleet's) is not kept
// in evidence-latest; its verdict record says so, and Observations and
// Approve take the baseline it matched as the host's latest snapshot: the
// current one, or one the bucket's history keeps; past that history, the
// host's next collection is needed.
func TestApproveAtBaseline(t *testing.T) {
	ctx, js, bls, hosts := approving(t)
	base, err := bls.Put(ctx, events.Baseline{Snapshot: canonical(t, snap(unit(1))), ApprovedBy: "alice"})
	require.NoError(t, err)
	evidence, err := js.KeyValue(ctx, verifier.BucketEvidence)
	require.NoError(t, err)
	stored := func(host string) verifier.Observation {
		t.Helper()
		e, err := evidence.Get(ctx, topology.VerdictKey(host, testTarget))
		require.NoError(t, err)
		var o verifier.Observation
		require.NoError(t, json.Unmarshal(e.Value(), &o))
		return o
	}

	// web-01 drifts, then comes back to the baseline; web-02 only ever
	// reports the baseline.
	drifted := snap(unit(2))
	id := hosts.publish(ctx, t, js, "web-01", drifted)
	require.Equal(t, events.StatusDrift, verdictOf(ctx, t, js, id).Status)
	assert.False(t, recorded(ctx, t, js, "web-01", id).AtBaseline)
	back := hosts.publish(ctx, t, js, "web-01", snap(unit(1)))
	require.Equal(t, events.StatusPass, verdictOf(ctx, t, js, back).Status)
	assert.True(t, recorded(ctx, t, js, "web-01", back).AtBaseline)
	only := hosts.publish(ctx, t, js, "web-02", snap(unit(1)))
	assert.True(t, recorded(ctx, t, js, "web-02", only).AtBaseline)

	assert.Equal(t, digest(t, drifted), stored("web-01").Digest, "the drifted snapshot stays stored")
	_, err = evidence.Get(ctx, topology.VerdictKey("web-02", testTarget))
	require.ErrorIs(t, err, jetstream.ErrKeyNotFound, "a snapshot at its baseline is not stored")

	obs, err := bls.Observations(ctx, testTarget)
	require.NoError(t, err)
	require.Len(t, obs, 2)
	for i, want := range []string{back, only} {
		assert.True(t, obs[i].AtBaseline)
		assert.Equal(t, base.Digest, obs[i].Digest)
		assert.Equal(t, want, obs[i].EvidenceID)
		assert.JSONEq(t, string(base.Snapshot), string(obs[i].Snapshot))
		assert.Equal(t, hosts.keys[obs[i].Host], obs[i].SignedBy, "the signer of the verdict's evidence")
	}

	// Approving a host at the baseline changes nothing (never the drift
	// it has left).
	again, err := bls.Approve(ctx, testTarget, verifier.ApproveOptions{By: "bob", Digest: base.Digest})
	require.NoError(t, err)
	assert.Equal(t, base.Digest, again.Digest)
	assert.Equal(t, base.Revision, again.Revision)
	assert.Len(t, announcements(ctx, t, js), 1, "nothing announced")

	// The baseline is replaced; web-01's latest snapshot is still the old
	// one's evidence, found in the history: approving web-01 restores it.
	replaced, err := bls.Put(ctx, events.Baseline{Snapshot: canonical(t, snap(unit(3))), ApprovedBy: "alice"})
	require.NoError(t, err)
	o, err := bls.Approve(ctx, testTarget, verifier.ApproveOptions{Host: "web-01", By: "alice", Digest: base.Digest})
	require.NoError(t, err)
	assert.Equal(t, base.Digest, o.Digest)
	assert.Greater(t, o.Revision, replaced.Revision)

	// Past the history the bucket keeps, that baseline is gone.
	for i := range topology.BaselineHistory {
		_, err := bls.Put(ctx, events.Baseline{Snapshot: canonical(t, snap(unit(int64(10+i)))), ApprovedBy: "alice"})
		require.NoError(t, err)
	}
	_, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{Host: "web-02", By: "alice", Digest: base.Digest})
	require.ErrorIs(t, err, verifier.ErrBaselineGone)
	assert.Contains(t, err.Error(), "from web-02")
	_, err = bls.Observations(ctx, testTarget)
	require.ErrorIs(t, err, verifier.ErrBaselineGone)

	// Its next collection is stored as the drift it now is.
	next := snap(unit(1))
	id = hosts.publish(ctx, t, js, "web-02", next)
	require.Equal(t, events.StatusDrift, verdictOf(ctx, t, js, id).Status)
	recorded(ctx, t, js, "web-02", id)
	o, err = bls.Approve(ctx, testTarget, verifier.ApproveOptions{Host: "web-02", By: "alice", Digest: digest(t, next)})
	require.NoError(t, err)
	assert.Equal(t, digest(t, next), o.Digest)
}

func TestBaselineApprovedAtIsKept(t *testing.T) {
	ctx, js := buckets(t)
	bls := verifier.NewBaselines(js, "/cli/alice")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	_, err := bls.Put(ctx, events.Baseline{Snapshot: canonical(t, snap(unit(1))), ApprovedAt: at})
	require.NoError(t, err)
	got, err := bls.Get(ctx, testTarget)
	require.NoError(t, err)
	assert.Equal(t, at, got.ApprovedAt.UTC())
}
