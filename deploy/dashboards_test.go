package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/grafana"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/auditor"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
)

// pluginType is the data source plugin the dashboards are written for.
const pluginType = "grafana-clickhouse-datasource"

// TestDashboardQueries loads the events of an end-to-end run into the real
// ClickHouse through the auditor, then runs the query of every panel of
// every dashboard in grafana/ (Grafana's macros and the dashboard's
// variables replaced as Grafana and the plugin would) and checks each
// returns rows.
func TestDashboardQueries(t *testing.T) {
	dashboards := loadDashboards(t)
	dsn := auditortest.ClickHouseDSN(t)
	db := databaseOf(t, dsn)
	loaded := loadPipelineEvents(t, dsn)

	conn := openClickHouse(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var links uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+db+".audit_links").Scan(&links); err != nil {
		t.Fatal(err)
	}
	if links != uint64(loaded) {
		t.Fatalf("ClickHouse holds %d links, the run made %d", links, loaded)
	}

	now := time.Now().UTC()
	from, to := now.Add(-6*time.Hour), now.Add(10*time.Minute)
	for file, d := range dashboards {
		vars := map[string]string{"database": db, "table": "audit_links"}
		for _, v := range d.Templating.List {
			switch v.Type {
			case "textbox":
				if _, ok := vars[v.Name]; !ok {
					vars[v.Name] = v.Query // the default
				}
			case "datasource":
				if v.Query != pluginType {
					t.Errorf("%s: variable %s selects %q data sources, want %s", file, v.Name, v.Query, pluginType)
				}
			default:
				t.Errorf("%s: variable %s of type %s is not handled by this test", file, v.Name, v.Type)
			}
		}
		for _, p := range d.Flat() {
			name := fmt.Sprintf("%s/%d %s", strings.TrimSuffix(file, ".json"), p.ID, p.Title)
			t.Run(name, func(t *testing.T) {
				if p.Datasource.Type != pluginType {
					t.Errorf("panel data source %q, want %s", p.Datasource.Type, pluginType)
				}
				if len(p.Targets) == 0 {
					t.Fatal("panel has no query")
				}
				for _, q := range p.Targets {
					if q.Datasource.Type != pluginType || q.EditorType != "sql" || q.Format == nil {
						t.Errorf("query %s is not a %s SQL query with a format: %+v", q.RefID, pluginType, q)
					}
					sql, err := grafana.Expand(q.RawSQL, vars, from, to, time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					checkRows(t, conn, sql, p.Type)
				}
			})
		}
	}
}

func loadDashboards(t *testing.T) map[string]grafana.Dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("grafana", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in grafana/: %v", err)
	}
	out := map[string]grafana.Dashboard{}
	uids := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, err := grafana.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if other, dup := uids[d.UID]; dup {
			t.Fatalf("%s and %s share uid %s", f, other, d.UID)
		}
		uids[d.UID] = f
		out[filepath.Base(f)] = d
	}
	return out
}

// checkRows runs a panel's query and checks it returns rows; a one-row
// answer (a stat) must hold a non-zero number, so that an aggregate over
// nothing does not pass.
func checkRows(t *testing.T, conn driver.Conn, sql, panelType string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("query fails: %v\n%s", err, sql)
	}
	defer func() { _ = rows.Close() }()
	types := rows.ColumnTypes()
	n, nonZero := 0, false
	for rows.Next() {
		vals := make([]any, len(types))
		for i, ct := range types {
			vals[i] = newScanValue(ct.ScanType())
		}
		if err := rows.Scan(vals...); err != nil {
			t.Fatalf("scan: %v\n%s", err, sql)
		}
		for _, v := range vals {
			s := fmt.Sprint(deref(v))
			if s != "0" && s != "" {
				nonZero = true
			}
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("rows: %v\n%s", err, sql)
	}
	if n == 0 {
		t.Fatalf("%s panel query returns no rows:\n%s", panelType, sql)
	}
	if n == 1 && !nonZero {
		t.Fatalf("%s panel query returns one all-zero row:\n%s", panelType, sql)
	}
	t.Logf("%d rows", n)
}

