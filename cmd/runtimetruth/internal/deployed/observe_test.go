package deployed_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

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
type deadLetter struct{ id, reason, err string }

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
		e, err := binding.FromNATS(m.Header, m.Data)
		require.NoError(d.t, err)
		rej, err := binding.Decode[events.EventRejected](e)
		require.NoError(d.t, err)
		l := deadLetter{id: rej.Envelope.ID, err: rej.Error}
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

// auditedEvent is an event of the audit log: its type, source and data.
type auditedEvent struct {
	Type, Source string
	Data         json.RawMessage
}

// audited reads the events of the audit log at path, in its order.
func audited(t *testing.T, path string) []auditedEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []auditedEvent
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var l struct {
			Event struct {
				Attributes struct {
					Type   string `json:"type"`
					Source string `json:"source"`
				} `json:"attributes"`
				Data json.RawMessage `json:"data"`
			} `json:"event"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &l))
		out = append(out, auditedEvent{Type: l.Event.Attributes.Type, Source: l.Event.Attributes.Source, Data: l.Event.Data})
	}
	return out
}

// auditedVerdicts reads the audit log: the evidence id of every verdict
// linked, with its status.
func auditedVerdicts(t *testing.T, path string) map[string][]events.Status {
	t.Helper()
	out := map[string][]events.Status{}
	for _, e := range audited(t, path) {
		if !strings.HasPrefix(e.Type, events.TypePrefix+"verdict.") {
			continue
		}
		var v events.Verdict
		require.NoError(t, json.Unmarshal(e.Data, &v))
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
