// Package auditortest builds catalog events and the real services the
// auditor's tests run against: ClickHouse (the DSN from
// RUNTIMETRUTH_CLICKHOUSE_DSN, a database per test) and rsyslog (the
// RUNTIMETRUTH_RSYSLOG_* variables), as scripts/test-services.sh exports
// them. A test whose service is missing fails; it never skips.
package auditortest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// Time is the time of the fixture events.
var Time = time.Date(2026, 10, 6, 3, 9, 41, 123456000, time.UTC)

// Digest is the "sha256:<hex>" digest of s: a fixture digest.
func Digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Target is the i-th fixture target.
func Target(i int) events.Target {
	return events.Target{Kind: "systemd.unit", Identifier: "agent-" + strconv.Itoa(i%7) + ".service"}
}

// Payload returns the i-th event of a mix that covers the catalog's
// payloads: drift, pass and error verdicts, runnable.modified, evidence,
// collection failures and baseline changes, spread over hosts.
func Payload(tb testing.TB, hosts []string, i int) events.Payload {
	tb.Helper()
	host := hosts[i%len(hosts)]
	t := Target(i)
	id := fmt.Sprintf("01920000-0000-7000-8000-%012d", i)
	switch i % 8 {
	case 0, 4:
		return Drift(host, t, id, i)
	case 1:
		r := &report.Report{Changes: []report.Change{}, Protected: []string{}, ReportSchemaVersion: report.SchemaVersion,
			Status: report.Pass, Target: report.Target{Kind: t.Kind, Identifier: t.Identifier}}
		return events.Verdict{Status: events.StatusPass, Host: host, Target: t, EvidenceID: id,
			SnapshotDigest: Digest(id), BaselineDigest: Digest(id), Report: r}
	case 2:
		return events.Verdict{Status: events.StatusError, Host: host, Target: t, EvidenceID: id,
			SnapshotDigest: Digest(id), Error: "no baseline for " + t.String()}
	case 3:
		return Modified(host, i)
	case 5:
		return Evidence(tb, host, i)
	case 6:
		return events.CollectionFailed{Host: host, Collector: "codex", Reason: "timeout",
			Message: "codex app-server did not answer within 10s", Retryable: true}
	default:
		return events.BaselineChanged{Target: t, Change: events.BaselineUpdated, Digest: Digest("b" + id),
			PreviousDigest: Digest("a" + id), Actor: "alice@example.com"}
	}
}

// Drift is a drift verdict with a two-field report.
func Drift(host string, t events.Target, id string, i int) events.Verdict {
	r := &report.Report{
		Changes: []report.Change{{Status: diff.Changed, Kind: "systemd.unit", Fields: []report.Field{
			{After: report.Present(snapshot.Int(int64(4000 + i))), Before: report.Present(snapshot.Int(3036)), Field: "main_pid"},
			{After: report.Missing, Before: report.Present(snapshot.String("agent")), Field: "user"},
		}}},
		Protected: []string{}, ReportSchemaVersion: report.SchemaVersion, Status: report.Drift,
		Target: report.Target{Kind: t.Kind, Identifier: t.Identifier},
	}
	return events.Verdict{Status: events.StatusDrift, Host: host, Target: t, EvidenceID: id,
		SnapshotDigest: Digest(id), BaselineDigest: Digest("base"), Report: r}
}

// Modified is a runnable.modified event.
func Modified(host string, i int) events.RunnableModified {
	return events.RunnableModified{Host: host, Ecosystem: events.Python, Environment: "/srv/agent/.venv",
		Package: "runspec_linux", Version: "0.20." + strconv.Itoa(i), Source: "index", Baseline: "RECORD",
		ChangedFiles: []events.FileChange{{Path: "runspec_linux/files.py", Change: events.FileModified,
			Observed: Digest("obs" + strconv.Itoa(i))}},
		ChangeDigest: Digest(strconv.Itoa(i))[len("sha256:"):]}
}

// Evidence is an evidence.collected event of a small systemd snapshot of
// Target(i), captured at Time.
func Evidence(tb testing.TB, host string, i int) events.EvidenceCollected {
	tb.Helper()
	return EvidenceOf(tb, host, Target(i), Time, i)
}

// EvidenceOf is an evidence.collected event of a small systemd snapshot
// of t captured at at, its main_pid 3000+i.
func EvidenceOf(tb testing.TB, host string, t events.Target, at time.Time, i int) events.EvidenceCollected {
	tb.Helper()
	s := &snapshot.Snapshot{
		SchemaVersion: snapshot.SchemaVersion,
		CapturedAt:    snapshot.FormatTime(at),
		Target:        snapshot.Target{Kind: t.Kind, Identifier: t.Identifier},
		Evidence: []snapshot.Record{{
			Plane: snapshot.Live, Kind: "systemd.unit",
			Source: snapshot.Source{Collector: "systemd", Method: "systemctl show"},
			Data:   snapshot.Data{"active_state": snapshot.String("active"), "main_pid": snapshot.Int(int64(3000 + i))},
		}},
	}
	ev, err := events.NewEvidenceCollected(host, s, time.Minute)
	if err != nil {
		tb.Fatalf("evidence fixture: %v", err)
	}
	return ev
}

