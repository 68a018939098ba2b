package siem_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/eventstest"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ecscheck"
	"github.com/runtimetruth/runtimetruth/services/auditor/siem/ocsfcheck"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var product = siem.Product{Version: "1.2.3", Hostname: "auditor-0"}

// agent is the scenario's target.
var agent = events.Target{Kind: "codex.agent", Identifier: "/home/agent/proj"}

// scenario seals, as the auditor would, a run of events covering every
// class of the mapping: one target's episode (drift, drift, stale, pass)
// and a pass outside it, an error verdict of another host, installed
// code modified, evidence refused by the verifier and by the auditor, a
// dead letter, a malformed message, a gap and a reset of a stream, the
// changes of a baseline, its attestation and a host's keys, evidence
// collected and a collection failure.
func scenario(t testing.TB) []link.Record {
	t.Helper()
	source := events.Source("auditor", "auditor-0")
	chains := auditortest.NewChains(chain.NewHasher(nil), source)
	heads := map[string]link.Head{}
	seqs := map[string]uint64{}
	var out []link.Record
	add := func(m *nats.Msg) {
		stream := auditortest.StreamOf(m.Subject)
		seqs[stream]++
		msg := auditortest.Message(t, stream, seqs[stream], m)
		out = append(out, chains.Seal(t, msg))
	}
	notice := func(m *link.Message) {
		p := link.Prepare(m, source, false)
		r := p.Seal(chain.NewHasher(nil), heads[p.Chain])
		heads[p.Chain] = r.Head()
		out = append(out, r)
	}
	i := 0
	msg := func(p events.Payload) *nats.Msg {
		i++
		return auditortest.Msg(t, p, i)
	}
	verdict := func(status events.Status, host string) events.Verdict {
		v := auditortest.Drift(host, agent, fmt.Sprintf("01920000-0000-7000-8000-%012d", i), i)
		v.Status = status
		switch status {
		case events.StatusPass:
			v.Report.Status, v.Report.Changes, v.BaselineDigest = report.Pass, []report.Change{}, v.SnapshotDigest
		case events.StatusError:
			v.Report, v.BaselineDigest, v.Error = nil, "", "no baseline for "+agent.String()
		case events.StatusStale:
			v.Report, v.Error, v.LastSeen = nil, "no authentic evidence since 2026-10-06T03:00:00Z (stale after 3m0s)", "2026-10-06T03:00:00Z"
		}
		return v
	}

	add(msg(auditortest.EvidenceOf(t, "web-01", agent, auditortest.Time, 1)))
	add(msg(verdict(events.StatusDrift, "web-01")))
	add(msg(verdict(events.StatusDrift, "web-01")))
	add(msg(verdict(events.StatusStale, "web-01")))
	add(msg(verdict(events.StatusPass, "web-01")))
	add(msg(verdict(events.StatusPass, "web-01")))
	add(msg(verdict(events.StatusError, "web-02")))
	mod := auditortest.Modified("web-01", 3)
	mod.ChangedFiles = append(mod.ChangedFiles, events.FileChange{Path: "runspec_linux/gone.py", Change: events.FileMissing})
	add(msg(mod))
	refused := auditortest.DeadLetter(4)
	refused.Reason, refused.Error = "not_enrolled", "authenticate evidence of web-03: the host's key is not enrolled"
	refused.OriginalSubject = events.EvidenceSubject("web-03", "codex.agent")
	m := msg(refused)
	m.Subject = events.DeadLetterSubject("EVIDENCE", refused.OriginalSubject)
	add(m)
	add(msg(auditortest.DeadLetter(5)))
	add(auditortest.Malformed("web-04", 6))
	forged := auditortest.SignedMsg(t, auditortest.EvidenceOf(t, "web-05", agent, auditortest.Time, 7), 7, auditortest.Key, 1)
	forged.Header.Set("ce-rtsignature", "not-a-dsse-envelope")
	add(forged)
	notice(link.Gap("EVIDENCE", "auditor", 40, 47, auditortest.Time.Add(time.Minute)))
	notice(link.Reset("VERDICTS", "auditor", 90, 3, auditortest.Time.Add(2*time.Minute)))
	add(msg(events.BaselineChanged{Target: agent, Change: events.BaselineUpdated, Digest: auditortest.Digest("new"),
		PreviousDigest: auditortest.Digest("old"), Actor: "alice@example.com"}))
	att := eventstest.Payloads(t)["attestation.created.v1.golden.json"].(events.AttestationCreated)
	att.Target = agent
	add(msg(att))
	add(msg(events.HostKeyChanged{Host: "web-03", Actor: "alice@example.com", Keys: []events.KeyChange{
		{Key: signtest.KeyID("web-03"), State: events.KeyEnrolled, Previous: events.KeyPending},
	}}))
	add(msg(events.CollectionFailed{Host: "web-01", Collector: "codex", Reason: "timeout",
		Message: "codex app-server did not answer initialize within 10s", Retryable: true}))
	return out
}

