package e2e_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/attestor"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/collector/inspect"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

const host = "e2e-host"

// recorder is in-memory telemetry shared by the services of a test: every
// span ended, and the metrics on demand.
type recorder struct{ *telemetrytest.Recorder }

func newRecorder(t *testing.T) *recorder { return &recorder{telemetrytest.New(t)} }

func (r *recorder) collect(t *testing.T) metricdata.ResourceMetrics { return r.Collect(t) }

// verdicts is the number of verdicts of status the verifiers reporting to
// r published.
func (r *recorder) verdicts(t *testing.T, status events.Status) int64 {
	t.Helper()
	return r.Sum(t, verifier.MetricVerdicts, verifier.AttrStatus.String(string(status)))
}

// metricCheck is one expected data point.
type metricCheck struct {
	name  string
	attrs []attribute.KeyValue
	want  int64
}

func (c metricCheck) String() string {
	kv := make([]string, len(c.attrs))
	for i, a := range c.attrs {
		kv[i] = string(a.Key) + "=" + a.Value.String()
	}
	return c.name + "{" + strings.Join(kv, ",") + "}"
}

// gitRepo makes a real repository with one commit in a temp dir.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", "one")
	return dir
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
}

// pipeline is the four services embedded on one bus, each connected as
// the user buspolicy renders for it.
type pipeline struct {
	ps  *policyServer
	nc  *nats.Conn // the operator's: the test's own reads, sign requests
	js  jetstream.JetStream
	col *collector.Collector
	ver *verifier.Verifier
	aud *auditor.Auditor
	att *attestor.Attestor
}

// startPipeline starts the auditor, verifier, attestor and collector (in
// that order; shut down in reverse) on a nats-server running the
// configuration buspolicy renders, each service connected as its rendered
// user, all reporting through p. The collector has one git target, "repo",
// collected at start and then on demand only.
func startPipeline(t *testing.T, p telemetry.Providers, repo string) *pipeline {
	t.Helper()
	ctx := t.Context()
	ps := runPolicyServer(t)
	nc, js := ps.as(t, "operator")
	dir := t.TempDir()
	pl := &pipeline{ps: ps, nc: nc, js: js}

	acfg := auditor.NewDefaultConfig()
	acfg.Instance = host
	acfg.JSONL.Path = filepath.Join(dir, "auditor", "audit.jsonl")
	acfg.Checkpoint.File = filepath.Join(dir, "auditor", "checkpoints.jsonl")
	acfg.IdleWait = 20 * time.Millisecond
	audNC, _ := ps.as(t, buspolicy.Auditor)
	aud, err := auditor.New(acfg, auditor.Settings{Conn: audNC, Telemetry: p})
	require.NoError(t, err)
	pl.aud = aud

	verNC, _ := ps.as(t, buspolicy.Verifier)
	pl.ver = newFirstUseVerifier(t, verNC, p)

	// A password-protected cosign-format key and its password file, as
	// the attestor's key mode reads them.
	key := attestationtest.WriteCosignKey(t, t.TempDir(), "correct horse battery staple")
	tcfg := attestor.NewKeyConfig(key.KeyFile, key.WritePasswordFile(t))
	tcfg.Instance = host
	attNC, _ := ps.as(t, buspolicy.Attestor)
	att, err := attestor.New(tcfg, attestor.Settings{Conn: attNC, Telemetry: p})
	require.NoError(t, err)
	pl.att = att

	colNC, _ := ps.as(t, buspolicy.Collector)
	ccfg, col := newRepoCollector(t, colNC, p, repo, time.Hour)
	pl.col = col

	startEnrolled(ctx, t, js, ccfg, col, aud, pl.ver, att)
	return pl
}

// newFirstUseVerifier is host's verifier on nc, reporting through p, which
// pins the first key of each host: the collector's evidence is authentic.
func newFirstUseVerifier(t *testing.T, nc *nats.Conn, p telemetry.Providers) *verifier.Verifier {
	t.Helper()
	cfg := verifier.NewDefaultConfig()
	cfg.Instance = host
	cfg.Enrollment = string(verifier.EnrollFirstUse) // the collector's key pinned: its evidence authentic
	ver, err := verifier.New(cfg, verifier.Settings{Conn: nc, Telemetry: p})
	require.NoError(t, err)
	return ver
}