// Msg encodes a payload as a NATS message with a fixed time and an id
// derived from i.
func Msg(tb testing.TB, p events.Payload, i int) *nats.Msg {
	tb.Helper()
	m, _, err := binding.NewMsg(events.Source("test", "fixture"), p,
		binding.WithID(fmt.Sprintf("01930000-0000-7000-8000-%012d", i)), binding.WithTime(Time.Add(time.Duration(i)*time.Millisecond)))
	if err != nil {
		tb.Fatalf("encode fixture %d: %v", i, err)
	}
	return m
}

// Key is the fixture collector's signing key.
var Key = ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))

// SignedMsg is Msg signed by key (a collector's signature, the claim's
// sequence seq).
func SignedMsg(tb testing.TB, p events.Payload, i int, key ed25519.PrivateKey, seq uint64) *nats.Msg {
	tb.Helper()
	s := dsse.NewSigner(key, func() (uint64, error) { return seq, nil })
	m, _, err := binding.NewMsg(events.Source("test", "fixture"), p,
		binding.WithID(fmt.Sprintf("01930000-0000-7000-8000-%012d", i)), binding.WithTime(Time.Add(time.Duration(i)*time.Millisecond)),
		binding.WithSigner(s))
	if err != nil {
		tb.Fatalf("encode signed fixture %d: %v", i, err)
	}
	return m
}

// V1 returns the verdict message m (as NewMsg writes it) as a verifier
// wrote it before verdict.*.v2: type and dataschema v1, the report in the
// earlier shape (each change with "change" added, removed or modified,
// bare before/after values, a missing side left out). Any other message
// is returned as is.
func V1(tb testing.TB, m *nats.Msg) *nats.Msg {
	tb.Helper()
	typ := m.Header.Get("ce-type")
	old := map[string]string{events.TypeVerdictPass: events.TypeVerdictPassV1,
		events.TypeVerdictDrift: events.TypeVerdictDriftV1, events.TypeVerdictError: events.TypeVerdictErrorV1}[typ]
	if old == "" {
		return m
	}
	var data map[string]any
	if err := json.Unmarshal(m.Data, &data); err != nil {
		tb.Fatalf("v1 fixture: %v", err)
	}
	if r, ok := data["report"].(map[string]any); ok {
		for _, c := range r["changes"].([]any) {
			c := c.(map[string]any)
			st := c["status"].(string)
			delete(c, "status")
			if st == "changed" {
				st = "modified"
			}
			c["change"] = st
			for _, f := range c["fields"].([]any) {
				f := f.(map[string]any)
				fst := "modified"
				for _, k := range []string{"before", "after"} {
					sd := f[k].(map[string]any)
					if sd["present"] == true {
						f[k] = sd["value"]
						continue
					}
					delete(f, k)
					fst = map[string]string{"before": "added", "after": "removed"}[k]
				}
				f["change"] = fst
			}
		}
	}
	b, err := json.Marshal(data)
	if err != nil {
		tb.Fatalf("v1 fixture: %v", err)
	}
	spec, _ := events.Lookup(old)
	out := nats.NewMsg(m.Subject)
	for k, v := range m.Header {
		out.Header[k] = append([]string(nil), v...)
	}
	out.Header.Set("ce-type", old)
	out.Header.Set("ce-dataschema", spec.SchemaURI)
	out.Data = b
	return out
}

// Message is a fixture as the auditor reads it from a stream.
func Message(tb testing.TB, stream string, seq uint64, m *nats.Msg) *link.Message {
	tb.Helper()
	return &link.Message{Stream: stream, Seq: seq, Subject: m.Subject, Header: m.Header, Data: m.Data,
		Stored: Time.Add(time.Duration(seq) * time.Second), Deliveries: 1, Consumer: "auditor"}
}

// StreamOf names the stream of the default topology that captures a
// subject (each filter is "<prefix>.>"); EVIDENCE for one none captures.
func StreamOf(subject string) string {
	for _, st := range topology.New(1).Streams {
		for _, f := range st.Subjects {
			if strings.HasPrefix(subject, strings.TrimSuffix(f, ">")) {
				return st.Name
			}
		}
	}
	return "EVIDENCE"
}