// render maps the scenario's records in order, through one tracker, and
// renders each in the three formats.
func render(t *testing.T, recs []link.Record) (fs []siem.Finding, ocsf, ecs, cef [][]byte) {
	t.Helper()
	ep := siem.NewEpisodes()
	for _, r := range recs {
		f := siem.Map(r, ep)
		o, err := siem.OCSF(f, product)
		require.NoError(t, err)
		e, err := siem.ECS(f, product)
		require.NoError(t, err)
		fs, ocsf, ecs, cef = append(fs, f), append(ocsf, o), append(ecs, e), append(cef, siem.CEF(f, product))
	}
	return fs, ocsf, ecs, cef
}

// TestGolden: the scenario in each format, one record a line, as
// testdata/scenario.<format> holds it (go test -update rewrites them).
func TestGolden(t *testing.T) {
	_, ocsf, ecs, cef := render(t, scenario(t))
	for name, lines := range map[string][][]byte{"ocsf": ocsf, "ecs": ecs, "cef": cef} {
		got := append(bytes.Join(lines, []byte("\n")), '\n')
		path := filepath.Join("testdata", "scenario."+name)
		if *update {
			require.NoError(t, os.MkdirAll("testdata", 0o755))
			require.NoError(t, os.WriteFile(path, got, 0o644))
			continue
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "%s differs; if intended, go test -update", path)
	}
}

// Every OCSF record validates against OCSF 1.8.0's definitions, every ECS
// document against ECS 9.4's fields, its own under "runtimetruth".
func TestRecordsValidate(t *testing.T) {
	fs, ocsf, ecs, _ := render(t, scenario(t))
	classes := map[siem.Class]bool{}
	for i := range fs {
		classes[fs[i].Class] = true
		assert.NoError(t, ocsfcheck.Validate(ocsf[i]), "OCSF record %d (%s): %s", i, fs[i].Link.EventType, ocsf[i])
		assert.NoError(t, ecscheck.Validate(ecs[i], ecscheck.WithCustom("runtimetruth")), "ECS document %d (%s): %s", i, fs[i].Link.EventType, ecs[i])
	}
	for _, c := range []siem.Class{siem.ClassBase, siem.ClassEventLog, siem.ClassCompliance, siem.ClassDetection, siem.ClassEntity, siem.ClassAppError} {
		assert.True(t, classes[c], "the scenario has no record of class %d", c)
	}
}

// A host and target's verdicts are one finding while it is not a pass:
// created by the first, updated by the next, closed by the pass; a pass
// outside it updates the target's standing finding; another host's is
// its own.
func TestEpisodes(t *testing.T) {
	fs, _, _, _ := render(t, scenario(t))
	var verdicts []siem.Finding
	for _, f := range fs {
		if f.Class == siem.ClassCompliance {
			verdicts = append(verdicts, f)
		}
	}
	require.Len(t, verdicts, 6)
	episode := verdicts[0].UID
	want := []struct {
		activity   siem.Activity
		compliance siem.Compliance
		same       bool
	}{
		{siem.ActivityCreate, siem.ComplianceFail, true},
		{siem.ActivityUpdate, siem.ComplianceFail, true},
		{siem.ActivityUpdate, siem.ComplianceWarning, true},
		{siem.ActivityClose, siem.CompliancePass, true},
		{siem.ActivityUpdate, siem.CompliancePass, false},
		{siem.ActivityCreate, siem.ComplianceWarning, false},
	}
	for i, w := range want {
		assert.Equal(t, w.activity, verdicts[i].Activity, i)
		assert.Equal(t, w.compliance, verdicts[i].Compliance, i)
		assert.Equal(t, w.same, verdicts[i].UID == episode, i)
		if w.same {
			assert.Equal(t, verdicts[0].Time, verdicts[i].EpisodeStart, "the episode began with its first verdict")
		}
	}
	assert.NotEqual(t, verdicts[4].UID, verdicts[5].UID)

	// The next failing verdict opens a new episode.
	ep := siem.NewEpisodes()
	recs := scenario(t)
	var uids []string
	again := recs[2]
	again.Meta.ID = "01930000-0000-7000-8000-00000000ffff"
	for _, r := range append(recs[1:6:6], again) {
		uids = append(uids, siem.Map(r, ep).UID)
	}
	assert.NotEqual(t, uids[0], uids[5], "a new episode")
	open, untracked := ep.Open()
	assert.Equal(t, 1, open)
	assert.Zero(t, untracked)
}