// Pipeline fixtures: the events one run of the pipeline produces, of every
// catalog type, over three hosts and two targets.

var (
	fixtureHosts   = []string{"web-01.example.com", "web-02.example.com", "db-03.example.com"}
	fixtureTargets = []events.Target{
		{Kind: "systemd.unit", Identifier: "agent.service"},
		{Kind: "git.repository", Identifier: "/srv/app"},
	}
)

// fixtureMessages returns the messages of the run, built with the
// pkg/events codec, timed from start on.
func fixtureMessages(t *testing.T, start time.Time) []*nats.Msg {
	t.Helper()
	var payloads []events.Payload
	for hi, host := range fixtureHosts {
		for ti, tg := range fixtureTargets {
			id := fmt.Sprintf("01940000-0000-7000-8000-%06d%06d", hi, ti)
			// The first target ends drifting, the second passing.
			statuses := []events.Status{events.StatusPass, events.StatusError, events.StatusDrift, events.StatusDrift}
			if ti%2 == 1 {
				slices.Reverse(statuses)
			}
			payloads = append(payloads, auditortest.EvidenceOf(t, host, tg, time.Now().UTC().Truncate(time.Second), hi))
			for _, st := range statuses {
				payloads = append(payloads, verdictFixture(host, tg, id, st))
			}
		}
		payloads = append(payloads,
			events.RunnableModified{Host: host, Ecosystem: events.Python, Environment: "/opt/tools/venv",
				Package: "mytools", Version: "1.4." + fmt.Sprint(hi), Source: "index", Baseline: "RECORD",
				ChangedFiles: []events.FileChange{{Path: "mytools/cli.py", Change: events.FileModified, Observed: auditortest.Digest("cli" + host)}},
				ChangeDigest: strings.TrimPrefix(auditortest.Digest("change"+host), "sha256:")},
			events.CollectionFailed{Host: host, Collector: "codex", Reason: "timeout",
				Message: "codex app-server did not answer within 10s", Retryable: true})
	}
	for i, tg := range fixtureTargets {
		payloads = append(payloads, events.BaselineChanged{Target: tg, Change: events.BaselineUpdated,
			Digest: auditortest.Digest(fmt.Sprint("new", i)), PreviousDigest: auditortest.Digest(fmt.Sprint("old", i)), Actor: "alice@example.com"})
	}
	payloads = append(payloads, attestationFixture(t),
		binding.Rejected(topology.StreamEvidence, topology.ConsumerVerifier, events.EvidenceSubject("web-01", "git.repository"), 7, 10,
			nats.Header{"ce-id": []string{"x-7"}}, []byte(`{}`), fmt.Errorf("no baseline store")))

	var msgs []*nats.Msg
	for i, p := range payloads {
		m, _, err := binding.NewMsg(events.Source("deploy-test", "fixture"), p,
			binding.WithID(fmt.Sprintf("01950000-0000-7000-8000-%012d", i)), binding.WithTime(start.Add(time.Duration(i)*time.Second)))
		if err != nil {
			t.Fatalf("fixture %d (%T): %v", i, p, err)
		}
		if i%3 == 0 {
			// Every third verdict as a verifier wrote it before
			// verdict.*.v2: the panels count both versions.
			m = auditortest.V1(t, m)
		}
		msgs = append(msgs, m)
	}
	// A message whose data is not an event: the auditor records it as a
	// rejection link.
	bad := nats.NewMsg(events.EvidenceSubject("web-02.example.com", "systemd.unit"))
	bad.Header.Set("ce-specversion", "1.0")
	bad.Header.Set("ce-id", "bad-1")
	bad.Header.Set("ce-type", events.TypeEvidenceCollected)
	bad.Header.Set(nats.MsgIdHdr, "bad-1")
	bad.Data = []byte(`{"host": "web-02.example.com", "host": "twice"`)
	return append(msgs, bad)
}

