package verifier_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// The records the verifier stores read with their one decoder, and their
// one encoder writes them again byte for byte, the bytes json.Marshal
// writes (HTML-escaped characters, U+2028, quotes in hosts, snapshot
// values and reports).
func TestStoredRecordsRoundTrip(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, nil)
	weird := snapshot.Data{"active_state": snapshot.String("a<b>&c \u2028 \u2029 é \"q\" \\ \t"), "main_pid": snapshot.Int(7), "user": snapshot.String("<agent>")}
	base := snap(weird)
	raw, err := base.Canonical()
	require.NoError(t, err)
	_, err = verifier.NewBaselines(js, "/t/x").Put(ctx, events.Baseline{Snapshot: raw})
	require.NoError(t, err)
	var ids []string
	for i, host := range []string{"h<1>&", "h\u2028x", "plain", "q\"uote"} {
		d := snapshot.Data{"active_state": snapshot.String(fmt.Sprintf("x<%d>&\u2029", i)), "main_pid": snapshot.Int(int64(i)), "user": snapshot.String("<agent>")}
		if i == 2 {
			d = weird
		}
		ids = append(ids, publishSnapshot(ctx, t, js, host, snap(d)))
	}
	for _, id := range ids {
		verdictOf(ctx, t, js, id)
	}
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		kv, err := js.KeyValue(ctx, topology.BucketVerdicts)
		require.NoError(t, err)
		keys, err := kv.ListKeys(ctx)
		require.NoError(t, err)
		n := 0
		for range keys.Keys() {
			n++
		}
		if n < len(ids) {
			return fmt.Errorf("%d verdict records", n)
		}
		return nil
	})
	check := func(bucket string, decode func([]byte) (any, error), want int) {
		kv, err := js.KeyValue(ctx, bucket)
		require.NoError(t, err)
		w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
		require.NoError(t, err)
		defer func() { _ = w.Stop() }()
		n := 0
		for e := range w.Updates() {
			if e == nil {
				break
			}
			v, err := decode(e.Value())
			require.NoError(t, err)
			again, err := verifier.EncodeRecord(v)
			require.NoError(t, err)
			require.Equal(t, string(again), string(e.Value()))
			marshaled, err := json.Marshal(v)
			require.NoError(t, err)
			require.Equal(t, string(marshaled), string(e.Value()))
			n++
		}
		require.GreaterOrEqual(t, n, want)
	}
	// The host at its baseline ("plain") has a verdict record (at_baseline)
	// and no latest snapshot stored.
	check(verifier.BucketEvidence, func(b []byte) (any, error) { return verifier.DecodeObservation(b) }, len(ids)-1)
	check(topology.BucketVerdicts, func(b []byte) (any, error) { return verifier.DecodeVerdictRecord(b) }, len(ids))
}

// A verdict record written by a verifier before verdict.*.v2 (its report
// in the earlier shape) still reads, as the report it says in the current
// shape.
func TestStatusReadsRecordsOfEarlierVerifiers(t *testing.T) {
	ctx, url, js := server(t)
	start(ctx, t, url, nil)
	data, err := os.ReadFile(filepath.Join("..", "..", "pkg", "events", "testdata", "verdict.drift.v1.golden.json"))
	require.NoError(t, err)
	rec := `{"id":"01920000-0000-7000-8000-000000000009","time":"2026-10-06T03:09:41Z","evidence_id":"01920000-0000-7000-8000-000000000001","evidence_sequence":3,"verdict":` + string(data) + `}`
	kv, err := js.KeyValue(ctx, topology.BucketVerdicts)
	require.NoError(t, err)
	target := events.Target{Kind: "systemd.unit", Identifier: "agent worker.service"}
	_, err = kv.Put(ctx, topology.VerdictKey("web-01.example.com", target), []byte(rec))
	require.NoError(t, err)

	got, err := verifier.NewStatus(js).Get(ctx, "web-01.example.com", target)
	require.NoError(t, err)
	require.NotNil(t, got.Verdict.Report)
	require.NoError(t, got.Verdict.Validate())
	b, err := got.Verdict.Report.Marshal()
	require.NoError(t, err)
	require.Equal(t, `{"changes":[{"fields":[`+
		`{"after":{"present":true,"value":4190},"before":{"present":true,"value":3036},"field":"main_pid"},`+
		`{"after":{"present":false},"before":{"present":true,"value":"agent"},"field":"user"}],"kind":"systemd.unit","status":"changed"}],`+
		`"protected":[],"report_schema_version":1,"status":"drift","target":{"identifier":"agent worker.service","kind":"systemd.unit"}}`, string(b))
	all, err := verifier.NewStatus(js).List(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
}
