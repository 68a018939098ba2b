package verifier_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// The tests start servers, clients and verifiers; none may leave a
// goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testTarget is the target of the snapshots built by snap.
var testTarget = events.Target{Kind: "systemd.unit", Identifier: "agent worker.service"}

// server starts a JetStream server and returns its URL and a client.
func server(t *testing.T) (context.Context, string, jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	t.Cleanup(cancel)
	_, url := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, url)
	return ctx, url, js
}

// testConfig is the default configuration with first-use enrollment: the
// tests' collectors sign with signtest's keys, pinned on first use.
func testConfig() verifier.Config {
	cfg := verifier.NewDefaultConfig()
	cfg.Enrollment = string(verifier.EnrollFirstUse)
	return cfg
}

// start runs a verifier against url until the test ends.
func start(ctx context.Context, t *testing.T, url string, edit func(*verifier.Config)) *verifier.Verifier {
	t.Helper()
	cfg := testConfig()
	cfg.NATS.URL = url
	cfg.Instance = "test"
	if edit != nil {
		edit(&cfg)
	}
	v, err := newVerifier(t, cfg, verifier.Settings{})
	require.NoError(t, err)
	require.NoError(t, v.Start(ctx))
	t.Cleanup(func() { require.NoError(t, v.Shutdown(context.Background())) })
	return v
}

// recorders holds the telemetry of each verifier newVerifier made.
var recorders telemetrytest.Recorders[*verifier.Verifier]

// newVerifier is verifier.New reporting to a telemetrytest Recorder, whose
// counters counted reads.
func newVerifier(t testing.TB, cfg verifier.Config, set verifier.Settings) (*verifier.Verifier, error) {
	t.Helper()
	return recorders.Make(t, func(p telemetry.Providers) (*verifier.Verifier, error) {
		set.Telemetry = p
		return verifier.New(cfg, set)
	})
}

// counted is the value of v's counter name: the sum of its data points
// whose attributes include attrs (v must be made by newVerifier).
func counted(t testing.TB, v *verifier.Verifier, name string, attrs ...attribute.KeyValue) uint64 {
	t.Helper()
	return uint64(recorders.Sum(t, v, name, attrs...))
}

// verdictCount is the number of verdicts of status v published.
func verdictCount(t testing.TB, v *verifier.Verifier, status events.Status) uint64 {
	t.Helper()
	return counted(t, v, verifier.MetricVerdicts, verifier.AttrStatus.String(string(status)))
}

var clock atomic.Int64

// snap builds a snapshot of testTarget; each call is captured a second
// later than the previous one, so each has its own digest.
func snap(data snapshot.Data) *snapshot.Snapshot {
	s := snapshot.New(snapshot.Target{Kind: testTarget.Kind, Identifier: testTarget.Identifier}, snapshot.Record{
		Plane: snapshot.Live, Kind: "systemd.unit",
		Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
		Data:   data,
	})
	s.CapturedAt = snapshot.FormatTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC).Add(time.Duration(clock.Add(1)) * time.Second))
	return s
}

func unit(pid int64) snapshot.Data {
	return snapshot.Data{"active_state": snapshot.String("active"), "main_pid": snapshot.Int(pid), "user": snapshot.String("agent")}
}

// evidenceMsg builds the evidence event of s collected on host.
func evidenceMsg(t testing.TB, host string, s *snapshot.Snapshot) (*nats.Msg, string) {
	t.Helper()
	p, err := events.NewEvidenceCollected(host, s, time.Minute)
	require.NoError(t, err)
	m, e, err := binding.NewMsg(events.Source("collector", host), p, signtest.Sign(host))
	require.NoError(t, err)
	return m, e.ID()
}

// publishSnapshot publishes s as collected on host and returns the event id.
func publishSnapshot(ctx context.Context, t testing.TB, js jetstream.JetStream, host string, s *snapshot.Snapshot) string {
	t.Helper()
	m, id := evidenceMsg(t, host, s)
	_, err := js.PublishMsg(ctx, m)
	require.NoError(t, err)
	return id
}

func digest(t testing.TB, s *snapshot.Snapshot) string {
	t.Helper()
	d, err := s.Digest()
	require.NoError(t, err)
	return d
}

// published is one event read back from a stream.
type published struct {
	Seq     uint64
	Subject string
	ID      string
	Type    string
	Source  string
	Payload events.Payload
}

// streamEvents reads every message of a stream and decodes it strictly.
func streamEvents(ctx context.Context, t testing.TB, js jetstream.JetStream, stream string) []published {
	t.Helper()
	var out []published
	for _, raw := range natstest.Stored(ctx, t, js, stream) {
		e, err := binding.FromNATS(raw.Header, raw.Data)
		require.NoError(t, err)
		p, err := binding.Decode[events.Payload](e)
		require.NoError(t, err)
		require.Equal(t, p.NATSSubject(), raw.Subject)
		out = append(out, published{Seq: raw.Sequence, Subject: raw.Subject, ID: e.ID(), Type: e.Type(), Source: e.Source(), Payload: p})
	}
	return out
}

// verdicts returns the verdicts published so far, by evidence id.
func verdicts(ctx context.Context, t testing.TB, js jetstream.JetStream) (map[string][]events.Verdict, int) {
	t.Helper()
	out := map[string][]events.Verdict{}
	all := streamEvents(ctx, t, js, topology.StreamVerdicts)
	n := 0
	for _, p := range all {
		v := p.Payload.(events.Verdict)
		if v.Status == events.StatusStale {
			continue // a verdict on silence (staleVerdicts)
		}
		n++
		require.Equal(t, verifier.VerdictID(v.EvidenceID), p.ID, "the verdict id derives from the evidence id")
		out[v.EvidenceID] = append(out[v.EvidenceID], v)
	}
	return out, n
}

// verdictOf waits for the verdict of an evidence event.
func verdictOf(ctx context.Context, t testing.TB, js jetstream.JetStream, evidenceID string) events.Verdict {
	t.Helper()
	var got events.Verdict
	natstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		all, _ := verdicts(ctx, t, js)
		vs := all[evidenceID]
		if len(vs) == 0 {
			return fmt.Errorf("no verdict for %s yet", evidenceID)
		}
		got = vs[0]
		return nil
	})
	return got
}

// settled waits until a durable consumer has nothing left to deliver or
// to be acknowledged.
func settled(ctx context.Context, t testing.TB, js jetstream.JetStream, consumer string) {
	t.Helper()
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		c, err := js.Consumer(ctx, topology.StreamEvidence, consumer)
		if err != nil {
			return err
		}
		info, err := c.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 {
			return fmt.Errorf("%s: %d pending, %d unacknowledged", consumer, info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// evidenceTestdata reads a file of pkg/evidence/testdata, the fixtures
// RuntimeTruth's reports were recorded from.
func evidenceTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "pkg", "evidence", "testdata", name))
	require.NoError(t, err)
	return b
}
