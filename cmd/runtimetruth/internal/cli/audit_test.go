package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/logtest"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
	"github.com/runtimetruth/runtimetruth/services/auditor/syslog"
)

// runAudit runs `runtimetruth audit ARGS` as Run does (exit codes
// included), with the audit command alone under the root.
func runAudit(ctx context.Context, args ...string) (int, string, string) {
	var out, errb logtest.Buffer
	root := &cobra.Command{Use: "runtimetruth", SilenceErrors: true, SilenceUsage: true}
	root.SetOut(&out)
	root.SetErr(&errb)
	root.AddCommand(newAuditCmd("test"))
	root.SetArgs(append([]string{"audit"}, args...))
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return ExitPass, out.String(), errb.String()
	case errors.Is(err, errDrift):
		return ExitDrift, out.String(), errb.String()
	default:
		return ExitError, out.String(), "runtimetruth: error: " + err.Error() + "\n"
	}
}

// auditRecords seals n events (verdicts and baseline changes of two hosts)
// as the auditor records stream messages.
func auditRecords(t *testing.T, h chain.Hasher, from, n int, heads map[string]link.Head) []link.Record {
	t.Helper()
	var out []link.Record
	for i := from; i < from+n; i++ {
		host := []string{"web-01", "web-02"}[i%2]
		target := events.Target{Kind: "systemd.unit", Identifier: fmt.Sprintf("u%d.service", i%3)}
		var p events.Payload = events.Verdict{Status: events.StatusError, Host: host, Target: target,
			EvidenceID: fmt.Sprintf("e-%d", i), SnapshotDigest: "sha256:" + strings.Repeat("a", 64), Error: "no baseline"}
		stream := "VERDICTS"
		if i%5 == 4 {
			p = events.BaselineChanged{Target: target, Change: events.BaselineCreated, Digest: "sha256:" + strings.Repeat("b", 64)}
			stream = "BASELINES"
		}
		m, _, err := binding.NewMsg(events.Source("test", "t"), p, binding.WithID(fmt.Sprintf("id-%d", i)),
			binding.WithTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Second)))
		require.NoError(t, err)
		out = append(out, seal(t, h, heads, &link.Message{Stream: stream, Seq: uint64(i + 1), Subject: m.Subject, Header: m.Header, Data: m.Data,
			Stored: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second)}))
	}
	return out
}

// seal links msg to the head of its chain in heads, as the auditor
// /auditor/t records a stream message, and advances that head.
func seal(t *testing.T, h chain.Hasher, heads map[string]link.Head, msg *link.Message) link.Record {
	t.Helper()
	name := link.ChainName(msg.Stream, msg.Subject)
	r, err := link.Seal(h, name, heads[name], link.Entry(msg, "/auditor/t"))
	require.NoError(t, err)
	heads[name] = r.Head()
	return r
}

// writeLog writes n links to a rotated JSONL log and returns its path.
func writeLog(t *testing.T, h chain.Hasher, n int) (string, []link.Record) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit", "audit.jsonl")
	s, err := jsonl.Open(context.Background(), jsonl.Options{Path: path, MaxBytes: 8 << 10, Hasher: h})
	require.NoError(t, err)
	recs := auditRecords(t, h, 0, n, map[string]link.Head{})
	for i := 0; i < len(recs); i += 7 {
		require.NoError(t, s.Write(context.Background(), recs[i:min(i+7, len(recs))]))
	}
	require.NoError(t, s.Close())
	return path, recs
}

