package deployed_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/notifier"
	"github.com/runtimetruth/runtimetruth/services/notifier/notifiertest"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// The hosts of the deployment: web runs a collector; db only has its
// credential, in whose name web's must not publish.
const (
	web = "web-01.example.com"
	db  = "db-02"
	// late is a host whose key the console enrolls before its first
	// evidence.
	late = "late-03"
)

// Timing: the collector collects every second and the verifier calls a
// target stale after three silent seconds; every wait polls up to a
// deadline far above what it takes.
const (
	interval   = "1s"
	staleAfter = "3s"
	deadline   = 60 * time.Second
	poll       = 200 * time.Millisecond
)

// TestDeployed runs the scenario of the package's doc in each of
// buspolicy's modes.
func TestDeployed(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) { scenario(t, m) })
	}
}

// scenario runs the steps in order: each starts from where the one before
// left the deployment.
func scenario(t *testing.T, m mode) {
	p := start(t, m)
	p.enroll()
	p.approveBaseline()
	p.collectNow()
	p.foreignSubject()
	p.impostor()
	p.forgeries()
	p.hostileNeighbour()
	p.drift()
	p.console()
	p.stale()
	p.rotate()
	p.revoke()
	p.audit()
}

// pipeline is a deployment running the verifier, the auditor and web's
// collector, and what the steps learned.
type pipeline struct {
	*deployment
	repo                         string
	verifier, auditor, collector *proc
	// notifier sends web's alerts to an Alertmanager whose notifications
	// alerts collects.
	notifier        *proc
	alerts          *notifiertest.Hook
	collectorConfig string
	auditLog        string
	// key is the key web's collector signs with (firstKey: before the
	// rotation); target the target it collects; collectedID the evidence
	// collected on request; consoleKey the key the console enrolled for
	// host late.
	key, firstKey, target, collectedID, consoleKey string
}

// start deploys nats-server with the policy of m, a git repository for
// web's collector to collect, and the verifier and auditor, each as its
// own user.
func start(t *testing.T, m mode) *pipeline {
	d := deploy(t, m, web, db)
	p := &pipeline{deployment: d, repo: gitRepo(t, d), auditLog: filepath.Join(d.dir, "auditor", "audit.jsonl")}
	p.verifier = d.service("verifier", bins.verifier, idVerifier, d.config("verifier", map[string]any{
		"instance":    "deployed",
		"stale_after": staleAfter,
		"http":        map[string]any{"listen": "127.0.0.1:0"},
	}))
	p.auditor = d.service("auditor", bins.auditor, idAuditor, d.config("auditor", map[string]any{
		"instance": "deployed",
		"jsonl":    map[string]any{"path": p.auditLog},
		"http":     map[string]any{"listen": "127.0.0.1:0"},
	}))
	p.collectorConfig = d.config("collector", collectorSettings(web, filepath.Join(d.dir, "collector"), p.repo))
	p.alerts = &notifiertest.Hook{}
	hook := httptest.NewServer(p.alerts)
	t.Cleanup(hook.Close)
	p.notifier = d.service("notifier", bins.notifier, idNotifier, d.config("notifier", map[string]any{
		"instance":     "deployed",
		"http":         map[string]any{"listen": "127.0.0.1:0"},
		"alertmanager": map[string]any{"url": notifiertest.StartAlertmanager(t, hook.URL), "resend_interval": "500ms", "lease": "10s"},
	}))
	return p
}

