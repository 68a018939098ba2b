package report_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/internal/evidencetest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

func schema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(report.Schema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("report.schema.json", doc))
	s, err := c.Compile("report.schema.json")
	require.NoError(t, err)
	return s
}

// Validate checks a report document against the published schema.
func validate(t testing.TB, s *jsonschema.Schema, b []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return s.Validate(v)
}

// branchMissingThenNull parses fixtures a and b, with git's branch taken
// out of a and null in b: a field missing on one side, null on the other.
func branchMissingThenNull(t *testing.T, a, b string) (before, after *snapshot.Snapshot) {
	t.Helper()
	before, after = evidencetest.Snapshot(t, a), evidencetest.Snapshot(t, b)
	delete(before.Evidence[2].Data, "branch")
	after.Evidence[2].Data["branch"] = snapshot.Null()
	return before, after
}

func TestReportsValidateAgainstSchema(t *testing.T) {
	sch := schema(t)
	before, after := branchMissingThenNull(t, "before.json", "after.json")
	delete(after.Evidence[0].Data, "user")
	res, err := diff.Compare(before, after)
	require.NoError(t, err)

	cases := map[string]struct {
		sels   []string
		golden string
	}{
		"drift strict":    {nil, "reports/drift.golden.json"},
		"drift protected": {[]string{"git.repository.branch", "systemd.unit.user"}, "reports/drift-protected.golden.json"},
		"pass protected":  {[]string{"git.repository.repository_root"}, "reports/pass.golden.json"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sels, err := diff.ParseSelectors(tc.sels)
			require.NoError(t, err)
			b, err := report.New(res.Protect(sels), sels).Marshal()
			require.NoError(t, err)
			require.NoError(t, validate(t, sch, b))
			evidencetest.Golden(t, tc.golden, b)
		})
	}
}