func TestAuditVerifyJSONL(t *testing.T) {
	ctx := context.Background()
	path, recs := writeLog(t, chain.NewHasher(nil), 60)
	files, err := jsonl.Files(path)
	require.NoError(t, err)
	require.Greater(t, len(files), 2, "rotated")

	for _, arg := range []string{path, filepath.Dir(path), filepath.Join(filepath.Dir(path), "audit.jsonl*")} {
		code, out, errs := runAudit(ctx, "verify", "--jsonl", arg)
		require.Equal(t, ExitPass, code, errs)
		assert.Contains(t, out, "audit chain intact: 60 links in 3 chains")
	}

	// Change one event in a rotated file.
	data, err := os.ReadFile(files[1])
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	lines[2] = strings.Replace(lines[2], `"specversion":"1.0"`, `"specversion":"1.1"`, 1)
	require.NoError(t, os.WriteFile(files[1], []byte(strings.Join(lines, "\n")), 0o600))
	code, out, _ := runAudit(ctx, "verify", "--jsonl", path)
	require.Equal(t, ExitDrift, code, out)
	assert.Contains(t, out, files[1]+":3: chain ")
	assert.Contains(t, out, ": changed: ")

	code, out, _ = runAudit(ctx, "verify", "--jsonl", path, "--json")
	require.Equal(t, ExitDrift, code)
	var rep auditReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, 1, rep.ReportSchemaVersion)
	assert.Equal(t, "broken", rep.Status)
	require.NotNil(t, rep.Broken)
	assert.Equal(t, "changed", string(rep.Broken.Reason))
	assert.Equal(t, 3, rep.Broken.Line)
	_ = recs
}

func TestAuditVerifyKeyAndCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "hmac.key")
	require.NoError(t, os.WriteFile(keyFile, []byte("a key of sixteen bytes or more\n"), 0o600))
	h := chain.NewHasher([]byte("a key of sixteen bytes or more"))
	path, recs := writeLog(t, h, 40)

	code, _, errs := runAudit(ctx, "verify", "--jsonl", path)
	require.Equal(t, ExitError, code)
	assert.Contains(t, errs, "--key")
	code, out, errs := runAudit(ctx, "verify", "--jsonl", path, "--key", keyFile)
	require.Equal(t, ExitPass, code, out+errs)

	// Signed checkpoints of the last links, as the auditor sends them.
	_, k, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	pub := filepath.Join(dir, "pub.pem")
	require.NoError(t, os.WriteFile(pub, chain.MarshalPublicKey(k.Public().(ed25519.PublicKey)), 0o600))
	last := recs[len(recs)-1]
	cp := chain.Checkpoint{Chain: last.Chain, Seq: last.Seq, Head: last.Hash, Time: time.Now(), Auditor: "/auditor/t"}.Sign(k)
	cpFile := filepath.Join(dir, "messages.log")
	require.NoError(t, os.WriteFile(cpFile, []byte("<13>1 - h runtimetruth-auditor 1 checkpoint "+cp.SD("32473")+" checkpoint\n"), 0o600))
	code, out, errs = runAudit(ctx, "verify", "--jsonl", path, "--key", keyFile, "--checkpoints", cpFile, "--checkpoint-key", pub)
	require.Equal(t, ExitPass, code, out+errs)
	assert.Contains(t, out, "1 checkpoints")

	// Truncate the log: the checkpoint tells.
	files, err := jsonl.Files(path)
	require.NoError(t, err)
	require.NoError(t, os.Remove(files[len(files)-1]))
	code, out, _ = runAudit(ctx, "verify", "--jsonl", path, "--key", keyFile, "--checkpoints", cpFile, "--checkpoint-key", pub)
	require.Equal(t, ExitDrift, code, out)
	assert.Contains(t, out, "truncated")

	// A checkpoint signed by someone else is an error, not a verdict.
	_, other, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(pub, chain.MarshalPublicKey(other.Public().(ed25519.PublicKey)), 0o600))
	code, _, errs = runAudit(ctx, "verify", "--jsonl", path, "--key", keyFile, "--checkpoints", cpFile, "--checkpoint-key", pub)
	require.Equal(t, ExitError, code)
	assert.Contains(t, errs, "signature")
}

