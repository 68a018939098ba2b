package deployed_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// The hosts of the deployment: web runs a collector, db only has its
// credential (the other host web's credential must not speak for).
const (
	web = "web-01.example.com"
	db  = "db-02"
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

func scenario(t *testing.T, m mode) {
	d := deploy(t, m, web, db)
	repo := gitRepo(t, d)

	verifier := d.service("verifier", bins.verifier, idVerifier, d.config("verifier", map[string]any{
		"instance":    "deployed",
		"stale_after": staleAfter,
		"http":        map[string]any{"listen": "127.0.0.1:0"},
	}))
	auditLog := filepath.Join(d.dir, "auditor", "audit.jsonl")
	auditor := d.service("auditor", bins.auditor, idAuditor, d.config("auditor", map[string]any{
		"instance": "deployed",
		"jsonl":    map[string]any{"path": auditLog},
		"http":     map[string]any{"listen": "127.0.0.1:0"},
	}))

	// 1. Enrollment: the collector's evidence is refused until the
	// operator enrolls the key the host prints.
	collectorConfig := d.config("collector", collectorSettings(web, filepath.Join(d.dir, "collector"), repo))
	key := d.identity(collectorConfig, web)
	collector := d.service("collector", bins.collector, idHost(web), collectorConfig)
	natstest.CheckFor(t, deadline, poll, func() error {
		if n := len(d.deadLetters(web, "not_enrolled")); n == 0 {
			return errors.New("no dead letter of web's evidence (not_enrolled)")
		}
		return d.refused(web, "not_enrolled")
	})
	assert.Empty(t, d.records(web), "no verdict for a host that is not enrolled")
	rec := d.host(web)
	require.NotNil(t, rec.KeyOf(key), "the key seen on web's evidence")
	assert.Equal(t, events.KeyPending, rec.KeyOf(key).State)
	r := d.cli("host", "approve", web)
	assert.Equal(t, 1, r.code, "approve without --key")
	assert.Contains(t, r.stderr, "--key is required")
	assert.Contains(t, r.stderr, key, "the pending key, as a hint")
	r = d.cli("host", "approve", web, "--key", key)
	require.Equal(t, 0, r.code, "host approve: %s", r.stderr)
	assert.Equal(t, events.KeyEnrolled, d.host(web).KeyOf(key).State)

	// 2. Baseline approval: the review shows the authentic snapshot and
	// approves nothing; its digest approves it.
	first := d.waitRecord(web, "a verdict on authentic evidence", func(r statusRecord) error {
		if r.Verdict.Status != events.StatusError || !strings.Contains(r.Verdict.Error, "no baseline") {
			return fmt.Errorf("%s %q", r.Verdict.Status, r.Verdict.Error)
		}
		return nil
	})
	target := first.Verdict.Target.String()
	assert.Equal(t, "git.repository", first.Verdict.Target.Kind)
	r = d.cli("baseline", "approve", target, "--json")
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
	assert.Equal(t, key, review.Key)
	assert.True(t, review.Authentic, "signed by web's enrolled key")
	r = d.cli("baseline", "approve", target, "--host", web, "--digest", review.Digest)
	require.Equal(t, 0, r.code, "baseline approve --digest: %s", r.stderr)
	assert.Contains(t, r.stdout, "APPROVED")

	// 3. PASS.
	d.waitRecord(web, "PASS", signedWith(key, events.StatusPass))

	// 5. Collect now: the collector answers, signed, and the CLI accepts
	// the answer with the enrolled key.
	r = d.cli("collect", web, "--json", "--timeout", "60s")
	require.Equal(t, 0, r.code, "collect: %s", r.stderr)
	var collected struct {
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
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &collected), r.stdout)
	require.NotNil(t, collected.Accepted, "an authentic reply")
	assert.Equal(t, key, collected.Accepted.Key)
	assert.Equal(t, web, collected.Accepted.Reply.Host)
	require.Len(t, collected.Accepted.Reply.Results, 1)
	assert.Equal(t, "collected", collected.Accepted.Reply.Results[0].Status)
	collectedID := collected.Accepted.Reply.Results[0].EventID
	assert.Empty(t, collected.Refused)

	// 7. Refusals as deployed. web's own credential cannot publish in
	// db's name: the server refuses it (and no consumer ever sees it: the
	// audit log below has no chain of db).
	violations := make(chan error, 8)
	nc := d.dial(idHost(web), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case violations <- err:
		default:
		}
	}))
	foreign := events.EvidenceSubject(db, first.Verdict.Target.Kind)
	require.NoError(t, nc.Publish(foreign, []byte(`{}`)))
	require.NoError(t, nc.Flush())
	select {
	case err := <-violations:
		require.ErrorIs(t, err, nats.ErrPermissionViolation)
		assert.Contains(t, err.Error(), foreign)
	case <-time.After(deadline):
		require.Fail(t, "no permissions violation for "+foreign)
	}
	nc.Close()

	// A collector in web's name (web's credential) with a key of its
	// own: its evidence is dead-lettered (key_changed, then not_enrolled
	// as its key waits as pending), counted, and changes no verdict
	// (checked in the audit log below).
	before := len(d.deadLetters(web, ""))
	impostor := d.service("impostor", bins.collector, idHost(web),
		d.config("impostor", collectorSettings(web, filepath.Join(d.dir, "impostor"), repo)))
	natstest.CheckFor(t, deadline, poll, func() error {
		imposed := d.deadLetters(web, "")[before:]
		if len(imposed) < 2 {
			return fmt.Errorf("%d dead letters of the impostor's evidence", len(imposed))
		}
		assert.Equal(t, "key_changed", imposed[0].reason, "the first evidence of another key")
		for _, l := range imposed[1:] {
			assert.Equal(t, "not_enrolled", l.reason, "evidence of a pending key")
		}
		return d.refused(web, "not_enrolled")
	})
	require.Equal(t, 0, impostor.stop(), "the impostor stops cleanly")
	d.waitRecord(web, "web's verdicts, on its own evidence", signedWith(key, events.StatusPass))

	// 3. DRIFT when the target changes, naming the field.
	readme := filepath.Join(repo, "README")
	require.NoError(t, os.WriteFile(readme, []byte("changed\n"), 0o600))
	d.waitRecord(web, "DRIFT of dirty", func(r statusRecord) error {
		if err := signedWith(key, events.StatusDrift)(r); err != nil {
			return err
		}
		if !slices.Contains(changedFields(r), "git.repository.dirty") {
			return fmt.Errorf("changed fields %v", changedFields(r))
		}
		return nil
	})

	// 4. STALE when the collector is silent.
	require.Equal(t, 0, collector.stop(), "the collector stops cleanly")
	d.waitRecord(web, "STALE", func(r statusRecord) error {
		if r.Verdict.Status != events.StatusStale {
			return fmt.Errorf("%s", r.Verdict.Status)
		}
		return nil
	})

	// 6. Rotation: a new key, enrolled beside the current one; the
	// collector restarts with it, its evidence is accepted, and the old
	// key is revoked by its first evidence, without a refused event.
	newKeyFile := filepath.Join(d.dir, "new.key")
	writeKey(t, newKeyFile)
	setKey := []string{"--set", "key_file=" + newKeyFile}
	newKey := d.identity(collectorConfig, web, setKey...)
	require.NotEqual(t, key, newKey)
	r = d.cli("host", "rotate", web, "--key", newKey)
	require.Equal(t, 0, r.code, "host rotate: %s", r.stderr)
	rec = d.host(web)
	assert.True(t, rec.Rotating)
	assert.Equal(t, events.KeyEnrolled, rec.KeyOf(key).State)
	assert.Equal(t, events.KeyEnrolled, rec.KeyOf(newKey).State)
	refusedBefore := d.deadLetters(web, "")
	collector = d.service("collector", bins.collector, idHost(web), collectorConfig, setKey...)
	d.waitRecord(web, "DRIFT signed with the new key", signedWith(newKey, events.StatusDrift))
	natstest.CheckFor(t, deadline, poll, func() error {
		rec := d.host(web)
		if rec.Rotating || rec.KeyOf(key).State != events.KeyRevoked || rec.KeyOf(newKey).State != events.KeyEnrolled {
			return fmt.Errorf("web's record: %+v", rec)
		}
		return nil
	})
	assert.Equal(t, refusedBefore, d.deadLetters(web, ""), "no event refused across the rotation")

	// Revocation: web's evidence is refused from then on, and collect
	// refuses to ask a host without an enrolled key.
	r = d.cli("host", "revoke", web)
	require.Equal(t, 0, r.code, "host revoke: %s", r.stderr)
	natstest.CheckFor(t, deadline, poll, func() error {
		if len(d.deadLetters(web, "revoked")) < 2 {
			return errors.New("fewer than two dead letters revoked in web's name")
		}
		return d.refused(web, "revoked")
	})
	r = d.cli("collect", web, "--timeout", "10s")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "not enrolled")

	// 8. Audit: every service, still ready (its periodic duties work
	// under its user), stops cleanly, the auditor once it has linked
	// everything; the log verifies, its evidence signatures too.
	for _, p := range []*proc{collector, verifier, auditor} {
		assert.NoError(t, ready(p))
	}
	require.Equal(t, 0, collector.stop(), "the collector stops cleanly")
	require.Equal(t, 0, verifier.stop(), "the verifier stops cleanly")
	d.waitAudited()
	require.Equal(t, 0, auditor.stop(), "the auditor stops cleanly")
	r = d.run("audit", "verify", "--jsonl", auditLog, "--json")
	require.Equal(t, 0, r.code, "audit verify: %s", r.stderr)
	var audit struct {
		Status string                     `json:"status"`
		Links  int                        `json:"links"`
		Chains map[string]json.RawMessage `json:"chains"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &audit), r.stdout)
	assert.Positive(t, audit.Links)
	for _, c := range []string{"EVIDENCE/" + web, "VERDICTS/" + web, "BASELINES", "DLQ"} {
		assert.Contains(t, audit.Chains, c)
	}
	assert.NotContains(t, audit.Chains, "EVIDENCE/"+db, "nothing was published in db's name")
	r = d.cli("audit", "verify", "--jsonl", auditLog, "--registry")
	assert.Equal(t, 0, r.code, "audit verify --registry: %s", r.stderr)

	// No refused evidence has a verdict; the collect-now evidence has one.
	verdicts := auditedVerdicts(t, auditLog)
	assert.Contains(t, verdicts, collectedID, "the verdict of the evidence collected on request")
	refused := d.deadLetters(web, "")
	require.NotEmpty(t, refused)
	for _, l := range refused {
		assert.NotContains(t, verdicts, l.id, "a verdict of evidence refused (%s)", l.reason)
	}

	// Nothing a service did was refused by the server.
	for _, p := range []*proc{verifier, auditor, collector} {
		assert.NotContains(t, strings.ToLower(p.out.String()), "permissions violation", p.name)
	}
}

// collectorSettings is the configuration of host's collector: its state
// (and key) in state, the git repository collected every interval.
func collectorSettings(host, state, repo string) map[string]any {
	return map[string]any{
		"host":      host,
		"state_dir": state,
		"http":      map[string]any{"listen": "127.0.0.1:0"},
		"targets":   []any{map[string]any{"name": "repo", "kind": "git", "path": repo, "interval": interval}},
	}
}

// identity runs runtimetruth-collector --print-identity with the
// configuration file cfg and returns the key it prints.
func (d *deployment) identity(cfg, host string, extra ...string) string {
	d.t.Helper()
	r := runCommand(d.t, d.log, environ(d.home), bins.collector, append([]string{"-config", cfg, "--print-identity"}, extra...)...)
	require.Equal(d.t, 0, r.code, "--print-identity: %s", r.stderr)
	key := ""
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "host":
			assert.Equal(d.t, host, f[1])
		case len(f) == 2 && f[0] == "key":
			key = f[1]
		}
	}
	require.True(d.t, strings.HasPrefix(key, "ed25519:"), "a key in %q", r.stdout)
	return key
}

// statusRecord is a record of status --json.
type statusRecord struct {
	EvidenceID string         `json:"evidence_id"`
	Verdict    events.Verdict `json:"verdict"`
	SignedBy   string         `json:"signed_by"`
}

// records runs status --json and returns host's records.
func (d *deployment) records(host string) []statusRecord {
	d.t.Helper()
	r := d.cli("status", "--json")
	require.Equal(d.t, 0, r.code, "status: %s", r.stderr)
	var all, out []statusRecord
	require.NoError(d.t, json.Unmarshal([]byte(r.stdout), &all), r.stdout)
	for _, rec := range all {
		if rec.Verdict.Host == host {
			out = append(out, rec)
		}
	}
	return out
}

// waitRecord waits until status shows one record for host that ok
// accepts, and returns it.
func (d *deployment) waitRecord(host, what string, ok func(statusRecord) error) statusRecord {
	d.t.Helper()
	var got statusRecord
	natstest.CheckFor(d.t, deadline, poll, func() error {
		recs := d.records(host)
		if len(recs) != 1 {
			return fmt.Errorf("%s: %d records of %s", what, len(recs), host)
		}
		if err := ok(recs[0]); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		got = recs[0]
		return nil
	})
	return got
}

// signedWith accepts a record of status on evidence signed by key.
func signedWith(key string, status events.Status) func(statusRecord) error {
	return func(r statusRecord) error {
		if r.Verdict.Status != status || r.SignedBy != key {
			return fmt.Errorf("%s on evidence signed by %s", r.Verdict.Status, r.SignedBy)
		}
		return nil
	}
}

// changedFields lists a verdict's changed fields as KIND.FIELD.
func changedFields(r statusRecord) []string {
	var out []string
	if r.Verdict.Report == nil {
		return nil
	}
	for _, c := range r.Verdict.Report.Changes {
		for _, f := range c.Fields {
			out = append(out, c.Kind+"."+f.Field)
		}
	}
	return out
}

// refused checks that status (its human form) counts refused evidence of
// host, the last for reason.
func (d *deployment) refused(host, reason string) error {
	r := d.cli("status")
	require.Equal(d.t, 0, r.code, "status: %s", r.stderr)
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == "REFUSED" && f[1] == host {
			if f[len(f)-1] != reason {
				return fmt.Errorf("status: %q", line)
			}
			return nil
		}
	}
	return fmt.Errorf("status counts no refusal of %s", host)
}

// host returns host's record of host list --json.
func (d *deployment) host(host string) *events.HostRecord {
	d.t.Helper()
	r := d.cli("host", "list", "--json")
	require.Equal(d.t, 0, r.code, "host list: %s", r.stderr)
	var recs []events.HostRecord
	require.NoError(d.t, json.Unmarshal([]byte(r.stdout), &recs), r.stdout)
	for _, rec := range recs {
		if rec.Host == host {
			return &rec
		}
	}
	require.Failf(d.t, "no host record", "of %s in %s", host, r.stdout)
	return nil
}

// deadLetter is a dead-letter record of evidence: the evidence event's id
// and why the verifier refused it.
type deadLetter struct{ id, reason string }

var rejectedReason = regexp.MustCompile(`rejected evidence \(([a-z_]+)\)`)

// deadLetters reads the DLQ stream with the operator's credential: the
// dead letters of evidence in host's name, those for reason only unless
// reason is empty.
func (d *deployment) deadLetters(host, reason string) []deadLetter {
	d.t.Helper()
	subject := events.DeadLetterSubject(topology.StreamEvidence, events.EvidenceSubject(host, "git.repository"))
	var out []deadLetter
	for _, m := range natstest.Stored(d.t.Context(), d.t, d.js, topology.StreamDLQ) {
		if m.Subject != subject {
			continue
		}
		e, err := events.FromNATS(m.Header, m.Data)
		require.NoError(d.t, err)
		rej, err := events.Decode[events.EventRejected](e)
		require.NoError(d.t, err)
		l := deadLetter{id: rej.Envelope.ID}
		if m := rejectedReason.FindStringSubmatch(rej.Error); m != nil {
			l.reason = m[1]
		}
		if reason == "" || l.reason == reason {
			out = append(out, l)
		}
	}
	return out
}

// waitAudited waits until the auditor's consumer of every stream has
// nothing left to deliver or to have acknowledged.
func (d *deployment) waitAudited() {
	d.t.Helper()
	natstest.CheckFor(d.t, deadline, poll, func() error {
		for _, s := range []string{topology.StreamEvidence, topology.StreamVerdicts, topology.StreamBaselines, topology.StreamDLQ} {
			c, err := d.js.Consumer(d.t.Context(), s, topology.ConsumerAuditor)
			if err != nil {
				return err
			}
			info, err := c.Info(d.t.Context())
			if err != nil {
				return err
			}
			if info.NumPending > 0 || info.NumAckPending > 0 {
				return fmt.Errorf("the auditor has %d messages of %s to read, %d to acknowledge", info.NumPending, s, info.NumAckPending)
			}
		}
		return nil
	})
}

// auditedVerdicts reads the audit log: the evidence id of every verdict
// linked, with its status.
func auditedVerdicts(t *testing.T, path string) map[string][]events.Status {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string][]events.Status{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Event struct {
				Attributes struct {
					Type string `json:"type"`
				} `json:"attributes"`
				Data json.RawMessage `json:"data"`
			} `json:"event"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &l))
		if !strings.HasPrefix(l.Event.Attributes.Type, events.TypePrefix+"verdict.") {
			continue
		}
		var v events.Verdict
		require.NoError(t, json.Unmarshal(l.Event.Data, &v))
		out[v.EvidenceID] = append(out[v.EvidenceID], v.Status)
	}
	return out
}

// gitRepo makes a git repository with one commit: the collector's target.
func gitRepo(t *testing.T, d *deployment) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
		cmd.Env = environ(d.home)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	require.NoError(t, os.MkdirAll(repo, 0o755))
	git("init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "README"), []byte("service\n"), 0o600))
	git("add", "README")
	git("-c", "user.name=deployed", "-c", "user.email=deployed@example.com", "commit", "-q", "-m", "init")
	return repo
}

// writeKey writes a new Ed25519 key, PEM PKCS #8, as a collector's
// key_file takes it (openssl genpkey -algorithm ed25519).
func writeKey(t *testing.T, path string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600))
}
