package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/events/signtest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// writeRecords writes records to a new JSONL log and returns its path.
func writeRecords(t *testing.T, h chain.Hasher, recs []link.Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s, err := jsonl.Open(context.Background(), jsonl.Options{Path: path, Hasher: h})
	require.NoError(t, err)
	require.NoError(t, s.Write(context.Background(), recs))
	require.NoError(t, s.Close())
	return path
}

// TestAuditVerifyDuplicateID: a chain whose links verify but record the
// same event twice (as an auditor without the check did, after JetStream
// forgot the message's id) fails `audit verify`, which names the id and
// both links, for --jsonl and --clickhouse.
func TestAuditVerifyDuplicateID(t *testing.T) {
	ctx := context.Background()
	h := chain.NewHasher(nil)
	heads := map[string]link.Head{}
	recs := auditRecords(t, h, 0, 12, heads)
	again := auditRecords(t, h, 3, 1, heads)[0] // event 3 once more, at its chain's next seq
	recs = append(recs, again)
	first := recs[3]
	require.Equal(t, first.Chain, again.Chain)

	check := func(t *testing.T, args ...string) {
		t.Helper()
		code, out, errs := runAudit(ctx, append([]string{"verify", "--json"}, args...)...)
		require.Equal(t, ExitDrift, code, errs+out)
		var rep auditReport
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		assert.Equal(t, "duplicate_id", rep.Status)
		assert.Nil(t, rep.Broken, "the chain itself verifies")
		require.NotNil(t, rep.DuplicateID)
		assert.Equal(t, first.Chain, rep.DuplicateID.Chain)
		assert.Equal(t, "id-3", rep.DuplicateID.ID)
		assert.Equal(t, first.Seq, rep.DuplicateID.FirstSeq)
		assert.Equal(t, again.Seq, rep.DuplicateID.Seq)
		assert.Equal(t, 1, rep.DuplicateIDs)

		code, out, _ = runAudit(ctx, append([]string{"verify"}, args...)...)
		require.Equal(t, ExitDrift, code)
		assert.Contains(t, out, fmt.Sprintf(`event id "id-3" linked twice, at seq %d and seq %d`, first.Seq, again.Seq))
	}
	t.Run("jsonl", func(t *testing.T) { check(t, "--jsonl", writeRecords(t, h, recs)) })
	t.Run("clickhouse", func(t *testing.T) {
		dsn, _ := clickHouseStore(ctx, t, recs)
		check(t, "--clickhouse", dsn)
	})

	// Without the copy the same log passes.
	code, _, errs := runAudit(ctx, "verify", "--jsonl", writeRecords(t, h, recs[:len(recs)-1]))
	require.Equal(t, ExitPass, code, errs)
}

// signedRecords seals evidence events of host, signed with key (odd ones
// unsigned when mixed), as the auditor records them. edit, when set,
// rewrites a link's data after the fact: the link records the data it
// returns and its SHA-256 (data_sha256), and the chain is recomputed, as
// someone rewriting the log would.
func signedRecords(t *testing.T, h chain.Hasher, host string, key ed25519.PrivateKey, n int, mixed bool, edit func(i int, data []byte) []byte) []link.Record {
	t.Helper()
	heads := map[string]link.Head{}
	var out []link.Record
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		target := events.Target{Kind: "systemd.unit", Identifier: fmt.Sprintf("u%d.service", i%3)}
		p := events.CollectionFailed{Host: host, Collector: "systemd", Target: &target, Reason: "timeout", Message: "no answer"}
		opts := []binding.Option{binding.WithID(fmt.Sprintf("ev-%d", i)), binding.WithTime(at.Add(time.Duration(i) * time.Second))}
		if !mixed || i%2 == 0 {
			seq := uint64(i + 1)
			opts = append(opts, binding.WithSigner(dsse.NewSigner(key, func() (uint64, error) { return seq, nil })))
		}
		m, _, err := binding.NewMsg(events.Source("collector", host), p, opts...)
		require.NoError(t, err)
		msg := &link.Message{Stream: "EVIDENCE", Seq: uint64(i + 1), Subject: m.Subject, Header: m.Header, Data: m.Data, Stored: at.Add(time.Duration(i) * time.Second)}
		if edit != nil {
			if data := edit(i, m.Data); string(data) != string(m.Data) {
				out = append(out, rewritten(t, h, heads, msg, data))
				continue
			}
		}
		r := seal(t, h, heads, msg)
		require.False(t, r.Meta.Rejected, "a valid event")
		out = append(out, r)
	}
	return out
}

