package console

import (
	"context"
	"fmt"
	"html"
	"html/template"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/runtimetruth/runtimetruth/pkg/platform/grafana"
)

// Trends are the panels of the Grafana dashboards (deploy/grafana) that
// the console renders itself, server-side, over the auditor's ClickHouse:
// each panel's own query from the dashboard's JSON, expanded as Grafana
// would (package grafana), so that the page and Grafana cannot disagree.
type Trends struct {
	// Conn is the ClickHouse connection; Database and Table the
	// dashboards' ${database} and ${table}.
	Conn            driver.Conn
	Database, Table string
	// Dashboards are the dashboards to render, in order.
	Dashboards []grafana.Dashboard
}

// Bounds of a trends page: the rows a table shows, the series a chart
// draws, and how long one panel's query may take.
const (
	trendRows    = 10
	trendSeries  = 8
	trendTimeout = 10 * time.Second
)

// trendRanges are the time ranges the page offers.
var trendRanges = []struct {
	Name string
	D    time.Duration
}{{"1h", time.Hour}, {"6h", 6 * time.Hour}, {"24h", 24 * time.Hour}, {"7d", 7 * 24 * time.Hour}}

// TrendsPage is the trends page.
type TrendsPage struct {
	Range      string
	Ranges     []string
	From, To   time.Time
	Dashboards []TrendDashboard
}

// TrendDashboard is one dashboard's panels.
type TrendDashboard struct {
	Title  string
	Panels []TrendPanel
}

// TrendPanel is one panel: its query's result as a number (stat), a chart
// (timeseries: an SVG made here) or a table; Err why it has none.
type TrendPanel struct {
	Title, Type string
	Err         string
	Stat        string
	Chart       template.HTML
	Columns     []string
	Rows        [][]string
	More        int
}

// trends serves GET /trends?range=24h.
func (s *Server) trends(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Trends == nil {
		http.Error(w, "this console reads no ClickHouse: trends need the auditor's ClickHouse (runtimetruth console --clickhouse)", http.StatusNotFound)
		return
	}
	page := TrendsPage{Range: "24h"}
	span := 24 * time.Hour
	for _, rg := range trendRanges {
		page.Ranges = append(page.Ranges, rg.Name)
		if rg.Name == r.URL.Query().Get("range") {
			page.Range, span = rg.Name, rg.D
		}
	}
	page.To = s.cfg.Now().UTC()
	page.From = page.To.Add(-span)
	t := s.cfg.Trends
	for _, d := range t.Dashboards {
		vars := d.Variables()
		vars["database"], vars["table"] = t.Database, t.Table
		td := TrendDashboard{Title: d.Title}
		for _, p := range d.Flat() {
			if len(p.Targets) == 0 {
				continue
			}
			td.Panels = append(td.Panels, runPanel(r.Context(), t.Conn, p, vars, page.From, page.To, span/60))
		}
		page.Dashboards = append(page.Dashboards, td)
	}
	s.render(w, "trends.html", page)
}

// runPanel runs p's first query and shapes its result for its type.
func runPanel(ctx context.Context, conn driver.Conn, p grafana.Panel, vars map[string]string, from, to time.Time, interval time.Duration) TrendPanel {
	out := TrendPanel{Title: p.Title, Type: p.Type}
	sql, err := grafana.Expand(p.Targets[0].RawSQL, vars, from, to, interval)
	if err != nil {
		out.Err = err.Error()
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, trendTimeout)
	defer cancel()
	cols, rows, err := query(ctx, conn, sql)
	if err != nil {
		out.Err = err.Error()
		return out
	}
	switch {
	case p.Type == "stat" && len(rows) > 0 && len(rows[0]) > 0:
		out.Stat = text(rows[0][0])
	case p.Type == "timeseries" && len(cols) >= 2:
		out.Chart = chart(cols, rows)
	default:
		out.Columns = cols
		for i, row := range rows {
			if i == trendRows {
				out.More = len(rows) - trendRows
				break
			}
			cells := make([]string, len(row))
			for j, v := range row {
				cells[j] = text(v)
			}
			out.Rows = append(out.Rows, cells)
		}
	}
	return out
}

