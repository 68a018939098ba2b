package e2e_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/buspolicy"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/services/collector"
	"github.com/runtimetruth/runtimetruth/services/collector/inspect"
)

// busWatch records, from a plain subscription, every evidence event and
// every verdict published on a bus, in the order they arrive.
type busWatch struct {
	mu       sync.Mutex
	captured map[string]time.Time // evidence id -> snapshot captured_at
	verdicts []events.Verdict
	errs     []error
}

func watchBus(t *testing.T, nc *nats.Conn) *busWatch {
	t.Helper()
	w := &busWatch{captured: map[string]time.Time{}}
	handle := func(m *nats.Msg) {
		w.mu.Lock()
		defer w.mu.Unlock()
		e, err := binding.FromNATS(m.Header, m.Data)
		if err == nil {
			var p events.Payload
			if p, err = binding.Decode[events.Payload](e); err == nil {
				switch p := p.(type) {
				case events.Verdict:
					w.verdicts = append(w.verdicts, p)
				case events.EvidenceCollected:
					var s *snapshot.Snapshot
					if s, err = p.ParseSnapshot(); err == nil {
						var at time.Time
						if at, err = time.Parse(time.RFC3339Nano, s.CapturedAt); err == nil {
							w.captured[e.ID()] = at
						}
					}
				}
			}
		}
		if err != nil {
			w.errs = append(w.errs, fmt.Errorf("%s: %w", m.Subject, err))
		}
	}
	for _, subject := range []string{events.FilterEvidence, events.FilterVerdict} {
		sub, err := nc.Subscribe(subject, handle)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	require.NoError(t, nc.Flush())
	return w
}

// mark is the number of verdicts seen so far.
func (w *busWatch) mark() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.verdicts)
}

// await waits up to timeout for a verdict after the first from verdicts
// that satisfies ok, and returns it with its position.
func (w *busWatch) await(t *testing.T, what string, from int, timeout time.Duration, ok func(events.Verdict) bool) (events.Verdict, int) {
	t.Helper()
	var got events.Verdict
	at := -1
	natstest.CheckFor(t, timeout, 10*time.Millisecond, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		for i := from; i < len(w.verdicts); i++ {
			if ok(w.verdicts[i]) {
				got, at = w.verdicts[i], i
				return nil
			}
		}
		return fmt.Errorf("no %s among %d verdicts since %d", what, len(w.verdicts)-from, from)
	})
	return got, at
}

// since returns the verdicts from position from on.
func (w *busWatch) since(from int) []events.Verdict {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]events.Verdict(nil), w.verdicts[from:]...)
}

// capturedAt returns the captured_at of an evidence event's snapshot
// (waiting for it: the two subscriptions deliver independently).
func (w *busWatch) capturedAt(t *testing.T, evidenceID string) time.Time {
	t.Helper()
	var at time.Time
	natstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		w.mu.Lock()
		defer w.mu.Unlock()
		var ok bool
		if at, ok = w.captured[evidenceID]; !ok {
			return fmt.Errorf("evidence %s not seen", evidenceID)
		}
		return nil
	})
	return at
}

func (w *busWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Empty(t, w.errs, "every event on the bus decodes")
}