// newRepoCollector is host's collector on nc, reporting through p, with
// one git target, "repo", collected at start and then every interval.
func newRepoCollector(t *testing.T, nc *nats.Conn, p telemetry.Providers, repo string, interval time.Duration) (collector.Config, *collector.Collector) {
	t.Helper()
	cfg := collector.NewDefaultConfig()
	cfg.Host = host
	cfg.StateDir = filepath.Join(t.TempDir(), "collector")
	cfg.Targets = []collector.TargetConfig{{Name: "repo", Kind: collector.KindGit, Path: repo, Interval: interval}}
	col, err := collector.New(cfg, collector.Settings{Conn: nc, Telemetry: p})
	require.NoError(t, err)
	return cfg, col
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	natstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if !f() {
			return fmt.Errorf("waiting for %s", what)
		}
		return nil
	})
}

// TestPipelineTracesAndMetrics runs one target through the whole pipeline
// three times (an error verdict without a baseline, a pass after approving
// one, a drift after a new commit), signs the baseline on request, and
// checks the trace each collection leaves across the four services and
// the metrics they report.
func TestPipelineTracesAndMetrics(t *testing.T) {
	ctx := t.Context()
	rec := newRecorder(t)
	repo := gitRepo(t)
	pl := startPipeline(t, rec.Providers, repo)
	js := pl.js

	snap, err := inspect.Git(ctx, repo, inspect.Options{})
	require.NoError(t, err)
	target := events.Target{Kind: snap.Target.Kind, Identifier: snap.Target.Identifier}

	// 1. Collected at start, no baseline: an error verdict.
	waitFor(t, "the error verdict", func() bool { return rec.verdicts(t, events.StatusError) == 1 })

	// 2. Approve the snapshot reviewed, collect again: a pass.
	bls := verifier.NewBaselines(js, events.Source("e2e", host))
	review, err := bls.Candidate(ctx, target, host)
	require.NoError(t, err)
	require.NoError(t, review.Unauthentic, "signed by the collector's pinned key")
	_, err = bls.Approve(ctx, target, verifier.ApproveOptions{Host: host, By: "e2e", Digest: review.Observation.Digest})
	require.NoError(t, err)
	require.NoError(t, pl.col.CollectNow(ctx, "repo"))
	waitFor(t, "the pass verdict", func() bool { return rec.verdicts(t, events.StatusPass) == 1 })

	// The attestor signs the approved baseline on request; its span of the
	// request continues the requester's trace.
	signCtx, signer := rec.Providers.TracerProvider.Tracer("e2e").Start(ctx, "request signature")
	rep, err := attestor.RequestSign(signCtx, pl.nc, "", attestor.SignRequest{Target: target})
	signer.End()
	require.NoError(t, err)
	require.NotEmpty(t, rep.EventID)

	// 3. A new commit: drift.
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "two")
	require.NoError(t, pl.col.CollectNow(ctx, "repo"))
	waitFor(t, "the drift verdict", func() bool { return rec.verdicts(t, events.StatusDrift) == 1 })

	require.NoError(t, pl.aud.Sync(ctx))
	chainEvidence, chainVerdicts := "EVIDENCE/"+host, "VERDICTS/"+host
	heads := pl.aud.Heads()
	require.Equal(t, uint64(3), heads[chainEvidence].Seq)
	require.Equal(t, uint64(3), heads[chainVerdicts].Seq)

	t.Run("traces", func(t *testing.T) {
		var spans *traceIndex
		// The consumers' spans end once the acknowledgements are
		// confirmed, after the verdicts and links are out.
		waitFor(t, "every span", func() bool {
			spans = index(rec.Spans.Ended())
			return len(spans.named("collect git")) == 3 &&
				len(spans.consumed(topology.StreamEvidence, topology.ConsumerVerifier)) == 3 &&
				len(spans.consumed(topology.StreamEvidence, topology.ConsumerAuditor)) == 3 &&
				len(spans.consumed(topology.StreamVerdicts, topology.ConsumerAuditor)) == 3 &&
				len(spans.named("append "+topology.StreamVerdicts)) > 0
		})
		requests := spans.named("request signature")
		require.Len(t, requests, 1)
		sign := spans.childOf(requests[0], "sign "+events.AttestSubject)
		require.NotNil(t, sign, "the attestor's span is a child of the sign request's")
		assert.Equal(t, trace.SpanKindServer, sign.SpanKind())
		for _, collect := range spans.named("collect git") {
			tid := collect.SpanContext().TraceID()
			pub := spans.childOf(collect, "publish "+events.TypeEvidenceCollected)
			require.NotNil(t, pub, "the collector's publish span is a child of its collection's")
			vproc := spans.consumedChildOf(collect, topology.StreamEvidence, topology.ConsumerVerifier)
			require.NotNil(t, vproc, "the verifier's span of the evidence continues the collection's trace")
			assert.Equal(t, trace.SpanKindConsumer, vproc.SpanKind())
			assert.Equal(t, natsbus.OutcomeAck, attr(vproc, natsbus.AttrAck))
			vpub := spans.childOf(vproc, "publish "+verdictType(spans, vproc))
			require.NotNil(t, vpub, "the verdict's publish span is a child of the verifier's span")
			aev := spans.consumedChildOf(collect, topology.StreamEvidence, topology.ConsumerAuditor)
			require.NotNil(t, aev, "the auditor's span of the evidence link is in the collection's trace")
			aver := spans.consumedChildOf(vpub, topology.StreamVerdicts, topology.ConsumerAuditor)
			require.NotNil(t, aver, "the auditor's span of the verdict link is a child of the verdict's publish span")
			for _, s := range []sdktrace.ReadOnlySpan{pub, vproc, vpub, aev, aver} {
				assert.Equal(t, tid, s.SpanContext().TraceID(), "%s in the collection's trace", s.Name())
			}
			assert.True(t, spans.linked("append "+topology.StreamEvidence, aev),
				"a batch commit span links to the auditor's span of the evidence")
		}
	})

	t.Run("metrics", func(t *testing.T) {
		stream, consumer, typ := natsbus.AttrStream, natsbus.AttrConsumer, natsbus.AttrType
		checks := []metricCheck{
			// The collector.
			{collector.MetricCollectionDuration, []attribute.KeyValue{collector.AttrKind.String("git"), collector.AttrStatus.String("collected")}, 3},
			{collector.MetricSpoolDepth, nil, 0},
			{natsbus.MetricPublished, []attribute.KeyValue{stream.String(topology.StreamEvidence), typ.String(events.TypeEvidenceCollected)}, 3},
			// The verifier.
			{natsbus.MetricConsumed, []attribute.KeyValue{stream.String(topology.StreamEvidence), consumer.String(topology.ConsumerVerifier)}, 3},
			{natsbus.MetricAcked, []attribute.KeyValue{stream.String(topology.StreamEvidence), consumer.String(topology.ConsumerVerifier)}, 3},
			{natsbus.MetricHandleDuration, []attribute.KeyValue{stream.String(topology.StreamEvidence), consumer.String(topology.ConsumerVerifier),
				natsbus.AttrOutcome.String(natsbus.OutcomeAck)}, 3},
			{verifier.MetricVerdicts, []attribute.KeyValue{verifier.AttrStatus.String("error")}, 1},
			{verifier.MetricVerdicts, []attribute.KeyValue{verifier.AttrStatus.String("pass")}, 1},
			{verifier.MetricVerdicts, []attribute.KeyValue{verifier.AttrStatus.String("drift")}, 1},
			{verifier.MetricDrift, []attribute.KeyValue{verifier.AttrTargetKind.String(target.Kind), verifier.AttrTarget.String(target.String())}, 1},
			{natsbus.MetricPublished, []attribute.KeyValue{stream.String(topology.StreamVerdicts), typ.String(events.TypeVerdictError)}, 1},
			{natsbus.MetricPublished, []attribute.KeyValue{stream.String(topology.StreamVerdicts), typ.String(events.TypeVerdictPass)}, 1},
			{natsbus.MetricPublished, []attribute.KeyValue{stream.String(topology.StreamVerdicts), typ.String(events.TypeVerdictDrift)}, 1},
			// The auditor.
			{natsbus.MetricConsumed, []attribute.KeyValue{stream.String(topology.StreamEvidence), consumer.String(topology.ConsumerAuditor)}, 3},
			{natsbus.MetricAcked, []attribute.KeyValue{stream.String(topology.StreamEvidence), consumer.String(topology.ConsumerAuditor)}, 3},
			{natsbus.MetricConsumed, []attribute.KeyValue{stream.String(topology.StreamVerdicts), consumer.String(topology.ConsumerAuditor)}, 3},
			{auditor.MetricChainHead, []attribute.KeyValue{auditor.AttrChain.String(chainEvidence), auditor.AttrStream.String(topology.StreamEvidence)}, 3},
			{auditor.MetricChainHead, []attribute.KeyValue{auditor.AttrChain.String(chainVerdicts), auditor.AttrStream.String(topology.StreamVerdicts)}, 3},
			{auditor.MetricAppended, []attribute.KeyValue{auditor.AttrStream.String(topology.StreamEvidence)}, 3},
			{auditor.MetricAppended, []attribute.KeyValue{auditor.AttrStream.String(topology.StreamVerdicts)}, 3},
			{auditor.MetricLag, []attribute.KeyValue{auditor.AttrStream.String(topology.StreamEvidence)}, 0},
			{auditor.MetricLag, []attribute.KeyValue{auditor.AttrStream.String(topology.StreamVerdicts)}, 0},
			{auditor.MetricLag, []attribute.KeyValue{auditor.AttrStream.String(topology.StreamBaselines)}, 0},
			// The attestor.
			{attestor.MetricSignatures, []attribute.KeyValue{attestor.AttrMode.String(attestor.ModeKey)}, 1},
			{natsbus.MetricPublished, []attribute.KeyValue{stream.String(topology.StreamBaselines), typ.String(events.TypeAttestationCreated)}, 1},
		}
		// Acknowledgements are counted once confirmed: poll until they
		// are, then check everything once.
		waitFor(t, "the acknowledgements", func() bool {
			rm := rec.collect(t)
			for _, c := range checks {
				if got, ok := telemetrytest.Point(rm, c.name, c.attrs...); !ok || got != c.want {
					return false
				}
			}
			return true
		})
		rm := rec.collect(t)
		for _, c := range checks {
			got, ok := telemetrytest.Point(rm, c.name, c.attrs...)
			assert.True(t, ok, "%s reported", c)
			assert.Equal(t, c.want, got, "%s", c)
		}
		_, failed := telemetrytest.Point(rm, attestor.MetricSignFailures, attestor.AttrMode.String(attestor.ModeKey), attestor.AttrReason.String(attestor.FailSign))
		assert.False(t, failed, "no failed signature")
	})
}