// Publish publishes n mixed events (Payload) from offset on, and waits for
// the server to store them.
func Publish(ctx context.Context, tb testing.TB, js jetstream.JetStream, hosts []string, offset, n int) {
	tb.Helper()
	for i := offset; i < offset+n; i++ {
		if _, err := js.PublishMsgAsync(Msg(tb, Payload(tb, hosts, i), i)); err != nil {
			tb.Fatalf("publish %d: %v", i, err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		tb.Fatalf("publish: %v", ctx.Err())
	}
}

// Malformed is a message on an evidence subject whose data is not JSON.
func Malformed(host string, i int) *nats.Msg {
	m := nats.NewMsg(events.EvidenceSubject(host, "systemd.unit"))
	m.Header.Set("ce-specversion", "1.0")
	m.Header.Set("ce-id", fmt.Sprintf("bad-%d", i))
	m.Header.Set("ce-type", events.TypeEvidenceCollected)
	m.Data = []byte(`{"host": "` + host + `", "host": "twice"`)
	return m
}

// DeadLetter is a dead-letter record (event.rejected on rt.dlq.EVIDENCE).
func DeadLetter(i int) events.EventRejected {
	return binding.Rejected("EVIDENCE", "verifier", events.EvidenceSubject("web-01", "git.repository"), uint64(i+1), 1,
		nats.Header{"ce-id": []string{fmt.Sprintf("x-%d", i)}}, []byte(`{}`), fmt.Errorf("handler gave up on %d", i))
}

// ClickHouseDSN returns the DSN of the test ClickHouse server
// (RUNTIMETRUTH_CLICKHOUSE_DSN, set by scripts/test-services.sh) with a
// fresh database for the test, dropped when it ends. Without the variable
// the test fails.
func ClickHouseDSN(tb testing.TB) string {
	tb.Helper()
	dsn, drop := ClickHouseDatabase(tb)
	tb.Cleanup(drop)
	return dsn
}

// ClickHouseDatabase is ClickHouseDSN with the dropping left to the
// caller: a benchmark drops each iteration's database at once, so that
// no background merge of its parts runs into the next measurement.
func ClickHouseDatabase(tb testing.TB) (dsn string, drop func()) {
	tb.Helper()
	base := os.Getenv("RUNTIMETRUTH_CLICKHOUSE_DSN")
	if base == "" {
		tb.Fatal("RUNTIMETRUTH_CLICKHOUSE_DSN is not set: run the tests through scripts/test-services.sh (make test), which starts ClickHouse")
	}
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("RUNTIMETRUTH_CLICKHOUSE_DSN: %v", err)
	}
	db := fmt.Sprintf("rt_test_%d_%d", time.Now().UnixNano()%1e12, rand.IntN(1e6))
	opts, err := clickhouse.ParseDSN(base)
	if err != nil {
		tb.Fatalf("RUNTIMETRUTH_CLICKHOUSE_DSN: %v", err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		tb.Fatalf("clickhouse: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		_ = conn.Close()
		tb.Fatalf("clickhouse at %s: create database: %v", u.Host, err)
	}
	drop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
		_ = conn.Close()
	}
	u.Path = "/" + db
	return u.String(), drop
}

// Exec runs statements on the ClickHouse database of dsn (for tampering).
func Exec(tb testing.TB, dsn string, stmts ...string) {
	tb.Helper()
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, s := range stmts {
		if err := conn.Exec(ctx, s); err != nil {
			tb.Fatalf("clickhouse %q: %v", s, err)
		}
	}
	// Mutations (ALTER … UPDATE/DELETE) run in the background: wait.
	for {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.mutations WHERE database = ? AND is_done = 0", opts.Auth.Database).Scan(&n); err != nil {
			tb.Fatalf("clickhouse mutations: %v", err)
		}
		if n == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Chains seals stream messages into their chains as the auditor would:
// each message after its chain's head so far, recorded by one source.
type Chains struct {
	h      chain.Hasher
	source string
	heads  map[string]link.Head
}

// NewChains returns empty chains sealed by h, their links recorded by
// source.
func NewChains(h chain.Hasher, source string) *Chains {
	return &Chains{h: h, source: source, heads: map[string]link.Head{}}
}

// Seal seals msg as the next link of its chain; an error fails tb.
func (c *Chains) Seal(tb testing.TB, msg *link.Message) link.Record {
	tb.Helper()
	name := link.ChainName(msg.Stream, msg.Subject)
	r, err := link.Seal(c.h, name, c.heads[name], link.Entry(msg, c.source))
	if err != nil {
		tb.Fatalf("seal %s seq %d: %v", name, msg.Seq, err)
	}
	c.heads[name] = r.Head()
	return r
}

// Records seals n fixture events (the Payload mix, a malformed one every
// 50) into their chains, as the auditor would record stream messages.
func Records(tb testing.TB, h chain.Hasher, n int, hosts []string) []link.Record {
	tb.Helper()
	chains := NewChains(h, events.Source("auditor", "fixture"))
	seqs := map[string]uint64{}
	out := make([]link.Record, 0, n)
	for i := range n {
		m := Msg(tb, Payload(tb, hosts, i), i)
		if i%50 == 49 {
			m = Malformed(hosts[i%len(hosts)], i)
		}
		stream := StreamOf(m.Subject)
		seqs[stream]++
		out = append(out, chains.Seal(tb, Message(tb, stream, seqs[stream], m)))
	}
	return out
}

// Tree is the event of r as a tree, to seal it again (link.Seal).
func Tree(tb testing.TB, r link.Record) jsontree.Value {
	tb.Helper()
	ev, err := jsontree.Parse(r.Event)
	if err != nil {
		tb.Fatalf("event of chain %q seq %d: %v", r.Chain, r.Seq, err)
	}
	return ev
}

// Rsyslog is the test rsyslog receiver (scripts/start-rsyslog.sh).
type Rsyslog struct {
	TCP, TLS, TLSCA, UDP, Unix, File string
	// SIEMTCP, SIEMTLS and SIEMUDP take SIEM records, parsed as a SIEM
	// would (structured data, then the JSON or CEF body) into SIEMFile
	// (SIEMLines).
	SIEMTCP, SIEMTLS, SIEMUDP, SIEMFile string
}

// RsyslogEnv returns the receiver's addresses from the
// RUNTIMETRUTH_RSYSLOG_* variables; without them the test fails.
func RsyslogEnv(tb testing.TB) Rsyslog {
	tb.Helper()
	r := Rsyslog{
		TCP: os.Getenv("RUNTIMETRUTH_RSYSLOG_TCP"), TLS: os.Getenv("RUNTIMETRUTH_RSYSLOG_TLS"),
		TLSCA: os.Getenv("RUNTIMETRUTH_RSYSLOG_TLS_CA"), UDP: os.Getenv("RUNTIMETRUTH_RSYSLOG_UDP"),
		Unix: os.Getenv("RUNTIMETRUTH_RSYSLOG_UNIX"), File: os.Getenv("RUNTIMETRUTH_RSYSLOG_FILE"),
		SIEMTCP: os.Getenv("RUNTIMETRUTH_RSYSLOG_SIEM_TCP"), SIEMTLS: os.Getenv("RUNTIMETRUTH_RSYSLOG_SIEM_TLS"),
		SIEMUDP: os.Getenv("RUNTIMETRUTH_RSYSLOG_SIEM_UDP"), SIEMFile: os.Getenv("RUNTIMETRUTH_RSYSLOG_SIEM_FILE"),
	}
	if r.TCP == "" || r.TLS == "" || r.UDP == "" || r.Unix == "" || r.File == "" || r.TLSCA == "" ||
		r.SIEMTCP == "" || r.SIEMTLS == "" || r.SIEMUDP == "" || r.SIEMFile == "" {
		tb.Fatal("RUNTIMETRUTH_RSYSLOG_* are not set: run the tests through scripts/test-services.sh (make test), which starts rsyslog")
	}
	return r
}

// UniqueHost is a HOSTNAME that tells one test's messages apart in the
// shared receiver's file.
func UniqueHost(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, rand.IntN(1e6))
}

// SyslogLines returns the receiver's lines whose HOSTNAME is host.
func SyslogLines(tb testing.TB, file, host string) []string {
	tb.Helper()
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // rsyslog creates the file with its first message
	}
	if err != nil {
		tb.Fatalf("rsyslog output: %v", err)
	}
	var out []string
	for _, ln := range strings.Split(string(data), "\n") {
		f := strings.SplitN(ln, " ", 4)
		if len(f) == 4 && f[2] == host {
			out = append(out, ln)
		}
	}
	return out
}

// SIEMLine is a message the SIEM inputs parsed: its HOSTNAME and the
// variables rsyslog made of it ("rfc5424-sd": the structured data, "rec":
// a JSON body, "cef": a CEF body).
type SIEMLine struct {
	Hostname string         `json:"hostname"`
	Vars     map[string]any `json:"vars"`
}

// SIEMLines returns the parsed messages of host in the SIEM inputs' file.
func SIEMLines(tb testing.TB, file, host string) []SIEMLine {
	tb.Helper()
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatalf("rsyslog output: %v", err)
	}
	var out []SIEMLine
	for _, ln := range strings.Split(string(data), "\n") {
		if !strings.Contains(ln, `"hostname":"`+host+`"`) {
			continue
		}
		var l SIEMLine
		if err := json.Unmarshal([]byte(ln), &l); err != nil {
			tb.Fatalf("rsyslog SIEM line %q: %v", ln, err)
		}
		if l.Hostname == host {
			out = append(out, l)
		}
	}
	return out
}
