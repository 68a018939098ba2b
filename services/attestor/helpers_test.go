package attestor_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/logtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/attestor"
)

// The tests start servers, clients and attestors; none may leave a
// goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// net/http keeps idle connections to the test Fulcio and TSA.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// bus starts a JetStream server for the test and returns a context that
// ends with the test (within a minute), the server's URL, and a
// connection and client to it.
func bus(t *testing.T) (context.Context, string, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	return ctx, url, nc, js
}

// startAttestor returns a started attestor of cfg and set.
func startAttestor(ctx context.Context, t *testing.T, cfg attestor.Config, set attestor.Settings) *attestor.Attestor {
	t.Helper()
	a, err := attestor.New(cfg, set)
	require.NoError(t, err)
	require.NoError(t, a.Start(ctx))
	return a
}

// baselines returns the baselines bucket, which an attestor ensures when
// it starts.
func baselines(ctx context.Context, t *testing.T, js jetstream.JetStream) jetstream.KeyValue {
	t.Helper()
	kv, err := js.KeyValue(ctx, topology.BucketBaselines)
	require.NoError(t, err)
	return kv
}

func fixture(tb testing.TB, name string) *snapshot.Snapshot {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "pkg", "evidence", "testdata", "snapshots", name))
	require.NoError(tb, err)
	s, err := snapshot.Parse(data)
	require.NoError(tb, err)
	return s
}

func targetOf(s *snapshot.Snapshot) events.Target {
	return events.Target{Kind: s.Target.Kind, Identifier: s.Target.Identifier}
}

// putBaseline stores s as its target's baseline the way the verifier's
// Baselines.Put does (its JSON shape), requiring identity from issuer.
func putBaseline(ctx context.Context, t *testing.T, kv jetstream.KeyValue, s *snapshot.Snapshot, identity, issuer string) string {
	t.Helper()
	canon, err := s.Canonical()
	require.NoError(t, err)
	digest, err := s.Digest()
	require.NoError(t, err)
	value, err := json.Marshal(map[string]any{
		"target": targetOf(s), "snapshot": json.RawMessage(canon), "digest": digest,
		"required_identity": map[string]string{"issuer": issuer, "identity": identity},
		"approved_at":       time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), "approved_by": "reviewer",
	})
	require.NoError(t, err)
	_, err = kv.Put(ctx, topology.BaselineKey(targetOf(s)), value)
	require.NoError(t, err)
	return digest
}

func newLogger(b *logtest.Buffer) *slog.Logger { return slog.New(slog.NewJSONHandler(b, nil)) }