// query runs sql and returns its column names and rows (the values as
// the driver scans them).
func query(ctx context.Context, conn driver.Conn, sql string) ([]string, [][]any, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, nil, fmt.Errorf("query: %w", err)
	}
	defer func() { _ = rows.Close() }()
	types := rows.ColumnTypes()
	cols := make([]string, len(types))
	for i, ct := range types {
		cols[i] = ct.Name()
	}
	var out [][]any
	for rows.Next() {
		ptrs := make([]any, len(types))
		for i, ct := range types {
			ptrs[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, nil, fmt.Errorf("scan: %w", err)
		}
		row := make([]any, len(ptrs))
		for i, p := range ptrs {
			row[i] = reflect.ValueOf(p).Elem().Interface()
		}
		out = append(out, row)
	}
	return cols, out, rows.Err()
}

// text is a value as a cell shows it.
func text(v any) string {
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case float64:
		return strconv.FormatFloat(x, 'g', 6, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'g', 6, 32)
	}
	return fmt.Sprint(v)
}

// number is a value as a chart plots it.
func number(v any) (float64, bool) {
	f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
	return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// chartColors are the series' colours (the badges' and a few more); the
// legend's swatches have the same in console.css (.s0 to .s7): the page's
// policy allows no inline style.
var chartColors = []string{"#0969da", "#bc4c00", "#1a7f37", "#cf222e", "#8250df", "#6e7781", "#bf8700", "#1b7c83"}

// chart draws a time series result as an SVG: the first column is the
// time; with three columns the second names the series and the third is
// the value, else the second is the value. At most trendSeries series.
func chart(cols []string, rows [][]any) template.HTML {
	type point struct {
		t time.Time
		v float64
	}
	series := map[string][]point{}
	var order []string
	for _, row := range rows {
		ts, ok := row[0].(time.Time)
		if !ok {
			continue
		}
		name, val := cols[1], row[1]
		if len(row) >= 3 {
			name, val = fmt.Sprint(row[1]), row[2]
		}
		v, ok := number(val)
		if !ok {
			continue
		}
		if _, seen := series[name]; !seen {
			if len(order) == trendSeries {
				continue
			}
			order = append(order, name)
		}
		series[name] = append(series[name], point{ts, v})
	}
	if len(order) == 0 {
		return template.HTML(`<p class="empty">No data in this range.</p>`) //nolint:gosec // constant text
	}
	var tmin, tmax time.Time
	vmax := 0.0
	for _, ps := range series {
		for _, p := range ps {
			if tmin.IsZero() || p.t.Before(tmin) {
				tmin = p.t
			}
			if p.t.After(tmax) {
				tmax = p.t
			}
			vmax = max(vmax, p.v)
		}
	}
	const w, h, pad = 640.0, 160.0, 24.0
	span := tmax.Sub(tmin).Seconds()
	x := func(t time.Time) float64 {
		if span == 0 {
			return w / 2
		}
		return pad + (w-2*pad)*t.Sub(tmin).Seconds()/span
	}
	y := func(v float64) float64 {
		if vmax == 0 {
			return h - pad
		}
		return h - pad - (h-2*pad)*v/vmax
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %g %g" role="img" aria-label="%s"><title>%s</title>`, w, h,
		html.EscapeString(strings.Join(order, ", ")), html.EscapeString(strings.Join(order, ", ")))
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" class="axis"/>`, pad, h-pad, w-pad, h-pad)
	fmt.Fprintf(&b, `<text x="%g" y="%g" class="tick">%s</text><text x="%g" y="%g" class="tick">%s</text><text x="%g" y="%g" class="tick">max %s</text>`,
		pad, h-6, tmin.UTC().Format("01-02 15:04"), w-pad-70, h-6, tmax.UTC().Format("01-02 15:04"), pad, 12.0, html.EscapeString(strconv.FormatFloat(vmax, 'g', 6, 64)))
	for i, name := range order {
		var pts []string
		for _, p := range series[name] {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.t), y(p.v)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"><title>%s</title></polyline>`,
			strings.Join(pts, " "), chartColors[i%len(chartColors)], html.EscapeString(name))
	}
	b.WriteString(`</svg><ul class="legend">`)
	for i, name := range order {
		fmt.Fprintf(&b, `<li><span class="swatch s%d"></span>%s</li>`, i%len(chartColors), html.EscapeString(name))
	}
	b.WriteString(`</ul>`)
	return template.HTML(b.String()) //nolint:gosec // every text in it is escaped above
}
