package auditor_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

var hosts = []string{"web-01.example.com", "web-02.example.com", "db 03"}

// testConsumer is the durable consumer the tests audit through: the
// topology's auditor consumer with a short ack wait, so that redeliveries
// happen within the test.
const testConsumer = "auditor-test"

type env struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	dir string
}

// newEnv starts a JetStream server with the topology and the test
// consumers (ack wait ackWait).
func newEnv(t *testing.T, ackWait time.Duration) *env {
	t.Helper()
	_, url := natstest.RunJetStream(t)
	nc, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, topology.Ensure(ctx, js, 1))
	for _, s := range auditor.DefaultStreams {
		_, err := js.CreateOrUpdateConsumer(ctx, s, jetstream.ConsumerConfig{
			Durable: testConsumer, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait,
			DeliverPolicy: jetstream.DeliverAllPolicy, MaxAckPending: topology.AuditorMaxAckPending, MaxDeliver: -1,
		})
		require.NoError(t, err)
	}
	return &env{url: url, nc: nc, js: js, dir: t.TempDir()}
}

func (e *env) config() auditor.Config {
	cfg := auditor.NewDefaultConfig()
	cfg.NATS.URL = e.url
	cfg.Instance = "test"
	cfg.Consumer = testConsumer
	cfg.IdleWait = 100 * time.Millisecond
	cfg.JSONL.Path = filepath.Join(e.dir, "audit", "audit.jsonl")
	cfg.Checkpoint.Interval = 0
	cfg.StartTimeout = 30 * time.Second
	// Short enough that a restart after Abort waits little, long enough
	// that a busy machine does not lose it.
	cfg.Lease.TTL = 5 * time.Second
	return cfg
}

// recorders holds the telemetry of each auditor newAuditor made.
var recorders telemetrytest.Recorders[*auditor.Auditor]

// newAuditor is auditor.New reporting its metrics to a telemetrytest
// Recorder, whose counters counted reads.
func newAuditor(t testing.TB, cfg auditor.Config, set auditor.Settings) (*auditor.Auditor, error) {
	t.Helper()
	return recorders.Make(t, func(p telemetry.Providers) (*auditor.Auditor, error) {
		set.Telemetry.MeterProvider = p.MeterProvider
		return auditor.New(cfg, set)
	})
}

// counted is the value of a's counter name: the sum of its data points
// whose attributes include attrs (a must be made by newAuditor).
func counted(t testing.TB, a *auditor.Auditor, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	return recorders.Sum(t, a, name, attrs...)
}

// waitCounted waits, polling every poll for up to within, until a's
// counter name (with attrs, as counted reads it) is at least want.
func waitCounted(t *testing.T, a *auditor.Auditor, within, poll time.Duration, want int64, name string, attrs ...attribute.KeyValue) {
	t.Helper()
	natstest.CheckFor(t, within, poll, func() error {
		if got := counted(t, a, name, attrs...); got < want {
			return fmt.Errorf("%s: %d, want at least %d", name, got, want)
		}
		return nil
	})
}

func start(t *testing.T, cfg auditor.Config, prep ...func(*auditor.Auditor)) *auditor.Auditor {
	t.Helper()
	a, err := newAuditor(t, cfg, auditor.Settings{})
	require.NoError(t, err)
	for _, p := range prep {
		p(a)
	}
	require.NoError(t, a.Start(context.Background()))
	return a
}

func stop(t *testing.T, a *auditor.Auditor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, a.Shutdown(ctx))
}

// publish publishes n mixed events from offset on, every tenth one also a
// dead-letter record, and returns how many messages it published.
func (e *env) publish(t *testing.T, offset, n int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	auditortest.Publish(ctx, t, e.js, hosts, offset, n)
	total := n
	for i := offset; i < offset+n; i += 10 {
		_, err := e.js.PublishMsg(ctx, auditortest.Msg(t, auditortest.DeadLetter(i), 1_000_000+i))
		require.NoError(t, err)
		total++
	}
	return total
}

// stored counts the messages of every stream.
func (e *env) stored(t *testing.T) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, s := range auditor.DefaultStreams {
		st, err := e.js.Stream(context.Background(), s)
		require.NoError(t, err)
		out[s] = st.CachedInfo().State.LastSeq
	}
	return out
}

// startAndPublish starts an auditor on cfg (prepared by prep), whose
// chains already hold before links, publishes count events from offset
// on (e.publish) and waits until the chains hold those too; it returns
// the running auditor and how many messages it published.
func (e *env) startAndPublish(t *testing.T, cfg auditor.Config, before, offset, count int, prep ...func(*auditor.Auditor)) (*auditor.Auditor, int) {
	t.Helper()
	a := start(t, cfg, prep...)
	n := e.publish(t, offset, count)
	waitLinks(t, a, before+n)
	return a, n
}

// runOver is startAndPublish, then stop: one run of an auditor over count
// new events. It returns how many messages it published.
func (e *env) runOver(t *testing.T, cfg auditor.Config, before, offset, count int) int {
	t.Helper()
	a, n := e.startAndPublish(t, cfg, before, offset, count)
	stop(t, a)
	return n
}

// waitConsumed waits, up to within, until the consumers named have
// nothing pending or unacknowledged on any stream.
func (e *env) waitConsumed(t *testing.T, within time.Duration, consumers ...string) {
	t.Helper()
	natstest.CheckFor(t, within, 50*time.Millisecond, func() error {
		for _, name := range consumers {
			for _, s := range auditor.DefaultStreams {
				c, err := e.js.Consumer(context.Background(), s, name)
				if err != nil {
					return err
				}
				if info := c.CachedInfo(); info.NumAckPending+int(info.NumPending) > 0 {
					return fmt.Errorf("%s on %s: %d unacknowledged, %d pending", name, s, info.NumAckPending, info.NumPending)
				}
			}
		}
		return nil
	})
}