func verdictFixture(host string, tg events.Target, id string, status events.Status) events.Verdict {
	v := events.Verdict{Status: status, Host: host, Target: tg, EvidenceID: id, SnapshotDigest: auditortest.Digest(id + string(status))}
	rt := report.Target{Kind: tg.Kind, Identifier: tg.Identifier}
	switch status {
	case events.StatusPass:
		v.BaselineDigest = auditortest.Digest("base")
		v.Report = &report.Report{Changes: []report.Change{}, Protected: []string{}, ReportSchemaVersion: report.SchemaVersion,
			Status: report.Pass, Target: rt}
	case events.StatusDrift:
		v.BaselineDigest = auditortest.Digest("base")
		v.Report = &report.Report{
			Changes: []report.Change{{Status: diff.Changed, Kind: "systemd.unit", Fields: []report.Field{
				{After: report.Present(snapshot.Int(4242)), Before: report.Present(snapshot.Int(3036)), Field: "main_pid"}}}},
			Protected: []string{}, ReportSchemaVersion: report.SchemaVersion, Status: report.Drift, Target: rt,
		}
	default:
		v.Error = "no baseline for " + tg.String()
	}
	return v
}

// attestationFixture is the catalog's golden attestation.created payload.
func attestationFixture(t *testing.T) events.AttestationCreated {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "pkg", "events", "testdata", "attestation.created.v1.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var a events.AttestationCreated
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("attestation golden: %v", err)
	}
	return a
}

// loadPipelineEvents publishes the fixtures to an in-process JetStream
// server with the pipeline's topology, runs the auditor with the
// ClickHouse sink (required) until every message is a link, stops it, and
// returns how many links it wrote.
func loadPipelineEvents(t *testing.T, dsn string) int {
	t.Helper()
	_, natsURL := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, natsURL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := topology.Ensure(ctx, js, 1); err != nil {
		t.Fatal(err)
	}
	msgs := fixtureMessages(t, time.Now().UTC().Add(-20*time.Minute))
	for _, m := range msgs {
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatalf("publish %s: %v", m.Subject, err)
		}
	}
	want := 0
	for _, s := range auditor.DefaultStreams {
		st, err := js.Stream(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		want += int(st.CachedInfo().State.Msgs)
	}
	if want != len(msgs) {
		t.Fatalf("the streams hold %d messages, %d were published", want, len(msgs))
	}

	cfg := auditor.NewDefaultConfig()
	cfg.NATS.URL = natsURL
	cfg.Instance = "deploy-test"
	cfg.IdleWait = 100 * time.Millisecond
	cfg.JSONL.Path = filepath.Join(t.TempDir(), "audit.jsonl")
	cfg.ClickHouse.DSN = dsn
	cfg.ClickHouse.Required = true
	cfg.Checkpoint.Interval = 0
	a, err := auditor.New(cfg, auditor.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, time.Minute, 20*time.Millisecond, func() error {
		n := 0
		for _, h := range a.Heads() {
			n += int(h.Seq)
		}
		if n != want {
			return fmt.Errorf("%d links, want %d", n, want)
		}
		return nil
	})
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitConsumersDone(t, js)
	return want
}

// waitConsumersDone waits until the auditor's consumers have every message
// acknowledged: the links are then in ClickHouse (a required sink).
func waitConsumersDone(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		for _, s := range auditor.DefaultStreams {
			c, err := js.Consumer(context.Background(), s, topology.ConsumerAuditor)
			if err != nil {
				return err
			}
			info, err := c.Info(context.Background())
			if err != nil {
				return err
			}
			if info.NumPending != 0 || info.NumAckPending != 0 {
				return fmt.Errorf("%s: %d pending, %d unacknowledged", s, info.NumPending, info.NumAckPending)
			}
		}
		return nil
	})
}

// databaseOf is the database a DSN names (its path).
func databaseOf(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}

func openClickHouse(t *testing.T, dsn string) driver.Conn {
	t.Helper()
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatalf("clickhouse: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func newScanValue(t reflect.Type) any { return reflect.New(t).Interface() }

func deref(v any) any { return reflect.ValueOf(v).Elem().Interface() }