// verdictType is the type of the verdict the verifier published for the
// evidence handled in span (from its publish child).
func verdictType(spans *traceIndex, parent sdktrace.ReadOnlySpan) string {
	for _, typ := range []string{events.TypeVerdictPass, events.TypeVerdictDrift, events.TypeVerdictError} {
		if spans.childOf(parent, "publish "+typ) != nil {
			return typ
		}
	}
	return "verdict"
}

func attr(s sdktrace.ReadOnlySpan, k attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value.String()
		}
	}
	return ""
}

// traceIndex finds ended spans.
type traceIndex struct{ all []sdktrace.ReadOnlySpan }

func index(spans []sdktrace.ReadOnlySpan) *traceIndex { return &traceIndex{all: spans} }

func (x *traceIndex) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range x.all {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// consumed returns the spans of handling a message of stream by consumer.
func (x *traceIndex) consumed(stream, consumer string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range x.named("process " + stream) {
		if attr(s, "messaging.consumer.group.name") == consumer {
			out = append(out, s)
		}
	}
	return out
}

func (x *traceIndex) childOf(parent sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	for _, s := range x.named(name) {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() && s.Parent().TraceID() == parent.SpanContext().TraceID() {
			return s
		}
	}
	return nil
}

func (x *traceIndex) consumedChildOf(parent sdktrace.ReadOnlySpan, stream, consumer string) sdktrace.ReadOnlySpan {
	for _, s := range x.consumed(stream, consumer) {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() && s.Parent().TraceID() == parent.SpanContext().TraceID() {
			return s
		}
	}
	return nil
}

// linked reports whether a span named name links to target.
func (x *traceIndex) linked(name string, target sdktrace.ReadOnlySpan) bool {
	for _, s := range x.named(name) {
		for _, l := range s.Links() {
			if l.SpanContext.SpanID() == target.SpanContext().SpanID() {
				return true
			}
		}
	}
	return false
}