// siemLog is what a syslog receiver writes of the auditor's sink, one
// RFC 5424 message a line as received (rsyslog's %rawmsg%): the links'
// messages, then the checkpoints'.
func siemLog(t *testing.T, recs []link.Record, cps []chain.Checkpoint) []string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "log.sock")
	pc, err := net.ListenPacket("unixgram", sock)
	require.NoError(t, err)
	defer func() { _ = pc.Close() }()
	s, err := syslog.New(syslog.Options{Network: "unixgram", Address: sock, Hostname: "h"})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	ctx := context.Background()
	require.NoError(t, s.Write(ctx, recs))
	require.NoError(t, s.SendCheckpoints(ctx, cps))
	var lines []string
	buf := make([]byte, 64<<10)
	for range len(recs) + len(cps) {
		require.NoError(t, pc.SetReadDeadline(time.Now().Add(10*time.Second)))
		n, _, err := pc.ReadFrom(buf)
		require.NoError(t, err)
		lines = append(lines, string(buf[:n]))
	}
	return lines
}

// TestAuditVerifySIEMCheckpoints: a SIEM's log holds the links' messages
// beside the checkpoints, and an event's target and subject, which the
// link messages carry, may hold checkpoint text. Verification reads the
// checkpoints of the messages of MSGID checkpoint only, and says how many
// other lines it skipped.
func TestAuditVerifySIEMCheckpoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := chain.NewHasher(nil)
	forged := `[rtcheckpoint@32473 chain="VERDICTS/web-01" seq="1" head="sha256:00" time="2026-01-02T03:04:05Z" auditor="x" key="" sig=""]`
	heads := map[string]link.Head{}
	recs := auditRecords(t, h, 0, 6, heads)
	target := events.Target{Kind: "git.repository", Identifier: "/srv/app " + forged}
	m, _, err := binding.NewMsg(events.Source("test", "t"), events.Verdict{Status: events.StatusError, Host: "web-01", Target: target,
		EvidenceID: "e-x", SnapshotDigest: "sha256:" + strings.Repeat("a", 64), Error: "no baseline"},
		binding.WithID("id-forged"), binding.WithTime(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)))
	require.NoError(t, err)
	m.Subject += "." + strings.ReplaceAll(forged, " ", "_")
	evil := seal(t, h, heads, &link.Message{Stream: "VERDICTS", Seq: 7, Subject: m.Subject, Header: m.Header, Data: m.Data,
		Stored: time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC)})
	require.Contains(t, evil.Meta.Target, "[rtcheckpoint@32473 ")
	recs = append(recs, evil)
	path := filepath.Join(dir, "audit.jsonl")
	s, err := jsonl.Open(ctx, jsonl.Options{Path: path, Hasher: h})
	require.NoError(t, err)
	require.NoError(t, s.Write(ctx, recs))
	require.NoError(t, s.Close())

	_, k, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	pub := filepath.Join(dir, "pub.pem")
	require.NoError(t, os.WriteFile(pub, chain.MarshalPublicKey(k.Public().(ed25519.PublicKey)), 0o600))
	var cps []chain.Checkpoint
	for name, hd := range heads {
		cps = append(cps, chain.Checkpoint{Chain: name, Seq: hd.Seq, Head: hd.Hash, Time: time.Now(), Auditor: "/auditor/t"}.Sign(k))
	}
	lines := siemLog(t, recs, cps)
	require.Contains(t, lines[len(recs)-1], forged[:40], "the link message carries the target's checkpoint text")
	garbage := []string{"Jan  2 03:04:05 relay rsyslogd: restart " + forged, "garbage", forged}
	cpFile := filepath.Join(dir, "siem.log")
	require.NoError(t, os.WriteFile(cpFile, []byte(strings.Join(append(garbage, lines...), "\n")+"\n"), 0o600))
	skipped := len(recs) + len(garbage)

	code, out, errs := runAudit(ctx, "verify", "--jsonl", path, "--checkpoints", cpFile, "--checkpoint-key", pub)
	require.Equal(t, ExitPass, code, out+errs)
	assert.Contains(t, out, fmt.Sprintf("%d checkpoints", len(cps)))
	assert.Contains(t, out, fmt.Sprintf("checkpoints: %d read from %s, %d other line(s) skipped\n", len(cps), cpFile, skipped))

	code, out, errs = runAudit(ctx, "verify", "--jsonl", path, "--checkpoints", cpFile, "--checkpoint-key", pub, "--json")
	require.Equal(t, ExitPass, code, out+errs)
	var rep auditReport
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, "intact", rep.Status)
	assert.Equal(t, len(cps), rep.Checkpoints)
	assert.Equal(t, cpFile, rep.CheckpointFile)
	assert.Equal(t, skipped, rep.CheckpointLinesSkipped)

	// The checkpoints still bind: the log cut before its last link is
	// reported truncated.
	cut := filepath.Join(dir, "cut", "audit.jsonl")
	s, err = jsonl.Open(ctx, jsonl.Options{Path: cut, Hasher: h})
	require.NoError(t, err)
	require.NoError(t, s.Write(ctx, recs[:len(recs)-1]))
	require.NoError(t, s.Close())
	code, out, _ = runAudit(ctx, "verify", "--jsonl", cut, "--checkpoints", cpFile, "--checkpoint-key", pub)
	require.Equal(t, ExitDrift, code, out)
	assert.Contains(t, out, "truncated")

	// A checkpoint message that does not parse is an error naming its line.
	bad := strings.Replace(lines[len(lines)-1], ` seq="`, ` seq="x`, 1)
	require.NoError(t, os.WriteFile(cpFile, []byte(strings.Join(append(garbage, bad), "\n")), 0o600))
	code, _, errs = runAudit(ctx, "verify", "--jsonl", path, "--checkpoints", cpFile)
	require.Equal(t, ExitError, code)
	assert.Contains(t, errs, fmt.Sprintf("runtimetruth: error: %s:%d: checkpoint: seq ", cpFile, len(garbage)+1))
}

