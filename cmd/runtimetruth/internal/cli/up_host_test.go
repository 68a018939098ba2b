package cli

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// verdictFor is an error verdict of target on host: without a baseline
// when baseline is empty.
func verdictFor(t *testing.T, host, target, baseline string) *nats.Msg {
	t.Helper()
	tg, err := events.ParseTarget(target)
	require.NoError(t, err)
	v := events.Verdict{Status: events.StatusError, Host: host, Target: tg, EvidenceID: "e-" + events.Token(host+target),
		SnapshotDigest: "sha256:" + strings.Repeat("a", 64), Error: "no baseline"}
	if baseline != "" {
		v.BaselineDigest, v.Error = baseline, "unreadable baseline"
	}
	m, _, err := binding.NewMsg(events.Source("verifier", "test"), v)
	require.NoError(t, err)
	return m
}

func TestVerdictPrinterKeepsToItsHost(t *testing.T) {
	var out bytes.Buffer
	var counts []int
	// approve with no baselines store: approving another host's target
	// would panic.
	p := &verdictPrinter{out: &out, approve: true, host: "web-01", done: func(n int) { counts = append(counts, n) }}
	p.handle(verdictFor(t, "web-02", "git.repository:/srv/other", ""))
	p.handle(verdictFor(t, "web-01.example.com", "git.repository:/srv/other", ""))
	assert.Empty(t, out.String(), "other hosts' verdicts are not printed")
	assert.Empty(t, counts, "nor counted towards --once")
	require.NoError(t, p.exitErr(true))

	p.approve = false
	p.handle(verdictFor(t, "web-01", "git.repository:/srv/app", "sha256:"+strings.Repeat("b", 64)))
	p.handle(verdictFor(t, "web-02", "git.repository:/srv/app", ""))
	assert.Contains(t, out.String(), "ERROR  git.repository:/srv/app  unreadable baseline")
	assert.NotContains(t, out.String(), "NO BASELINE", "web-02's verdict of the same target is not")
	assert.Equal(t, []int{1}, counts)
	require.ErrorContains(t, p.exitErr(true), "git.repository:/srv/app", "the exit code is this host's")
}

func TestApprovalHintNamesTheBus(t *testing.T) {
	hint := func(args []string) string {
		var out bytes.Buffer
		p := &verdictPrinter{out: &out, host: "web-01", busArgs: args}
		p.handle(verdictFor(t, "web-01", "git.repository:/srv/my app", ""))
		return out.String()
	}
	assert.Contains(t, hint(nil), "runtimetruth status; then approve it from another terminal:\n"+
		"    runtimetruth baseline approve 'git.repository:/srv/my app'\n")

	dir := filepath.Join(t.TempDir(), "it's here")
	got := hint(upBusArgs(busFlags{}, "nats://127.0.0.1:4222", dir, false))
	assert.Contains(t, got, fmt.Sprintf("runtimetruth status --data-dir '%s'; then", strings.ReplaceAll(dir, "'", `'\''`)))
	assert.Contains(t, got, "runtimetruth baseline approve 'git.repository:/srv/my app' --data-dir ")

	def, err := defaultDataDir("")
	require.NoError(t, err)
	assert.Empty(t, upBusArgs(busFlags{}, "nats://127.0.0.1:4222", def, false), "the default data directory needs no flag")

	b := busFlags{conn: natsbus.Config{User: "ops", PasswordFile: "/run/secrets/nats", TLS: natsbus.TLSConfig{CAFile: "/ca.pem"}}}
	got = hint(upBusArgs(b, "tls://nats.example.com:4222", dir, true))
	assert.Contains(t, got, "runtimetruth baseline approve 'git.repository:/srv/my app' --nats tls://nats.example.com:4222 "+
		"--nats-user ops --nats-password-file /run/secrets/nats --nats-tls-ca /ca.pem\n", "external: the server, not the data directory")
	assert.NotContains(t, got, "--data-dir")
}

// Evidence of up's host that the verifier refused is that target's
// outcome (so `up --once` ends, with an error), printed with the reason;
// another host's refused evidence is not.
func TestVerdictPrinterCountsRefusedEvidence(t *testing.T) {
	rejected := func(host, target string) *nats.Msg {
		r := events.EventRejected{Stream: "EVIDENCE", Consumer: "verifier", OriginalSubject: events.EvidenceSubject(host, "git.repository"),
			StreamSequence: 7, Deliveries: 1, Reason: events.ReasonPermanent,
			Error:    "rejected evidence (clock_skew): the evidence's time is too far from the verifier's clock: 1h0m0s off\x1b[2J",
			Envelope: events.Envelope{ID: "e-1", Type: events.TypeEvidenceCollected, Subject: target},
			DataSize: 3, DataDigest: "sha256:" + strings.Repeat("c", 64)}
		m, _, err := binding.NewMsg(events.Source("verifier", "test"), r)
		require.NoError(t, err)
		return m
	}
	var out bytes.Buffer
	var counts []int
	p := &verdictPrinter{out: &out, host: "web-01", done: func(n int) { counts = append(counts, n) }}
	p.handleRejected(rejected("web-02", "git.repository:/srv/app"))
	p.handleRejected(rejected("web-01.example.com", "git.repository:/srv/app"))
	assert.Empty(t, out.String())
	assert.Empty(t, counts)
	p.handleRejected(rejected("web-01", "git.repository:/srv/app"))
	assert.Contains(t, out.String(), "REJECTED  git.repository:/srv/app  rejected evidence (clock_skew)")
	assert.NotContains(t, out.String(), "\x1b", "escaped")
	assert.Equal(t, []int{1}, counts)
	require.ErrorContains(t, p.exitErr(true), "the verifier refused its evidence")
}

// A stale verdict reads as STALE with its last-seen time, in up as in
// status.
func TestStaleVerdictIsShown(t *testing.T) {
	tg, err := events.ParseTarget("git.repository:/srv/app")
	require.NoError(t, err)
	v := events.Verdict{Status: events.StatusStale, Host: "web-01", Target: tg, EvidenceID: "e-1",
		SnapshotDigest: "sha256:" + strings.Repeat("a", 64), LastSeen: "2026-12-02T03:00:00Z",
		Error: "no authentic evidence since 2026-12-02T03:00:00Z (stale after 3m0s)"}
	m, _, err := binding.NewMsg(events.Source("verifier", "test"), v)
	require.NoError(t, err)
	var out bytes.Buffer
	p := &verdictPrinter{out: &out, host: "web-01"}
	p.handle(m)
	assert.Contains(t, out.String(), "STALE  git.repository:/srv/app  no authentic evidence since 2026-12-02T03:00:00Z")
	require.ErrorContains(t, p.exitErr(true), "stale")
}