// rewritten is the link of msg with data in place of what the auditor
// recorded, data_sha256 its digest, sealed after the head of its chain
// in heads (which it advances): a link rewritten and its chain
// recomputed.
func rewritten(t *testing.T, h chain.Hasher, heads map[string]link.Head, msg *link.Message, data []byte) link.Record {
	t.Helper()
	ev := link.Entry(msg, "/auditor/t")
	tree, err := jsontree.Parse(data)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	for i, mb := range ev.Members {
		switch mb.Key {
		case "data":
			ev.Members[i].Value = tree
		case link.DataDigestMember:
			ev.Members[i].Value = jsontree.Value{Kind: jsontree.String, Text: hex.EncodeToString(sum[:])}
		}
	}
	name := link.ChainName(msg.Stream, msg.Subject)
	r, err := link.Seal(h, name, heads[name], ev)
	require.NoError(t, err)
	heads[name] = r.Head()
	return r
}

// hostsFile writes records as `runtimetruth host list --json` prints them.
func hostsFile(t *testing.T, recs ...events.HostRecord) string {
	t.Helper()
	b, err := json.Marshal(recs)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "hosts.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// TestAuditVerifyEvidenceSignatures: `audit verify --hosts` (and
// --registry, the hosts bucket over NATS) re-checks every link's evidence
// signature against the registry and names the first bad link: a host not
// enrolled, a key revoked before the event, a payload changed and the
// chain recomputed (the link's recorded digest no longer the signed one),
// and, with --require-signatures, an unsigned collector event.
func TestAuditVerifyEvidenceSignatures(t *testing.T) {
	ctx := context.Background()
	h := chain.NewHasher(nil)
	_, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	keyID := dsse.KeyID(key.Public().(ed25519.PublicKey))
	const host = "web-01"
	enrolled := events.HostRecord{Host: host, Keys: []events.HostKey{{Key: keyID, State: events.KeyEnrolled, By: "test"}}}
	good := writeRecords(t, h, signedRecords(t, h, host, key, 6, false, nil))

	verifyJSON := func(t *testing.T, args ...string) (int, auditReport) {
		t.Helper()
		code, out, errs := runAudit(ctx, append([]string{"verify", "--json"}, args...)...)
		require.NotEqual(t, ExitError, code, errs)
		var rep auditReport
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.NotNil(t, rep.Evidence)
		return code, rep
	}

	code, rep := verifyJSON(t, "--jsonl", good, "--hosts", hostsFile(t, enrolled))
	require.Equal(t, ExitPass, code)
	assert.Equal(t, 6, rep.Evidence.Signed)
	assert.Nil(t, rep.Evidence.Bad)

	revoked := enrolled
	revoked.Keys = []events.HostKey{{Key: keyID, State: events.KeyRevoked, Changed: time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC)}}
	pending := enrolled
	pending.Keys = []events.HostKey{{Key: keyID, State: events.KeyPending}}
	other := enrolled
	other.Host = "web-02"
	changed := writeRecords(t, h, signedRecords(t, h, host, key, 6, false, func(i int, data []byte) []byte {
		if i == 2 {
			return []byte(strings.Replace(string(data), `"no answer"`, `"all fine"`, 1))
		}
		return data
	}))
	for _, tc := range []struct {
		name   string
		log    string
		hosts  events.HostRecord
		seq    uint64
		reason string
	}{
		{"host not enrolled", good, other, 1, `host "web-01" is not in the registry`},
		{"key pending", good, pending, 1, "is pending, never enrolled"},
		{"key revoked before the event", good, revoked, 4, "was revoked at 2026-01-01T00:00:03Z"},
		{"payload changed, chain recomputed", changed, enrolled, 3, "payload_sha256 differs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, rep := verifyJSON(t, "--jsonl", tc.log, "--hosts", hostsFile(t, tc.hosts))
			require.Equal(t, ExitDrift, code)
			assert.Equal(t, "bad_signature", rep.Status)
			assert.Nil(t, rep.Broken, "the chain itself verifies")
			require.NotNil(t, rep.Evidence.Bad)
			assert.Equal(t, tc.seq, rep.Evidence.Bad.Seq)
			assert.Equal(t, fmt.Sprintf("ev-%d", tc.seq-1), rep.Evidence.Bad.ID)
			assert.Contains(t, rep.Evidence.Bad.Reason, tc.reason)
		})
	}

	t.Run("unsigned", func(t *testing.T) {
		log := writeRecords(t, h, signedRecords(t, h, host, key, 6, true, nil))
		code, rep := verifyJSON(t, "--jsonl", log, "--hosts", hostsFile(t, enrolled))
		require.Equal(t, ExitPass, code, "counted, not a failure")
		assert.Equal(t, 3, rep.Evidence.Signed)
		assert.Equal(t, 3, rep.Evidence.Unsigned)
		code, rep = verifyJSON(t, "--jsonl", log, "--hosts", hostsFile(t, enrolled), "--require-signatures")
		require.Equal(t, ExitDrift, code)
		require.NotNil(t, rep.Evidence.Bad)
		assert.Equal(t, uint64(2), rep.Evidence.Bad.Seq)
		assert.Contains(t, rep.Evidence.Bad.Reason, "unsigned")
	})

	t.Run("registry bucket", func(t *testing.T) {
		_, url := natstest.RunJetStream(t)
		_, js := natstest.Connect(t, url)
		require.NoError(t, topology.EnsureVerifier(ctx, js, 1))
		kv, err := js.KeyValue(ctx, topology.BucketHosts)
		require.NoError(t, err)
		code, rep := verifyJSON(t, "--jsonl", good, "--registry", "--nats", url)
		require.Equal(t, ExitDrift, code, "an empty registry enrolls nobody")
		require.NotNil(t, rep.Evidence.Bad)
		_, err = verifier.NewHosts(kv, verifier.EnrollManual).Approve(ctx, host, keyID, "test")
		require.NoError(t, err)
		code, rep = verifyJSON(t, "--jsonl", good, "--registry", "--nats", url)
		require.Equal(t, ExitPass, code)
		assert.Equal(t, 6, rep.Evidence.Signed)
	})

	code, _, errs := runAudit(ctx, "verify", "--jsonl", good, "--require-signatures")
	assert.Equal(t, ExitError, code)
	assert.Contains(t, errs, "--require-signatures needs --registry or --hosts")
}