// A host reporting ever new targets holds at most its share of open
// episodes; its further verdicts are findings of their own, counted.
func TestEpisodesBoundedPerHost(t *testing.T) {
	ep := siem.NewEpisodes()
	recs := scenario(t)
	drift := recs[1]
	for i := range siem.MaxEpisodesPerHost + 10 {
		r := drift
		r.Meta.ID = fmt.Sprintf("id-%d", i)
		r.Event = bytes.ReplaceAll(drift.Event, []byte(`"/home/agent/proj"`), []byte(fmt.Sprintf(`"/home/agent/p%d"`, i)))
		f := siem.Map(r, ep)
		require.Equal(t, siem.ActivityCreate, f.Activity)
	}
	open, untracked := ep.Open()
	assert.Equal(t, siem.MaxEpisodesPerHost, open)
	assert.Equal(t, uint64(10), untracked)
}

// The three formats say the same: each record's event id, link and
// severity, read back from the rendered bytes.
func TestFormatsAgree(t *testing.T) {
	fs, ocsf, ecs, cef := render(t, scenario(t))
	for i, f := range fs {
		var o struct {
			SeverityID int `json:"severity_id"`
			Metadata   struct {
				UID string `json:"uid"`
			} `json:"metadata"`
			Unmapped struct {
				Chain string `json:"chain"`
				Seq   uint64 `json:"seq"`
				Hash  string `json:"hash"`
				Prev  string `json:"prev"`
			} `json:"unmapped"`
		}
		require.NoError(t, json.Unmarshal(ocsf[i], &o))
		var e struct {
			Event struct {
				ID       string `json:"id"`
				Hash     string `json:"hash"`
				Sequence uint64 `json:"sequence"`
				Severity int    `json:"severity"`
			} `json:"event"`
			RT struct {
				Chain string `json:"chain"`
				Prev  string `json:"prev"`
			} `json:"runtimetruth"`
		}
		require.NoError(t, json.Unmarshal(ecs[i], &e))
		ext := cefExtensions(t, cef[i])
		for _, got := range []struct{ name, ocsf, ecs, cef string }{
			{"event id", o.Metadata.UID, e.Event.ID, ext["externalId"]},
			{"chain", o.Unmapped.Chain, e.RT.Chain, ext["cs1"]},
			{"seq", fmt.Sprint(o.Unmapped.Seq), fmt.Sprint(e.Event.Sequence), ext["cn1"]},
			{"hash", o.Unmapped.Hash, e.Event.Hash, ext["cs2"]},
			{"prev", o.Unmapped.Prev, e.RT.Prev, ext["cs3"]},
		} {
			assert.Equal(t, got.ocsf, got.ecs, "record %d %s", i, got.name)
			assert.Equal(t, got.ocsf, got.cef, "record %d %s", i, got.name)
		}
		assert.Equal(t, f.Link.Hash, o.Unmapped.Hash)
		assert.Equal(t, o.SeverityID, e.Event.Severity)
	}
}

// cefExtensions parses a CEF line's extensions as the format defines
// them (unescaping \\ \= \n \r), the header's seven pipes unescaped
// first.
func cefExtensions(t *testing.T, line []byte) map[string]string {
	t.Helper()
	s := string(line)
	require.True(t, strings.HasPrefix(s, "CEF:0|"), s)
	pipes := 0
	i := 0
	for ; i < len(s) && pipes < 7; i++ {
		switch s[i] {
		case '\\':
			i++
		case '|':
			pipes++
		}
	}
	require.Equal(t, 7, pipes, s)
	ext := strings.TrimLeft(s[i:], " ")
	out := map[string]string{}
	// Keys are [A-Za-z0-9_]+ followed by an unescaped '='.
	var key, val strings.Builder
	inKey := true
	flush := func() {
		v := strings.TrimRight(val.String(), " ")
		out[key.String()] = v
		key.Reset()
		val.Reset()
	}
	for j := 0; j < len(ext); j++ {
		c := ext[j]
		if inKey {
			if c == '=' {
				inKey = false
				continue
			}
			key.WriteByte(c)
			continue
		}
		if c == '\\' && j+1 < len(ext) {
			j++
			switch ext[j] {
			case 'n':
				val.WriteByte('\n')
			case 'r':
				val.WriteByte('\r')
			default:
				val.WriteByte(ext[j])
			}
			continue
		}
		if c == ' ' && nextIsKey(ext[j+1:]) {
			flush()
			inKey = true
			continue
		}
		val.WriteByte(c)
	}
	flush()
	return out
}

