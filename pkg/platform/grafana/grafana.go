// Package grafana reads the Grafana dashboards of deploy/grafana (their
// panels and each panel's ClickHouse query) and expands a query's macros
// and variables as Grafana and the grafana-clickhouse-datasource plugin
// do, so that the dashboards' queries can be run outside Grafana: by the
// deploy tests against the real ClickHouse, and by the console's trends
// page. The dashboards' JSON stays the one statement of the queries.
package grafana

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Dashboard is the part of a Grafana dashboard read here.
type Dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Variable is a dashboard variable; Query is its value for a constant or
// a text box, and its default otherwise.
type Variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

// Panel is a panel, or a row of panels.
type Panel struct {
	ID         int        `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource Datasource `json:"datasource"`
	Targets    []Target   `json:"targets"`
	// Panels are a collapsed row's.
	Panels []Panel `json:"panels"`
}

// Target is a panel's query.
type Target struct {
	RefID      string     `json:"refId"`
	Datasource Datasource `json:"datasource"`
	EditorType string     `json:"editorType"`
	QueryType  string     `json:"queryType"`
	Format     *int       `json:"format"`
	RawSQL     string     `json:"rawSql"`
}

// Datasource names a panel's or a query's data source.
type Datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// ErrDashboard is the error of a dashboard that cannot be read.
var ErrDashboard = errors.New("invalid dashboard")

// Parse reads a dashboard: it needs a uid, a title and panels.
func Parse(data []byte) (Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return Dashboard{}, fmt.Errorf("%w: %w", ErrDashboard, err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		return Dashboard{}, fmt.Errorf("%w: a dashboard needs a uid, a title and panels", ErrDashboard)
	}
	return d, nil
}

// Flat lists the panels in order, a row's panels in its place: rows are
// containers.
func (d Dashboard) Flat() []Panel { return flatten(d.Panels) }

func flatten(ps []Panel) []Panel {
	var out []Panel
	for _, p := range ps {
		if p.Type == "row" {
			out = append(out, flatten(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// Variables are the dashboard's variables with their default values.
func (d Dashboard) Variables() map[string]string {
	out := map[string]string{}
	for _, v := range d.Templating.List {
		out[v.Name] = v.Query
	}
	return out
}

var (
	macroCall = regexp.MustCompile(`\$__(timeFilter|timeFilter_ms|dateFilter)\(([^()]*)\)`)
	variable  = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(:[a-z]+)?\}`)
)

// ErrExpand is the error of a query that keeps a macro or a variable.
var ErrExpand = errors.New("cannot expand the query")

// Expand replaces the plugin's macros ($__timeFilter, $__timeFilter_ms,
// $__dateFilter, $__interval_s, $__fromTime, $__toTime) the way
// grafana-clickhouse-datasource does (its pkg/macros) for the range from
// to, and the dashboard's variables with vars; a variable vars does not
// name, or anything left that Grafana would replace, is an error.
func Expand(sql string, vars map[string]string, from, to time.Time, interval time.Duration) (string, error) {
	sql = macroCall.ReplaceAllStringFunc(sql, func(call string) string {
		m := macroCall.FindStringSubmatch(call)
		col := strings.TrimSpace(m[2])
		switch m[1] {
		case "timeFilter":
			return fmt.Sprintf("%s >= toDateTime(%d) AND %s <= toDateTime(%d)", col, from.Unix(), col, to.Unix())
		case "timeFilter_ms":
			return fmt.Sprintf("%s >= fromUnixTimestamp64Milli(%d) AND %s <= fromUnixTimestamp64Milli(%d)", col, from.UnixMilli(), col, to.UnixMilli())
		default: // dateFilter
			return fmt.Sprintf("%s >= toDate('%s') AND %s <= toDate('%s')", col, from.Format(time.DateOnly), col, to.Format(time.DateOnly))
		}
	})
	sql = strings.NewReplacer(
		"$__interval_s", fmt.Sprint(max(int(interval.Seconds()), 1)),
		"$__fromTime", fmt.Sprintf("toDateTime(%d)", from.Unix()),
		"$__toTime", fmt.Sprintf("toDateTime(%d)", to.Unix()),
	).Replace(sql)
	var missing []string
	sql = variable.ReplaceAllStringFunc(sql, func(ref string) string {
		m := variable.FindStringSubmatch(ref)
		v, ok := vars[m[1]]
		if !ok {
			missing = append(missing, ref)
		}
		return v
	})
	switch {
	case len(missing) > 0:
		return "", fmt.Errorf("%w: unknown variable %s", ErrExpand, strings.Join(missing, ", "))
	case strings.Contains(sql, "$"):
		return "", fmt.Errorf("%w: a macro or variable is left: %s", ErrExpand, sql)
	}
	return sql, nil
}
