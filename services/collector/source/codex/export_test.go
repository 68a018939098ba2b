package codex

import (
	"context"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// CollectTimed is Collect plus its wall time and the part of it spent
// blocked on Codex, for BenchmarkProbeResolveMCP.
func CollectTimed(ctx context.Context, cwd string, o Options) (snapshot.Target, []snapshot.Record, time.Duration, time.Duration, error) {
	t, recs, st, err := collect(ctx, cwd, o)
	return t, recs, st.wall, st.codex, err
}

// InstructionsRecord fingerprints instruction sources as the probe of
// account as does.
func InstructionsRecord(ctx context.Context, cwd string, sources []string, as *Account) (snapshot.Record, error) {
	return instructionsRecord(ctx, cwd, sources, as)
}