// approve runs `runtimetruth baseline approve TARGET --host HOST` against
// url, as an operator does: the preview (--json) for the latest snapshot's
// digest, then the approval of that digest. A collection landing between
// the two is a new snapshot, refused as not the reviewed one: review
// again. It returns the digest it approved.
func approve(t *testing.T, ps *policyServer, target events.Target) string {
	t.Helper()
	password := filepath.Join(t.TempDir(), "operator-password")
	require.NoError(t, os.WriteFile(password, []byte("operator-pw"), 0o600))
	cmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Run(t.Context(), cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, "e2e",
			append([]string{"baseline", "approve", target.String(), "--nats", ps.url, "--nats-user", "operator",
				"--nats-password-file", password, "--host", host, "--by", "e2e"}, args...))
		return code, out.String(), errb.String()
	}
	for attempt := 0; ; attempt++ {
		code, out, errs := cmd("--json")
		require.Equal(t, cli.ExitError, code, "a preview approves nothing: %s%s", out, errs)
		var preview struct {
			Digest    string `json:"digest"`
			Authentic bool   `json:"authentic"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &preview), out)
		require.True(t, preview.Authentic, "signed by the collector's pinned key: %s", out)
		code, out, errs = cmd("--digest", preview.Digest)
		if code != cli.ExitPass && attempt < 5 && strings.Contains(errs, "not the reviewed "+preview.Digest) {
			continue
		}
		require.Equal(t, cli.ExitPass, code, "baseline approve: %s%s", out, errs)
		require.True(t, strings.HasPrefix(out, "APPROVED: "+target.String()+"\n  digest: "+preview.Digest+"\n"), out)
		return preview.Digest
	}
}

func isStatus(s events.Status) func(events.Verdict) bool {
	return func(v events.Verdict) bool { return v.Status == s }
}

// TestDriftWithinOneInterval drives the flow by the collection interval
// alone (no CollectNow, no --once): the first collection has no baseline;
// `baseline approve` makes the next ones pass; a commit in the repository
// is seen as drift by the next scheduled collection; approving again makes
// them pass again. Waits are generous (the machine may be busy); the
// drift's snapshot must have been captured after the commit started.
func TestDriftWithinOneInterval(t *testing.T) {
	const interval = time.Second // collector.MinInterval
	// A scheduled collection follows within interval (+10% jitter) plus
	// the time a collection and its verification take; leave room for a
	// loaded machine.
	const within = 5*interval + 20*time.Second
	require.Equal(t, collector.MinInterval, interval)
	ctx := t.Context()
	repo := gitRepo(t)
	snap, err := inspect.Git(ctx, repo, inspect.Options{})
	require.NoError(t, err)
	target := events.Target{Kind: snap.Target.Kind, Identifier: snap.Target.Identifier}

	ps := runPolicyServer(t)
	nc, js := ps.as(t, "operator")
	w := watchBus(t, nc)

	verNC, _ := ps.as(t, buspolicy.Verifier)
	ver := newFirstUseVerifier(t, verNC, telemetry.Providers{})
	colNC, _ := ps.as(t, buspolicy.Collector)
	ccfg, col := newRepoCollector(t, colNC, telemetry.Providers{}, repo, interval)
	startEnrolled(ctx, t, js, ccfg, col, ver)

	// 1. The first collection (at start): no baseline, an error verdict.
	first, _ := w.await(t, "error verdict", 0, within, isStatus(events.StatusError))
	assert.Contains(t, first.Error, "no baseline")

	// 2. Approve what was collected: the next collections pass.
	mark := w.mark()
	approved := approve(t, ps, target)
	pass, at := w.await(t, "pass verdict", mark, within, isStatus(events.StatusPass))
	assert.Equal(t, approved, pass.BaselineDigest)
	// Let a second scheduled collection pass too, so the interval is what
	// drives them.
	w.await(t, "second pass verdict", at+1, within, isStatus(events.StatusPass))

	// 3. A commit: the next scheduled collection drifts.
	committing := time.Now()
	before := w.mark()
	gitIn(t, repo, "commit", "-q", "--allow-empty", "-m", "two")
	committed := time.Now()
	drift, _ := w.await(t, "drift verdict", before, within, isStatus(events.StatusDrift))
	t.Logf("drift verdict %s after the commit (interval %s)", time.Since(committed).Round(time.Millisecond), interval)
	assert.Equal(t, approved, drift.BaselineDigest)
	captured := w.capturedAt(t, drift.EvidenceID)
	assert.False(t, captured.Before(committing.Truncate(time.Microsecond)),
		"the drifting snapshot was captured (%s) after the commit started (%s)", captured, committing)
	require.NotNil(t, drift.Report)
	var fields []string
	for _, c := range drift.Report.Changes {
		for _, f := range c.Fields {
			fields = append(fields, c.Kind+"."+f.Field)
		}
	}
	assert.Contains(t, fields, "git.repository.head_commit")
	for _, v := range w.since(before) {
		if v.Status == events.StatusPass {
			assert.False(t, w.capturedAt(t, v.EvidenceID).After(committed), "no pass for a snapshot captured after the commit")
		}
	}

	// 4. Approve the new state: the next collections pass again.
	mark = w.mark()
	reapproved := approve(t, ps, target)
	assert.NotEqual(t, approved, reapproved)
	again, _ := w.await(t, "pass verdict after approving again", mark, within, func(v events.Verdict) bool {
		return v.Status == events.StatusPass && v.BaselineDigest == reapproved
	})
	assert.True(t, w.capturedAt(t, again.EvidenceID).After(committed))
	w.check(t)
}