// enroll: web's collector prints its key and starts; its evidence is
// dead-lettered (not_enrolled) and counted by status, with no verdict,
// until the operator enrolls that key (host approve, which names no key
// by itself).
func (p *pipeline) enroll() {
	t := p.t
	p.key = p.identity(p.collectorConfig, web)
	p.firstKey = p.key
	p.collector = p.service("collector", bins.collector, idHost(web), p.collectorConfig)
	natstest.CheckFor(t, deadline, poll, func() error {
		if n := len(p.deadLetters(web, "not_enrolled")); n == 0 {
			return errors.New("no dead letter of web's evidence (not_enrolled)")
		}
		return p.refused(web, "not_enrolled")
	})
	assert.Empty(t, p.records(web), "no verdict for a host that is not enrolled")
	rec := p.host(web)
	require.NotNil(t, rec.KeyOf(p.key), "the key seen on web's evidence")
	assert.Equal(t, events.KeyPending, rec.KeyOf(p.key).State)
	r := p.cli("host", "approve", web)
	assert.Equal(t, 1, r.code, "approve without --key")
	assert.Contains(t, r.stderr, "--key is required")
	assert.Contains(t, r.stderr, p.key, "the pending key, as a hint")
	r = p.cli("host", "approve", web, "--key", p.key)
	require.Equal(t, 0, r.code, "host approve: %s", r.stderr)
	assert.Equal(t, events.KeyEnrolled, p.host(web).KeyOf(p.key).State)
}

// approveBaseline: web's authentic evidence gets an error verdict (no
// baseline); the review shows its snapshot and approves nothing (exit 1);
// its digest approves it; the next evidence passes.
func (p *pipeline) approveBaseline() {
	t := p.t
	first := p.waitRecord(web, "a verdict on authentic evidence", func(r statusRecord) error {
		if r.Verdict.Status != events.StatusError || !strings.Contains(r.Verdict.Error, "no baseline") {
			return fmt.Errorf("%s %q", r.Verdict.Status, r.Verdict.Error)
		}
		return nil
	})
	require.Equal(t, "git.repository", first.Verdict.Target.Kind)
	p.target = first.Verdict.Target.String()
	r := p.cli("baseline", "approve", p.target, "--json")
	require.Equal(t, 1, r.code, "a review approves nothing: %s", r.stderr)
	var review struct {
		Status    string `json:"status"`
		Digest    string `json:"digest"`
		Host      string `json:"host"`
		Key       string `json:"key"`
		Authentic bool   `json:"authentic"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &review), r.stdout)
	assert.Equal(t, "preview", review.Status)
	assert.Equal(t, web, review.Host)
	assert.Equal(t, p.key, review.Key)
	assert.True(t, review.Authentic, "signed by web's enrolled key")
	r = p.cli("baseline", "approve", p.target, "--host", web, "--digest", review.Digest)
	require.Equal(t, 0, r.code, "baseline approve --digest: %s", r.stderr)
	assert.Contains(t, r.stdout, "APPROVED")
	p.waitRecord(web, "PASS", signedWith(p.key, events.StatusPass))
}

// collectNow: collect asks web's collector; the reply is signed by web's
// enrolled key and accepted (its evidence's verdict: audit).
func (p *pipeline) collectNow() {
	t := p.t
	r := p.cli("collect", web, "--json", "--timeout", "60s")
	require.Equal(t, 0, r.code, "collect: %s", r.stderr)
	var rep struct {
		Accepted *struct {
			Key   string `json:"key"`
			Reply struct {
				Host    string `json:"host"`
				Results []struct {
					Status  string `json:"status"`
					EventID string `json:"event_id"`
				} `json:"results"`
			} `json:"reply"`
		} `json:"accepted"`
		Refused []json.RawMessage `json:"refused"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.NotNil(t, rep.Accepted, "an authentic reply")
	assert.Equal(t, p.key, rep.Accepted.Key)
	assert.Equal(t, web, rep.Accepted.Reply.Host)
	require.Len(t, rep.Accepted.Reply.Results, 1)
	assert.Equal(t, "collected", rep.Accepted.Reply.Results[0].Status)
	assert.Empty(t, rep.Refused)
	p.collectedID = rep.Accepted.Reply.Results[0].EventID
}

// foreignSubject: web's own credential cannot publish evidence in db's
// name: the server refuses it with a permissions violation (and no
// consumer ever sees it: the audit log has no chain of db's).
func (p *pipeline) foreignSubject() {
	t := p.t
	violations := make(chan error, 8)
	nc := p.dial(idHost(web), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case violations <- err:
		default:
		}
	}))
	defer nc.Close()
	foreign := events.EvidenceSubject(db, "git.repository")
	require.NoError(t, nc.Publish(foreign, []byte(`{}`)))
	require.NoError(t, nc.Flush())
	select {
	case err := <-violations:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		assert.Contains(t, err.Error(), foreign)
	case <-time.After(deadline):
		require.Fail(t, "no permissions violation for "+foreign)
	}
}

