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
}

// readTarget reads host and target's page.
func readTarget(ctx context.Context, js jetstream.JetStream, host string, target events.Target) (Target, error) {
	f, err := readFleet(ctx, js, Query{Host: host, Kind: target.Kind})
	if err != nil {
		return Target{}, err
	}
	var t Target
	found := false
	for _, r := range f.all {
		if r.Host == host && r.Target == target {
			t.Row, found = r, true
		}
	}
	if !found {
		return Target{}, fmt.Errorf("%w for %s on %s", verifier.ErrNoVerdict, target, host)
	}
	obs, err := verifier.NewBaselines(js, "").Observations(ctx, target)
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return Target{}, err
	}
	for i := range obs {
		if obs[i].Host == host {
			t.Latest = &obs[i]
			if t.Evidence, err = snapshot.Parse(obs[i].Snapshot); err != nil {
				return Target{}, fmt.Errorf("the latest snapshot of %s on %s: %w", target, host, err)
			}
		}
	}
	return t, nil
}