// nextIsKey reports whether s starts with an extension key and its '='.
func nextIsKey(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			return i > 0
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		default:
			return false
		}
	}
	return false
}

// CEF escapes what would break a record: in the header backslash and
// pipe (a line break made a space), in extension values backslash,
// equals and line breaks; UTF-8 passes.
func TestCEFEscaping(t *testing.T) {
	f := siem.Finding{Class: siem.ClassAppError, Activity: siem.ActivityGeneralError, Severity: siem.SeverityMedium,
		Title: `a|b\c` + "\nd", Message: "x=1 \\ y|z\nnext é", Host: "web-01",
		Link: siem.Link{EventID: "id", EventType: events.TypeCollectionFailed, Chain: "EVIDENCE/web-01", Seq: 7, Hash: "h", Prev: "p"}}
	line := string(siem.CEF(f, siem.Product{Version: "1|2"}))
	assert.NotContains(t, line, "\n")
	assert.Contains(t, line, `CEF:0|runtimetruth|runtimetruth|1\|2|collection.failed|a\|b\\c d|5| rt=`)
	assert.Contains(t, line, `msg=x\=1 \\ y|z\nnext é`)
	ext := cefExtensions(t, []byte(line))
	assert.Equal(t, "x=1 \\ y|z\nnext é", ext["msg"])
	assert.Equal(t, "EVIDENCE/web-01", ext["cs1"])
}

// A tampered link (its data no longer its type's) still gives a record:
// an application error saying why, in every format.
func TestUnreadableLink(t *testing.T) {
	r := scenario(t)[1]
	r.Event = bytes.Replace(r.Event, []byte(`"status":"drift"`), []byte(`"status":"drift","extra":1`), 1)
	f := siem.Map(r, nil)
	assert.Equal(t, siem.ClassAppError, f.Class)
	assert.Contains(t, f.Message, "does not read")
	o, err := siem.OCSF(f, product)
	require.NoError(t, err)
	assert.NoError(t, ocsfcheck.Validate(o))
}

// FuzzMap: whatever a link's event holds (an audit log read back may be
// hostile), mapping and rendering do not panic, and the JSON formats stay
// JSON.
func FuzzMap(f *testing.F) {
	for _, r := range scenario(f) {
		f.Add(r.Meta.Type, r.Event)
	}
	f.Fuzz(func(t *testing.T, typ string, event []byte) {
		r := link.Record{Meta: link.Meta{Type: typ, Host: "h", Stored: auditortest.Time}}
		r.Event = event
		fd := siem.Map(r, siem.NewEpisodes())
		for _, render := range []func(siem.Finding, siem.Product) ([]byte, error){siem.OCSF, siem.ECS} {
			b, err := render(fd, product)
			require.NoError(t, err)
			require.True(t, json.Valid(b))
		}
		require.NotContains(t, string(siem.CEF(fd, product)), "\n")
	})
}

// The open episodes survive Encode and DecodeEpisodes: the next verdict
// updates the same finding; Changed says when there is something to save.
func TestEpisodesEncode(t *testing.T) {
	recs := scenario(t)
	ep := siem.NewEpisodes()
	assert.False(t, ep.Changed())
	first := siem.Map(recs[1], ep)
	assert.True(t, ep.Changed(), "an episode opened")
	saved, err := ep.Encode()
	require.NoError(t, err)
	assert.False(t, ep.Changed())
	siem.Map(recs[2], ep)
	assert.False(t, ep.Changed(), "an update opens and closes nothing")

	back, err := siem.DecodeEpisodes(saved)
	require.NoError(t, err)
	next := siem.Map(recs[2], back)
	assert.Equal(t, siem.ActivityUpdate, next.Activity)
	assert.Equal(t, first.UID, next.UID)
	assert.Equal(t, first.EpisodeStart, next.EpisodeStart)

	_, err = siem.DecodeEpisodes([]byte(`{"version":2,"open":[]}`))
	assert.ErrorContains(t, err, "version 2")
	_, err = siem.DecodeEpisodes([]byte(`[`))
	assert.Error(t, err)
}