// impostor: a second collector in web's name, on web's credential, with a
// key of its own: its evidence is dead-lettered (key_changed: another key
// than the enrolled one, pending or not) and counted, and web's
// verdicts stay on web's evidence (none of the impostor's has a verdict:
// audit).
func (p *pipeline) impostor() {
	t := p.t
	before := len(p.deadLetters(web, ""))
	impostor := p.service("impostor", bins.collector, idHost(web),
		p.config("impostor", collectorSettings(web, filepath.Join(p.dir, "impostor"), p.repo)))
	natstest.CheckFor(t, deadline, poll, func() error {
		imposed := p.deadLetters(web, "")[before:]
		if len(imposed) < 2 {
			return fmt.Errorf("%d dead letters of the impostor's evidence", len(imposed))
		}
		for _, l := range imposed {
			assert.Equal(t, "key_changed", l.reason, "evidence of another key than the enrolled one")
		}
		return p.refused(web, "key_changed")
	})
	require.Equal(t, 0, impostor.stop(), "the impostor stops cleanly")
	p.waitRecord(web, "web's verdicts, on its own evidence", signedWith(p.key, events.StatusPass))
}

// drift: a change to the repository (a tracked file edited) is DRIFT,
// naming the field, and an alert fires in Alertmanager.
func (p *pipeline) drift() {
	require.NoError(p.t, os.WriteFile(filepath.Join(p.repo, "README"), []byte("changed\n"), 0o600))
	p.waitRecord(web, "DRIFT of dirty", func(r statusRecord) error {
		if err := signedWith(p.key, events.StatusDrift)(r); err != nil {
			return err
		}
		if !slices.Contains(changedFields(r), "git.repository.dirty") {
			return fmt.Errorf("changed fields %v", changedFields(r))
		}
		return nil
	})
	p.waitAlert("firing", notifier.AlertDrift)
}

// stale: the collector stops; its target turns STALE, which the
// notifier sends to Alertmanager as firing in place of the drift.
func (p *pipeline) stale() {
	require.Equal(p.t, 0, p.collector.stop(), "the collector stops cleanly")
	p.waitRecord(web, "STALE", func(r statusRecord) error {
		if r.Verdict.Status != events.StatusStale {
			return fmt.Errorf("%s", r.Verdict.Status)
		}
		return nil
	})
	p.waitAlert("resolved", notifier.AlertDrift)
	p.waitAlert("firing", notifier.AlertStale)
}

// rotate: a new key file, enrolled beside the current key (host rotate);
// the collector restarts with it, its evidence is accepted (DRIFT again,
// the repository still dirty), and its first evidence revokes the old
// key, without a refused event.
func (p *pipeline) rotate() {
	t := p.t
	newKeyFile := filepath.Join(p.dir, "new.key")
	writeKey(t, newKeyFile)
	setKey := []string{"--set", "key_file=" + newKeyFile}
	newKey := p.identity(p.collectorConfig, web, setKey...)
	require.NotEqual(t, p.key, newKey)
	r := p.cli("host", "rotate", web, "--key", newKey)
	require.Equal(t, 0, r.code, "host rotate: %s", r.stderr)
	rec := p.host(web)
	assert.True(t, rec.Rotating)
	assert.Equal(t, events.KeyEnrolled, rec.KeyOf(p.key).State)
	assert.Equal(t, events.KeyEnrolled, rec.KeyOf(newKey).State)
	refused := p.deadLetters(web, "")
	p.collector = p.service("collector", bins.collector, idHost(web), p.collectorConfig, setKey...)
	p.waitRecord(web, "DRIFT signed with the new key", signedWith(newKey, events.StatusDrift))
	natstest.CheckFor(t, deadline, poll, func() error {
		rec := p.host(web)
		if rec.Rotating || rec.KeyOf(p.key).State != events.KeyRevoked || rec.KeyOf(newKey).State != events.KeyEnrolled {
			return fmt.Errorf("web's record: %+v", rec)
		}
		return nil
	})
	assert.Equal(t, refused, p.deadLetters(web, ""), "no event refused across the rotation")
	p.waitAlert("resolved", notifier.AlertStale) // fresh evidence
	p.key = newKey
}