// waitHeads waits until the auditor's chains hold want links in all.
func waitLinks(t *testing.T, a *auditor.Auditor, want int) {
	t.Helper()
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		n := 0
		for _, h := range a.Heads() {
			n += int(h.Seq)
		}
		if n != want {
			return fmt.Errorf("%d links, want %d", n, want)
		}
		return nil
	})
}

// readLog verifies the JSONL log and returns its records.
func readLog(t *testing.T, path string) []link.Record {
	t.Helper()
	files, err := jsonl.Files(path)
	require.NoError(t, err)
	rep, err := chain.Run(context.Background(), chain.NewHasher(nil), nil, jsonl.Source(files))
	require.NoError(t, err)
	require.Nil(t, rep.Broken, "the log verifies")
	return readRecords(t, path)
}

// readRecords returns the records of the JSONL log at path (a file, a
// directory or a glob), without verifying it.
func readRecords(t *testing.T, path string) []link.Record {
	t.Helper()
	files, err := jsonl.Files(path)
	require.NoError(t, err)
	var out []link.Record
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, ln := range splitLines(data) {
			r, err := link.Parse(ln)
			require.NoError(t, err)
			out = append(out, r)
		}
	}
	return out
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		if i > 0 {
			out = append(out, b[:i])
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}

// exactlyOnce checks that records hold every stream message exactly once,
// each chain in stream order.
func exactlyOnce(t *testing.T, recs []link.Record, stored map[string]uint64) {
	t.Helper()
	seen := map[string]map[uint64]int{}
	last := map[string]uint64{}
	for _, r := range recs {
		m := r.Meta
		if seen[m.Stream] == nil {
			seen[m.Stream] = map[uint64]int{}
		}
		seen[m.Stream][m.StreamSeq]++
		assert.Greater(t, m.StreamSeq, last[r.Chain], "chain %s in stream order", r.Chain)
		last[r.Chain] = m.StreamSeq
	}
	for s, n := range stored {
		assert.Len(t, seen[s], int(n), "stream %s: every message recorded", s)
		for seq := uint64(1); seq <= n; seq++ {
			assert.Equal(t, 1, seen[s][seq], "stream %s seq %d recorded once", s, seq)
		}
	}
}

// faultySink wraps a sink: while hang is set, writes block until their
// context ends (after storing the links, with storeThenHang); while fail
// is set, they fail (after storing, when failAfter is set: the sink
// stored the links but the caller sees an error).
type faultySink struct {
	auditor.Sink
	hang, fail, failAfter, storeThenHang atomic.Bool
	mu                                   sync.Mutex
	writes                               int
}

var errInjected = errors.New("injected sink failure")

func (f *faultySink) Write(ctx context.Context, recs []link.Record) error {
	f.mu.Lock()
	f.writes++
	f.mu.Unlock()
	if f.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	if f.storeThenHang.Load() {
		if err := f.Sink.Write(ctx, recs); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	}
	if f.fail.Load() {
		if f.failAfter.Load() {
			if err := f.Sink.Write(ctx, recs); err != nil {
				return err
			}
		}
		return errInjected
	}
	return f.Sink.Write(ctx, recs)
}

// startFaulty starts an auditor on cfg with its sink named wrap (each
// sink, when wrap is "") wrapped in a faultySink, and returns the auditor
// and the faultySink last made.
func startFaulty(t *testing.T, cfg auditor.Config, wrap string) (*auditor.Auditor, *faultySink) {
	t.Helper()
	var f *faultySink
	a := start(t, cfg, func(a *auditor.Auditor) {
		a.WrapSinks(func(s auditor.Sink) auditor.Sink {
			if wrap != "" && s.Name() != wrap {
				return s
			}
			f = &faultySink{Sink: s}
			return f
		})
	})
	return a, f
}

// hangAfterStoring makes f's writes store the links, then hang, and
// returns how many writes f saw before.
func (f *faultySink) hangAfterStoring() int {
	f.mu.Lock()
	base := f.writes
	f.mu.Unlock()
	f.storeThenHang.Store(true)
	return base
}

// waitWrites waits, up to within, until f saw want writes.
func (f *faultySink) waitWrites(t *testing.T, within time.Duration, want int) {
	t.Helper()
	natstest.CheckFor(t, within, 10*time.Millisecond, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.writes < want {
			return fmt.Errorf("%d writes, want %d", f.writes, want)
		}
		return nil
	})
}

func (f *faultySink) Heads(ctx context.Context) (map[string]link.Head, error) {
	return f.Sink.(auditor.HeadReader).Heads(ctx)
}

func (f *faultySink) Settle(ctx context.Context) error {
	if s, ok := f.Sink.(auditor.Settler); ok {
		return s.Settle(ctx)
	}
	return nil
}

func (f *faultySink) Links(ctx context.Context, c string, after uint64, fn func(link.Record) error) error {
	return f.Sink.(auditor.LinkReader).Links(ctx, c, after, fn)
}

func (f *faultySink) EventIDs(ctx context.Context, fn func(chain, id string) error) error {
	return f.Sink.(auditor.IDReader).EventIDs(ctx, fn)
}

func (f *faultySink) Linked(ctx context.Context, c string, ids []string) (map[string]bool, error) {
	return f.Sink.(auditor.IDReader).Linked(ctx, c, ids)
}