// TestAuditVerifyRefusedByTheVerifier: a link whose evidence signature
// fails, whose event the verifier refused (its dead letter, naming the
// same stream message and id, is in the DLQ chain), is a note, "refused
// by the verifier: <reason>", in the human output and the --json report,
// and audit verify exits 0; the same chain without the dead letter, or
// with one of another message, exits 2 (a forged event). The cases: a
// real event replayed under a new id, linked whole with its signature as
// the auditor did before it checked claims (the verifier: claim_mismatch),
// and an event in the host's name signed by another key, which the
// auditor links whole (it does not read the registry; the verifier:
// key_changed).
func TestAuditVerifyRefusedByTheVerifier(t *testing.T) {
	ctx := context.Background()
	h := chain.NewHasher(nil)
	_, key, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	const host = "web-01"
	hosts := hostsFile(t, events.HostRecord{Host: host, Keys: []events.HostKey{
		{Key: dsse.KeyID(key.Public().(ed25519.PublicKey)), State: events.KeyEnrolled, By: "test"}}})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	target := events.Target{Kind: "systemd.unit", Identifier: "u0.service"}
	p := events.CollectionFailed{Host: host, Collector: "systemd", Target: &target, Reason: "timeout", Message: "no answer"}

	const replayID = "01930000-0000-7000-8000-00000000dead"
	replay := func(t *testing.T, heads map[string]link.Head) link.Record {
		// The first event's message again under a new id, linked as the
		// auditor linked it before it checked claims: whole, its
		// signature kept.
		orig, _, err := binding.NewMsg(events.Source("collector", host), p, binding.WithID("ev-0"), binding.WithTime(at),
			binding.WithSigner(dsse.NewSigner(key, func() (uint64, error) { return 1, nil })))
		require.NoError(t, err)
		ev := link.Entry(&link.Message{Stream: "EVIDENCE", Seq: 5, Subject: orig.Subject, Header: orig.Header, Data: orig.Data,
			Stored: at.Add(5 * time.Second)}, "/auditor/t")
		attrs, _ := ev.Get("attributes")
		for i, mb := range attrs.Members {
			if mb.Key == "id" {
				attrs.Members[i].Value = jsontree.Value{Kind: jsontree.String, Text: replayID}
			}
		}
		name := link.ChainName("EVIDENCE", orig.Subject)
		r, err := link.Seal(h, name, heads[name], ev)
		require.NoError(t, err)
		heads[name] = r.Head()
		return r
	}
	const otherKeyID = "01930000-0000-7000-8000-0000000000ee"
	otherKey := func(t *testing.T, heads map[string]link.Head) link.Record {
		m, _, err := binding.NewMsg(events.Source("collector", host), p, binding.WithID(otherKeyID), binding.WithTime(at.Add(5*time.Second)),
			binding.WithSigner(signtest.Random()))
		require.NoError(t, err)
		r := seal(t, h, heads, &link.Message{Stream: "EVIDENCE", Seq: 5, Subject: m.Subject, Header: m.Header, Data: m.Data, Stored: at.Add(5 * time.Second)})
		require.False(t, r.Meta.Rejected, "linked whole: the claim says what the event says")
		return r
	}
	// deadLetter is the verifier's dead letter of EVIDENCE's message seq
	// with event id, as natsbus publishes it, linked at DLQ seq 1.
	deadLetter := func(t *testing.T, heads map[string]link.Head, seq uint64, id, reason, why string) link.Record {
		cause := natsbus.Permanent(fmt.Errorf("rejected evidence (%s): authenticate evidence of %s: %s", reason, host, why))
		rec := binding.Rejected("EVIDENCE", "verifier", events.CollectFailedSubject(host), seq, 1,
			nats.Header{"ce-id": []string{id}, "Nats-Msg-Id": []string{id}}, []byte(`{}`), cause)
		m, _, err := binding.NewMsg(events.Source("verifier", "v"), rec, binding.WithID(natsbus.DeadLetterID("EVIDENCE", "verifier", seq)),
			binding.WithTime(at.Add(6*time.Second)))
		require.NoError(t, err)
		return seal(t, h, heads, &link.Message{Stream: "DLQ", Seq: 1, Subject: m.Subject, Header: m.Header, Data: m.Data, Stored: at.Add(6 * time.Second)})
	}

	for _, tc := range []struct {
		name, id, reason, why, finding string
		link                           func(*testing.T, map[string]link.Head) link.Record
	}{
		{"replayed under a new id", replayID, "claim_mismatch", "the claim does not match the event: id differs", "id differs", replay},
		{"another key in the host's name", otherKeyID, "key_changed", "another key than the enrolled one", "is not a key of host", otherKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			heads := map[string]link.Head{}
			recs := signedRecords(t, h, host, key, 4, false, nil)
			for _, r := range recs {
				heads[r.Chain] = r.Head()
			}
			forged := tc.link(t, heads)
			dlqHeads := map[string]link.Head{}
			withDead := append(slices.Clone(recs), forged, deadLetter(t, dlqHeads, 5, tc.id, tc.reason, tc.why))
			otherDead := append(slices.Clone(recs), forged, deadLetter(t, map[string]link.Head{}, 4, tc.id, tc.reason, tc.why))
			withoutDead := append(slices.Clone(recs), forged)

			code, out, errs := runAudit(ctx, "verify", "--json", "--jsonl", writeRecords(t, h, withDead), "--hosts", hosts)
			require.Equal(t, ExitPass, code, errs+out)
			var rep auditReport
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			assert.Equal(t, "intact", rep.Status)
			require.NotNil(t, rep.Evidence)
			assert.Nil(t, rep.Evidence.Bad)
			assert.Equal(t, 4, rep.Evidence.Signed)
			assert.Equal(t, 1, rep.Evidence.Refused)
			require.Len(t, rep.Evidence.Notes, 1)
			n := rep.Evidence.Notes[0]
			assert.Equal(t, forged.Chain, n.Chain)
			assert.Equal(t, forged.Seq, n.Seq)
			assert.Equal(t, tc.id, n.ID)
			assert.Contains(t, n.Reason, tc.finding)
			assert.Equal(t, tc.reason, n.Refused)
			assert.Equal(t, "verifier", n.Consumer)
			assert.Equal(t, "DLQ", n.DeadLetterChain)
			assert.Equal(t, uint64(1), n.DeadLetterSeq)
			assert.Contains(t, n.Note, "refused by the verifier: "+tc.reason)

			// The dead letter first in the log: the same.
			dlqFirst := append([]link.Record{withDead[len(withDead)-1]}, withDead[:len(withDead)-1]...)
			code, out, errs = runAudit(ctx, "verify", "--jsonl", writeRecords(t, h, dlqFirst), "--hosts", hosts)
			require.Equal(t, ExitPass, code, errs+out)
			assert.Contains(t, out, "✓  audit chain intact")
			assert.Contains(t, out, fmt.Sprintf("note: chain %q seq %d: event %q: ", forged.Chain, forged.Seq, tc.id))
			assert.Contains(t, out, "refused by the verifier: "+tc.reason)
			assert.Contains(t, out, "1 refused by the verifier (notes)")

			for name, recs := range map[string][]link.Record{"no dead letter": withoutDead, "a dead letter of another message": otherDead} {
				code, out, errs = runAudit(ctx, "verify", "--json", "--jsonl", writeRecords(t, h, recs), "--hosts", hosts)
				require.Equal(t, ExitDrift, code, "%s: %s", name, errs+out)
				var rep auditReport
				require.NoError(t, json.Unmarshal([]byte(out), &rep))
				assert.Equal(t, "bad_signature", rep.Status, name)
				require.NotNil(t, rep.Evidence.Bad, name)
				assert.Equal(t, tc.id, rep.Evidence.Bad.ID, name)
				assert.Contains(t, rep.Evidence.Bad.Reason, tc.finding, name)
				assert.Zero(t, rep.Evidence.Refused, name)
				assert.Empty(t, rep.Evidence.Notes, name)
			}
		})
	}
}
