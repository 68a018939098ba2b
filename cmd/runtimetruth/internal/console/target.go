package console

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// Target is a host and target's page: its latest verdict, whose drift
// report is the one `runtimetruth verify --json` writes (the verifier
// builds it with the same diff and report code), and the host's latest
// snapshot as the verifier keeps it.
type Target struct {
	Row
	// Latest is the host's latest snapshot (none when the verifier keeps
	// none, e.g. before its first authentic evidence), Evidence the same
	// parsed.
	Latest   *verifier.Observation
	Evidence *snapshot.Snapshot
	// Baseline is the target's baseline (nil when it has none), Refusal
	// why an approval of Latest would be refused (Candidate.Unauthentic;
	// "" when it would not), Unsigned that Latest carries no signature
	// (approvable only with "allow unauthenticated").
	Baseline *verifier.Baseline
	Refusal  string
	Unsigned bool
	// Signature is the baseline's attestation (nil without a baseline).
	Signature *Signature
	// Keys are the host's keys in the registry.
	Keys []events.HostKey
	// Revision is the verdicts bucket's revision the page was read at,
	// where its live updates start.
	Revision uint64
	// Approved is the digest an approval just adopted; Self the page's
	// own URL (where an action returns to).
	Approved, Self string
	// User is who views the page (the approve forms are for approvers).
	User User
}

// readTarget reads host and target's page.
func readTarget(ctx context.Context, js jetstream.JetStream, host string, target events.Target) (Target, error) {
	f, err := readFleet(ctx, js, Query{Host: host, Kind: target.Kind})
	if err != nil {
		return Target{}, err
	}
	t := Target{Revision: f.Revision}
	found := false
	for _, r := range f.all {
		if r.Host == host && r.Target == target {
			t.Row, found = r, true
		}
	}
	if !found {
		return Target{}, fmt.Errorf("%w for %s on %s", verifier.ErrNoVerdict, target, host)
	}
	t.Keys = f.hosts[host].Keys
	c, err := verifier.NewBaselines(js, "").Candidate(ctx, target, host)
	switch {
	case errors.Is(err, verifier.ErrNoSnapshot), errors.Is(err, verifier.ErrBaselineGone), errors.Is(err, jetstream.ErrBucketNotFound):
		return t, nil // nothing to show or approve
	case err != nil:
		return Target{}, err
	}
	t.Latest, t.Baseline = &c.Observation, c.Current
	if c.Current != nil {
		if t.Signature, err = readSignature(ctx, js, t, c.Current.Digest, c.Current.RequiredIdentity); err != nil {
			return Target{}, err
		}
	}
	if c.Unauthentic != nil {
		t.Refusal, t.Unsigned = c.Unauthentic.Error(), errors.Is(c.Unauthentic, verifier.ErrUnauthenticated)
	}
	if t.Evidence, err = snapshot.Parse(c.Observation.Snapshot); err != nil {
		return Target{}, fmt.Errorf("the latest snapshot of %s on %s: %w", target, host, err)
	}
	return t, nil
}
