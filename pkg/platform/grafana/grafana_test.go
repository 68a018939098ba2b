package grafana_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/grafana"
)

func TestExpand(t *testing.T) {
	from, to := time.Unix(1700000000, 0).UTC(), time.Unix(1700003600, 0).UTC()
	vars := map[string]string{"database": "rt", "table": "audit_links"}
	for _, tc := range []struct {
		name, sql, want string
	}{
		{"time filter", "SELECT 1 FROM ${database}.${table} WHERE $__timeFilter(stored)",
			"SELECT 1 FROM rt.audit_links WHERE stored >= toDateTime(1700000000) AND stored <= toDateTime(1700003600)"},
		{"milliseconds", "WHERE $__timeFilter_ms( t )", "WHERE t >= fromUnixTimestamp64Milli(1700000000000) AND t <= fromUnixTimestamp64Milli(1700003600000)"},
		{"date", "WHERE $__dateFilter(d)", "WHERE d >= toDate('2023-11-14') AND d <= toDate('2023-11-14')"},
		{"interval and bounds", "intDiv(x, $__interval_s) BETWEEN $__fromTime AND $__toTime",
			"intDiv(x, 60) BETWEEN toDateTime(1700000000) AND toDateTime(1700003600)"},
		{"a variable with a format", "${table:raw}", "audit_links"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := grafana.Expand(tc.sql, vars, from, to, time.Minute)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	_, err := grafana.Expand("SELECT ${nope}", vars, from, to, time.Minute)
	assert.ErrorIs(t, err, grafana.ErrExpand)
	_, err = grafana.Expand("SELECT $__unknown", vars, from, to, time.Minute)
	assert.ErrorIs(t, err, grafana.ErrExpand)
}

func TestParse(t *testing.T) {
	d, err := grafana.Parse([]byte(`{"uid":"u","title":"T","templating":{"list":[{"name":"table","type":"constant","query":"audit_links"}]},
		"panels":[{"id":1,"type":"stat","title":"a","targets":[{"rawSql":"SELECT 1"}]},
		{"id":2,"type":"row","title":"r","panels":[{"id":3,"type":"table","title":"b","targets":[{"rawSql":"SELECT 2"}]}]},
		{"id":4,"type":"text","title":"c"}]}`))
	require.NoError(t, err)
	q := d.Flat()
	require.Len(t, q, 3)
	assert.Equal(t, []string{"a", "b", "c"}, []string{q[0].Title, q[1].Title, q[2].Title})
	assert.Equal(t, map[string]string{"table": "audit_links"}, d.Variables())
	for _, bad := range []string{`{}`, `{"uid":"u","title":"T","panels":[]}`, `[`} {
		_, err := grafana.Parse([]byte(bad))
		assert.ErrorIs(t, err, grafana.ErrDashboard, bad)
	}
}