func TestAuditUsage(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"verify"},
		{"verify", "--jsonl", "a", "--clickhouse", "b"},
		{"verify", "--jsonl", filepath.Join(t.TempDir(), "none.jsonl")},
		{"verify", "--jsonl", "x", "--checkpoint-key", "k"},
		{"tail"},
	} {
		code, _, errs := runAudit(ctx, args...)
		assert.Equal(t, ExitError, code, "%v: %s", args, errs)
		assert.True(t, strings.HasPrefix(errs, "runtimetruth: error: "), errs)
	}
}

// followAudit runs `audit tail args` in the background until ctx ends:
// out holds what it has printed so far; done is closed once it returned.
func followAudit(ctx context.Context, args ...string) (out *logtest.Buffer, done <-chan struct{}) {
	out = &logtest.Buffer{}
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		root := &cobra.Command{Use: "runtimetruth", SilenceErrors: true, SilenceUsage: true}
		root.SetOut(out)
		root.AddCommand(newAuditCmd("test"))
		root.SetArgs(append([]string{"audit", "tail"}, args...))
		_ = root.ExecuteContext(ctx)
	}()
	return out, finished
}

func TestAuditTailJSONL(t *testing.T) {
	h := chain.NewHasher(nil)
	path, recs := writeLog(t, h, 30)
	code, out, errs := runAudit(context.Background(), "tail", "--jsonl", path, "-n", "3", "--follow=false")
	require.Equal(t, ExitPass, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	assert.Contains(t, lines[2], fmt.Sprintf("%s #%d", recs[29].Chain, recs[29].Seq))

	// Follow: new links (across a rotation) appear.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	buf, done := followAudit(ctx, "--jsonl", path, "-n", "30", "--poll", "20ms", "--json")
	require.Eventually(t, func() bool { return strings.Count(buf.String(), "\n") == 30 }, 10*time.Second, 10*time.Millisecond)
	s, err := jsonl.Open(context.Background(), jsonl.Options{Path: path, MaxBytes: 8 << 10, Hasher: h})
	require.NoError(t, err)
	heads, err := s.Heads(context.Background())
	require.NoError(t, err)
	more := auditRecords(t, h, 30, 20, heads)
	for _, r := range more {
		require.NoError(t, s.Write(context.Background(), []link.Record{r}))
	}
	require.NoError(t, s.Close())
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && strings.Count(buf.String(), "\n") < 30+len(more) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	got := buf.String()
	assert.Equal(t, 30+len(more), strings.Count(got, "\n"), "each link once")
	for _, r := range append(recs, more...) {
		assert.Contains(t, got, string(r.Line))
	}
}

func clickHouseDSN(t *testing.T) string {
	t.Helper()
	base := os.Getenv("RUNTIMETRUTH_CLICKHOUSE_DSN")
	if base == "" {
		t.Fatal("RUNTIMETRUTH_CLICKHOUSE_DSN is not set: run the tests through scripts/test-services.sh (make test), which starts ClickHouse")
	}
	opts, err := clickhouse.ParseDSN(base)
	require.NoError(t, err)
	conn, err := clickhouse.Open(opts)
	require.NoError(t, err)
	db := fmt.Sprintf("rt_cli_%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, conn.Exec(ctx, "CREATE DATABASE "+db))
	t.Cleanup(func() {
		_ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db)
		_ = conn.Close()
	})
	i := strings.LastIndex(base, "/")
	return base[:i+1] + db
}

// clickHouseStore opens the links table of a new ClickHouse database (see
// clickHouseDSN), closed when the test ends, and writes recs to it; it
// returns the database's DSN and the store.
func clickHouseStore(ctx context.Context, t *testing.T, recs []link.Record) (string, *chstore.Store) {
	t.Helper()
	dsn := clickHouseDSN(t)
	s, err := chstore.Open(ctx, chstore.Options{DSN: dsn})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Migrate(ctx)
	require.NoError(t, err)
	require.NoError(t, s.Write(ctx, recs))
	return dsn, s
}

func TestAuditClickHouse(t *testing.T) {
	ctx := context.Background()
	recs := auditRecords(t, chain.NewHasher(nil), 0, 50, map[string]link.Head{})
	dsn, s := clickHouseStore(ctx, t, recs)

	code, out, errs := runAudit(ctx, "verify", "--clickhouse", dsn)
	require.Equal(t, ExitPass, code, errs)
	assert.Contains(t, out, "audit chain intact: 50 links in 3 chains (clickhouse)")
	code, out, errs = runAudit(ctx, "tail", "--clickhouse", dsn, "-n", "2", "--follow=false")
	require.Equal(t, ExitPass, code, errs)
	assert.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 2)

	// Follow: links appended meanwhile are printed once each, in order.
	tctx, cancel := context.WithCancel(ctx)
	buf, done := followAudit(tctx, "--clickhouse", dsn, "-n", "1", "--poll", "20ms", "--json")
	heads := map[string]link.Head{}
	for _, r := range recs {
		heads[r.Chain] = r.Head()
	}
	// The last link printed: tail has read the heads it follows from.
	require.Eventually(t, func() bool { return strings.Count(buf.String(), "\n") == 1 }, 10*time.Second, 10*time.Millisecond)
	more := auditRecords(t, chain.NewHasher(nil), 50, 20, heads)
	require.NoError(t, s.Write(ctx, more[:10]))
	require.NoError(t, s.Write(ctx, more[10:]))
	require.Eventually(t, func() bool { return strings.Count(buf.String(), "\n") >= 1+len(more) }, 10*time.Second, 10*time.Millisecond)
	cancel()
	<-done
	got := buf.String()
	assert.Equal(t, 1+len(more), strings.Count(got, "\n"), "each new link once")
	for _, r := range more {
		assert.Contains(t, got, string(r.Line))
	}

	require.NoError(t, s.Conn().Exec(ctx, "ALTER TABLE "+s.Table()+" DELETE WHERE chain = 'VERDICTS/web-02' AND seq = 4"))
	require.Eventually(t, func() bool {
		code, out, _ = runAudit(ctx, "verify", "--clickhouse", dsn)
		return code == ExitDrift
	}, 20*time.Second, 50*time.Millisecond)
	assert.Contains(t, out, `chain "VERDICTS/web-02" seq 5: missing: link 4 is missing`)
}