func TestMissingIsDistinctFromNull(t *testing.T) {
	before, after := branchMissingThenNull(t, "before.json", "before.json")
	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	b, err := report.New(res, nil).Marshal()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"fields":[{"after":{"present":true,"value":null},"before":{"present":false},"field":"branch"}]`)
	var back report.Report
	require.NoError(t, json.Unmarshal(b, &back))
	f := back.Changes[0].Fields[0]
	assert.Equal(t, report.Missing, f.Before)
	assert.Equal(t, report.Present(snapshot.Null()), f.After)
	assert.Equal(t, report.New(res, nil), &back)
}

func TestAddedAndRemovedKindsHaveNoFields(t *testing.T) {
	full, short := evidencetest.Snapshot(t, "before.json"), evidencetest.Snapshot(t, "before.json")
	short.Evidence = short.Evidence[:1]
	for name, tc := range map[string]struct {
		before, after *snapshot.Snapshot
		want          string
	}{
		"added":   {short, full, `"changes":[{"fields":[],"kind":"linux.process","status":"added"},{"fields":[],"kind":"git.repository","status":"added"}]`},
		"removed": {full, short, `"changes":[{"fields":[],"kind":"linux.process","status":"removed"},{"fields":[],"kind":"git.repository","status":"removed"}]`},
	} {
		res, err := diff.Compare(tc.before, tc.after)
		require.NoError(t, err)
		r := report.New(res, nil)
		require.NoError(t, r.Validate(), name)
		b, err := r.Marshal()
		require.NoError(t, err)
		require.NoError(t, validate(t, schema(t), b), name)
		assert.Contains(t, string(b), tc.want, name)
	}
}

// The report runtimetruth wrote before its reports matched RuntimeTruth's
// (verdict.*.v1 events carry it) reads as the current shape.
func TestReadsEarlierShape(t *testing.T) {
	legacy := `{"changes":[` +
		`{"change":"modified","fields":[{"after":4190,"before":3036,"change":"modified","field":"main_pid"},{"before":"agent","change":"removed","field":"user"},{"after":null,"change":"added","field":"x"}],"kind":"systemd.unit"},` +
		`{"change":"added","fields":[{"after":1,"change":"added","field":"pid"}],"kind":"linux.process"},` +
		`{"change":"removed","fields":[],"kind":"git.repository"}],` +
		`"protected":[],"report_schema_version":1,"status":"drift","target":{"identifier":"agent.service","kind":"systemd.unit"}}`
	var r report.Report
	require.NoError(t, json.Unmarshal([]byte(legacy), &r))
	require.NoError(t, r.Validate())
	b, err := r.Marshal()
	require.NoError(t, err)
	assert.Equal(t, `{"changes":[`+
		`{"fields":[{"after":{"present":true,"value":4190},"before":{"present":true,"value":3036},"field":"main_pid"},{"after":{"present":false},"before":{"present":true,"value":"agent"},"field":"user"},{"after":{"present":true,"value":null},"before":{"present":false},"field":"x"}],"kind":"systemd.unit","status":"changed"},`+
		`{"fields":[],"kind":"linux.process","status":"added"},`+
		`{"fields":[],"kind":"git.repository","status":"removed"}],`+
		`"protected":[],"report_schema_version":1,"status":"drift","target":{"identifier":"agent.service","kind":"systemd.unit"}}`, string(b))
}

func TestUnmarshalRefusesMalformedSides(t *testing.T) {
	for name, side := range map[string]string{
		"present without value": `{"present":true}`,
		"missing with value":    `{"present":false,"value":1}`,
		"bare value":            `3036`,
		"extra key":             `{"present":true,"value":1,"x":1}`,
		"non-scalar value":      `{"present":true,"value":[1]}`,
		"present not boolean":   `{"present":1,"value":1}`,
	} {
		doc := `{"changes":[{"fields":[{"after":{"present":true,"value":1},"before":` + side + `,"field":"f"}],"kind":"k","status":"changed"}],"protected":[],"report_schema_version":1,"status":"drift","target":{"identifier":"i","kind":"k"}}`
		var r report.Report
		assert.Error(t, json.Unmarshal([]byte(doc), &r), name)
		assert.Error(t, validate(t, schema(t), []byte(doc)), name)
	}
}

func TestSchemaRejectsMalformedReports(t *testing.T) {
	sch := schema(t)
	const head = `{"report_schema_version":1,"status":"drift","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[`
	one := `{"present":true,"value":1}`
	for name, doc := range map[string]string{
		"wrong version":         `{"report_schema_version":2,"status":"pass","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[]}`,
		"pass with changes":     `{"report_schema_version":1,"status":"pass","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[{"kind":"k","status":"added","fields":[]}]}`,
		"drift, no changes":     `{"report_schema_version":1,"status":"drift","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[]}`,
		"added kind with field": head + `{"kind":"k","status":"added","fields":[{"field":"f","before":{"present":false},"after":` + one + `}]}]}`,
		"changed, no fields":    head + `{"kind":"k","status":"changed","fields":[]}]}`,
		"missing both sides":    head + `{"kind":"k","status":"changed","fields":[{"field":"f","before":{"present":false},"after":{"present":false}}]}]}`,
		"side left out":         head + `{"kind":"k","status":"changed","fields":[{"field":"f","after":` + one + `}]}]}`,
		"earlier shape":         head + `{"kind":"k","change":"modified","fields":[{"field":"f","change":"modified","before":1,"after":2}]}]}`,
		"status modified":       head + `{"kind":"k","status":"modified","fields":[{"field":"f","before":` + one + `,"after":{"present":false}}]}]}`,
		"non-scalar value":      head + `{"kind":"k","status":"changed","fields":[{"field":"f","before":{"present":true,"value":[1]},"after":` + one + `}]}]}`,
		"extra key":             `{"report_schema_version":1,"status":"pass","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[],"x":1}`,
		"missing protected":     `{"report_schema_version":1,"status":"pass","target":{"kind":"k","identifier":"i"},"changes":[]}`,
		"status error":          `{"report_schema_version":1,"status":"error","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[]}`,
	} {
		assert.Error(t, validate(t, sch, []byte(doc)), name)
	}
}

func TestTreeMatchesEncodingJSON(t *testing.T) {
	before, after := branchMissingThenNull(t, "before.json", "after.json")
	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	r := report.New(res, []diff.Selector{{Kind: "git.repository"}})
	fast, err := r.Marshal()
	require.NoError(t, err)
	viaStruct, err := json.Marshal(r)
	require.NoError(t, err)
	var a, b any
	require.NoError(t, json.Unmarshal(fast, &a))
	require.NoError(t, json.Unmarshal(viaStruct, &b))
	assert.Equal(t, b, a)
}