// revoke: after host revoke, web's evidence is dead-lettered (revoked)
// and counted, and collect refuses to ask a host without an enrolled key.
func (p *pipeline) revoke() {
	t := p.t
	r := p.cli("host", "revoke", web)
	require.Equal(t, 0, r.code, "host revoke: %s", r.stderr)
	natstest.CheckFor(t, deadline, poll, func() error {
		if len(p.deadLetters(web, "revoked")) < 2 {
			return errors.New("fewer than two dead letters revoked in web's name")
		}
		return p.refused(web, "revoked")
	})
	r = p.cli("collect", web, "--timeout", "10s")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "not enrolled")
}

// audit: every service, still ready (its periodic duties work under its
// user) and never refused by the server, stops cleanly, the auditor once
// it has linked everything; its log verifies, the evidence signatures it
// carries too, holds every change of the hosts' keys, and shows a verdict
// for the evidence collected on request and none for any evidence
// refused.
func (p *pipeline) audit() {
	t := p.t
	for _, s := range []*proc{p.collector, p.verifier, p.auditor, p.notifier} {
		assert.NoError(t, ready(s))
	}
	require.Equal(t, 0, p.notifier.stop(), "the notifier stops cleanly")
	require.Equal(t, 0, p.collector.stop(), "the collector stops cleanly")
	require.Equal(t, 0, p.verifier.stop(), "the verifier stops cleanly")
	p.waitAudited()
	require.Equal(t, 0, p.auditor.stop(), "the auditor stops cleanly")
	for _, s := range []*proc{p.collector, p.verifier, p.auditor, p.notifier} {
		assert.NotContains(t, strings.ToLower(s.out.String()), "permissions violation", s.name)
	}

	r := p.run("audit", "verify", "--jsonl", p.auditLog, "--json")
	require.Equal(t, 0, r.code, "audit verify: %s", r.stderr)
	var rep struct {
		Status string                     `json:"status"`
		Links  int                        `json:"links"`
		Chains map[string]json.RawMessage `json:"chains"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.Equal(t, "intact", rep.Status)
	assert.Positive(t, rep.Links)
	for _, c := range []string{"EVIDENCE/" + web, "VERDICTS/" + web, "BASELINES", "DLQ"} {
		assert.Contains(t, rep.Chains, c)
	}
	// db's chain holds what db's own credential sent (hostileNeighbour),
	// each once, and nothing else: not web's publish in db's name, which
	// the server refused (foreignSubject); no verdict in db's name.
	var dbHead struct {
		Seq int `json:"seq"`
	}
	require.Contains(t, rep.Chains, "EVIDENCE/"+db)
	require.NoError(t, json.Unmarshal(rep.Chains["EVIDENCE/"+db], &dbHead))
	assert.Equal(t, churnKeys+junkMsgs, dbHead.Seq, "db's chain: what db's credential sent")
	assert.NotContains(t, rep.Chains, "VERDICTS/"+db, "no verdict in db's name")
	r = p.cli("audit", "verify", "--jsonl", p.auditLog, "--registry")
	assert.Equal(t, 0, r.code, "audit verify --registry: %s", r.stderr)

	p.auditedKeyChanges()

	verdicts := auditedVerdicts(t, p.auditLog)
	assert.Contains(t, verdicts, p.collectedID, "the verdict of the evidence collected on request")
	refused := p.deadLetters(web, "")
	require.NotEmpty(t, refused)
	for _, l := range refused {
		assert.NotContains(t, verdicts, l.id, "a verdict of evidence refused (%s)", l.reason)
	}
}

// auditedKeyChanges: every change of a host's keys is in the audit chain
// (host.key.changed), by whoever made it: web's first key seen and its
// impostors' (pending, by the verifier), then, by the operator's CLI, the
// key enrolled, the new key beside it, the old one revoked by the
// rotation (the verifier) and every key revoked (the impostors' pending
// ones too); the key the console's
// approver enrolled; db's ever new keys, pending only as many as the
// registry keeps (its share of the chain too), then the one approved.
func (p *pipeline) auditedKeyChanges() {
	t := p.t
	type change struct {
		source, actor string
		rotating      bool
		keys          []events.KeyChange
	}
	byHost := map[string][]change{}
	for _, e := range audited(t, p.auditLog) {
		if e.Type != events.TypeHostKeyChanged {
			continue
		}
		var c events.HostKeyChanged
		require.NoError(t, json.Unmarshal(e.Data, &c))
		byHost[c.Host] = append(byHost[c.Host], change{e.Source, c.Actor, c.Rotating, c.Keys})
	}
	byVerifier, byOperator := events.Source("verifier", "deployed"), events.Source("cli", "operator")
	// seen splits a host's changes: the keys the verifier saw (each
	// pending), and the others.
	seen := func(host string) (pending int, decided []change) {
		for _, c := range byHost[host] {
			if c.actor != "first-use" {
				decided = append(decided, c)
				continue
			}
			assert.Equal(t, byVerifier, c.source)
			if assert.Len(t, c.keys, 1) {
				assert.Equal(t, events.KeyChange{Key: c.keys[0].Key, State: events.KeyPending}, c.keys[0], "a key seen is pending")
			}
			pending++
		}
		return pending, decided
	}
	require.NotEmpty(t, byHost[web])
	assert.Equal(t, change{byVerifier, "first-use", false, []events.KeyChange{{Key: p.firstKey, State: events.KeyPending}}}, byHost[web][0],
		"web's key, first seen")
	_, decided := seen(web)
	require.Len(t, decided, 4)
	assert.Equal(t, []change{
		{byOperator, "operator", false, []events.KeyChange{{Key: p.firstKey, State: events.KeyEnrolled, Previous: events.KeyPending}}},
		{byOperator, "operator", true, []events.KeyChange{{Key: p.key, State: events.KeyEnrolled}}},
		{byVerifier, "rotation", false, []events.KeyChange{{Key: p.firstKey, State: events.KeyRevoked, Previous: events.KeyEnrolled}}},
	}, decided[:3])
	// host revoke: the enrolled key, and the impostors' pending ones.
	revoked := decided[3]
	assert.Equal(t, byOperator, revoked.source)
	assert.Contains(t, revoked.keys, events.KeyChange{Key: p.key, State: events.KeyRevoked, Previous: events.KeyEnrolled})
	for _, k := range revoked.keys {
		assert.Equal(t, events.KeyRevoked, k.State)
		assert.True(t, k.Key == p.key || k.Previous == events.KeyPending, "%+v", k)
	}

	assert.Equal(t, []change{{events.Source("console", "approver@example.com"), "approver@example.com", false,
		[]events.KeyChange{{Key: p.consoleKey, State: events.KeyEnrolled}}}}, byHost[late])

	pending, decided := seen(db)
	assert.Equal(t, verifier.MaxPendingKeys, pending, "db's %d keys: announced as many as the registry keeps", churnKeys)
	if assert.Len(t, decided, 1) {
		assert.Equal(t, byOperator, decided[0].source)
		assert.Equal(t, events.KeyEnrolled, decided[0].keys[0].State)
	}
}

// waitAlert waits for Alertmanager's notification of status (firing,
// resolved) of web's alert alertname, which the notifier, as its own NATS
// user, sent from the pipeline's verdicts.
func (p *pipeline) waitAlert(status, alertname string) {
	p.t.Helper()
	natstest.CheckFor(p.t, deadline, poll, func() error {
		if len(p.alerts.Find(status, alertname, web)) == 0 {
			return fmt.Errorf("no %s %s notification for %s (got %d notifications)", status, alertname, web, len(p.alerts.Notifications()))
		}
		return nil
	})
}