// TestAuditVerifyTamperedClickHouse changes the table as someone with
// write access could; `audit verify --clickhouse` exits 2 and names the
// link and why.
func TestAuditVerifyTamperedClickHouse(t *testing.T) {
	const c = "VERDICTS/web-01"
	cols := "chain, seq, prev, hash, stream, stream_seq, nats_subject, stored, stored_ms, event_id, event_type, event_source, " +
		"event_subject, event_time, event_time_ms, host, target, status, rejected, reason"
	for _, tc := range []struct {
		name  string
		stmts func(table string, byseq map[uint64]link.Record) []string
		want  string
	}{
		{"ALTER UPDATE", func(table string, _ map[uint64]link.Record) []string {
			return []string{fmt.Sprintf(`ALTER TABLE %s UPDATE event = replaceOne(event, 'no baseline', 'all fine') WHERE chain = '%s' AND seq = 5`, table, c)}
		}, `chain "VERDICTS/web-01" seq 5: changed: `},
		{"DELETE", func(table string, _ map[uint64]link.Record) []string {
			return []string{fmt.Sprintf(`ALTER TABLE %s DELETE WHERE chain = '%s' AND seq = 7`, table, c)}
		}, `chain "VERDICTS/web-01" seq 8: missing: link 7 is missing`},
		{"a row inserted twice", func(table string, _ map[uint64]link.Record) []string {
			return []string{fmt.Sprintf(`INSERT INTO %s SELECT * FROM %s WHERE chain = '%s' AND seq = 3`, table, table, c)}
		}, `chain "VERDICTS/web-01" seq 3: duplicated: `},
		{"a forged row inserted", func(table string, _ map[uint64]link.Record) []string {
			return []string{fmt.Sprintf(`INSERT INTO %s SELECT %s, replaceOne(event, 'no baseline', 'forged') FROM %s WHERE chain = '%s' AND seq = 4`,
				table, cols, table, c)}
		}, `chain "VERDICTS/web-01" seq 4: changed: `},
		{"a reordered sequence", func(table string, byseq map[uint64]link.Record) []string {
			return []string{
				fmt.Sprintf(`INSERT INTO %s SELECT chain, if(seq = 5, 6, 5), %s, event FROM %s WHERE chain = '%s' AND seq IN (5, 6)`,
					table, strings.TrimPrefix(cols, "chain, seq, "), table, c),
				fmt.Sprintf(`ALTER TABLE %s DELETE WHERE chain = '%s' AND ((seq = 5 AND hash = '%s') OR (seq = 6 AND hash = '%s'))`,
					table, c, byseq[5].Hash, byseq[6].Hash),
			}
		}, `chain "VERDICTS/web-01" seq 5: reordered: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			recs := auditRecords(t, chain.NewHasher(nil), 0, 60, map[string]link.Head{})
			dsn, s := clickHouseStore(ctx, t, recs)
			byseq := map[uint64]link.Record{}
			for _, r := range recs {
				if r.Chain == c {
					byseq[r.Seq] = r
				}
			}
			code, out, errs := runAudit(ctx, "verify", "--clickhouse", dsn)
			require.Equal(t, ExitPass, code, out+errs)
			for _, stmt := range tc.stmts(s.Table(), byseq) {
				require.NoError(t, s.Conn().Exec(ctx, stmt), stmt)
			}
			// Mutations run in the background.
			require.Eventually(t, func() bool {
				var n uint64
				require.NoError(t, s.Conn().QueryRow(ctx, "SELECT count() FROM system.mutations WHERE is_done = 0").Scan(&n))
				return n == 0
			}, 30*time.Second, 20*time.Millisecond)
			code, out, errs = runAudit(ctx, "verify", "--clickhouse", dsn)
			require.Equal(t, ExitDrift, code, out+errs)
			assert.Contains(t, out, "audit chain BROKEN: row ")
			assert.Contains(t, out, tc.want)
		})
	}
}

// TestAuditVerifyTamperedJSONL edits the log file; `audit verify --jsonl`
// exits 2 and names the file, line, link and why.
func TestAuditVerifyTamperedJSONL(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(lines []string) []string
		want   string
	}{
		{"a line deleted", func(ls []string) []string { return append(ls[:4], ls[5:]...) }, ": missing: "},
		{"two lines swapped", func(ls []string) []string { ls[1], ls[2] = ls[2], ls[1]; return ls }, ": reordered: "},
		{"a line repeated", func(ls []string) []string { return append(ls[:3], append([]string{ls[1]}, ls[3:]...)...) }, ": duplicated: "},
		{"an event changed", func(ls []string) []string {
			ls[2] = strings.Replace(ls[2], "no baseline", "all fine", 1)
			return ls
		}, ": changed: "},
		{"a torn line", func(ls []string) []string { ls[2] = ls[2][:len(ls[2])/2]; return ls }, ": malformed: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// One chain: web-01's verdicts.
			var one []link.Record
			for _, r := range auditRecords(t, chain.NewHasher(nil), 0, 30, map[string]link.Head{}) {
				if r.Chain == "VERDICTS/web-01" {
					one = append(one, r)
				}
			}
			path := writeRecords(t, chain.NewHasher(nil), one)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			require.NoError(t, os.WriteFile(path, []byte(strings.Join(tc.tamper(lines), "\n")+"\n"), 0o600))
			code, out, errs := runAudit(context.Background(), "verify", "--jsonl", path)
			require.Equal(t, ExitDrift, code, out+errs)
			assert.Contains(t, out, "audit chain BROKEN: "+path+":")
			assert.Contains(t, out, tc.want)
		})
	}
}

// tail says what a drift or error verdict found, of either verdict version
// (verdict.*.v1 links were written before the report matched
// RuntimeTruth's), with control characters escaped.
func TestAuditTailSummarizesVerdicts(t *testing.T) {
	h := chain.NewHasher(nil)
	target := events.Target{Kind: "systemd.unit", Identifier: "agent.service"}
	drift := auditortest.Drift("web-01", target, "e-1", 1)
	failed := events.Verdict{Status: events.StatusError, Host: "web-01", Target: target, EvidenceID: "e-2",
		SnapshotDigest: "sha256:" + strings.Repeat("a", 64), Error: "no baseline\x1b[2J for it"}
	var msgs []*nats.Msg
	for i, p := range []events.Payload{drift, drift, failed} {
		m, _, err := binding.NewMsg(events.Source("test", "t"), p, binding.WithID(fmt.Sprintf("id-%d", i)))
		require.NoError(t, err)
		if i == 1 {
			m = auditortest.V1(t, m)
		}
		msgs = append(msgs, m)
	}
	heads := map[string]link.Head{}
	var recs []link.Record
	for i, m := range msgs {
		recs = append(recs, seal(t, h, heads, &link.Message{Stream: "VERDICTS", Seq: uint64(i + 1), Subject: m.Subject, Header: m.Header, Data: m.Data,
			Stored: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC)}))
	}
	path := writeRecords(t, h, recs)

	code, out, errs := runAudit(context.Background(), "tail", "--jsonl", path, "-n", "3", "--follow=false")
	require.Equal(t, ExitPass, code, errs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3)
	assert.Contains(t, lines[0], "verdict.drift.v2")
	assert.True(t, strings.HasSuffix(lines[0], "  2 change(s), first systemd.unit.main_pid"), lines[0])
	assert.Contains(t, lines[1], "verdict.drift.v1")
	assert.True(t, strings.HasSuffix(lines[1], "  2 change(s), first systemd.unit.main_pid"), lines[1])
	assert.True(t, strings.HasSuffix(lines[2], `  no baseline\x1b[2J for it`), lines[2])
	assert.NotContains(t, out, "\x1b")
}
