package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/console"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/grafana"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/chstore"
)

// loadDashboards reads deploy/grafana's dashboards.
func loadDashboards(t testing.TB) []grafana.Dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "..", "deploy", "grafana", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []grafana.Dashboard
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		d, err := grafana.Parse(raw)
		require.NoError(t, err, f)
		out = append(out, d)
	}
	return out
}

// The trends page renders every panel of the Grafana dashboards from the
// panel's own query, over the real ClickHouse holding the links the
// auditor would write: the audit chain's stats count exactly the links
// and chains written, its time series are drawn as SVG, its tables list
// rows, and no panel fails.
func TestTrendsPage(t *testing.T) {
	ctx := t.Context()
	dsn, drop := auditortest.ClickHouseDatabase(t)
	t.Cleanup(drop)
	st, err := chstore.Open(ctx, chstore.Options{DSN: dsn})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, err = st.Migrate(ctx)
	require.NoError(t, err)
	hosts := []string{"web-01", "web-02", "db-03"}
	recs := auditortest.Records(t, chain.NewHasher(nil), 300, hosts)
	require.NoError(t, st.Write(ctx, recs))
	require.NoError(t, st.Settle(ctx))
	chains := map[string]bool{}
	for _, r := range recs {
		chains[r.Chain] = true
	}

	b := startFleet(t)
	trends := &console.Trends{Conn: st.Conn(), Database: st.Database(), Table: chstore.DefaultTable, Dashboards: loadDashboards(t)}
	start := func() *url.URL {
		s, err := console.New(console.Config{Listen: "127.0.0.1:0", Approver: "tester", Trends: trends, Audit: &console.AuditLog{Store: st},
			Now: func() time.Time { return auditortest.Time.Add(time.Hour) },
		}, b.js, slog.New(slog.NewTextHandler(os.Stderr, nil)))
		require.NoError(t, err)
		require.NoError(t, s.Start(ctx))
		t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })
		base, err := url.Parse(s.URL())
		require.NoError(t, err)
		return base
	}

	// In Chromium: the page as a reader sees it, photographed, and
	// checked by axe-core.
	shown := start()
	me := newTab(browser(t), t)
	require.Equal(t, int64(http.StatusOK), me.open(t, shown.String()))
	require.Equal(t, int64(http.StatusOK), me.open(t, "http://"+shown.Host+"/trends?range=24h"))
	me.shotTop(t, "trends")
	me.accessible(t, "trends")

	base := start()
	session := login(t, base)
	resp := do(t, base, request{path: "/trends?range=24h", session: session})
	require.Equal(t, http.StatusOK, resp.code, resp.body)
	page := html.UnescapeString(resp.body)

	stat := func(title string) string {
		m := regexp.MustCompile(`<h3>` + regexp.QuoteMeta(title) + `</h3><p class="stat">([^<]*)</p>`).FindStringSubmatch(page)
		require.NotNil(t, m, "the %s stat", title)
		return m[1]
	}
	assert.Equal(t, fmt.Sprint(len(recs)), stat("Links"))
	assert.Equal(t, fmt.Sprint(len(chains)), stat("Chains"))
	assert.Contains(t, page, `<h3>Links per hour by event type</h3><svg class="chart"`)
	assert.Contains(t, page, "<polyline points=")
	assert.Contains(t, page, `<h3>Chain heads</h3>`)
	assert.NotContains(t, page, `<p class="warning">`, "no panel fails")
	assert.Contains(t, page, "<h2>RuntimeTruth / Fleet verification</h2>")

	// The audit page over the same table: its status as audit verify
	// --clickhouse computes it.
	var out, errs bytes.Buffer
	cli.Run(ctx, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errs}, "test", []string{"audit", "verify", "--clickhouse", dsn, "--json"})
	var rep struct {
		Status string `json:"status"`
		Links  int    `json:"links"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &rep), errs.String())
	require.Equal(t, "intact", rep.Status)
	audit := do(t, base, request{path: "/audit?host=web-01", session: session})
	require.Equal(t, http.StatusOK, audit.code, audit.body)
	assert.Contains(t, audit.body, fmt.Sprintf("INTACT</span> %d links in %d chains", rep.Links, len(chains)))
	assert.Contains(t, audit.body, "<td>web-01</td>")
	assert.NotContains(t, audit.body, "<td>web-02</td>")

	_, plain := startConsole(t, b)
	none := do(t, plain, request{path: "/trends", session: login(t, plain)})
	assert.Equal(t, http.StatusNotFound, none.code, "no ClickHouse, no trends")
}
