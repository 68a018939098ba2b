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

func load(t *testing.T, name string) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Parse(evidencetest.Read(t, "snapshots/"+name))
	require.NoError(t, err)
	return s
}

func TestReportsValidateAgainstSchema(t *testing.T) {
	sch := schema(t)
	before, after := load(t, "before.json"), load(t, "after.json")
	delete(before.Evidence[2].Data, "branch")
	after.Evidence[2].Data["branch"] = snapshot.Null()
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
	before, after := load(t, "before.json"), load(t, "before.json")
	delete(before.Evidence[2].Data, "branch")
	after.Evidence[2].Data["branch"] = snapshot.Null()
	res, err := diff.Compare(before, after)
	require.NoError(t, err)
	b, err := report.New(res, nil).Marshal()
	require.NoError(t, err)
	assert.Contains(t, string(b), `"fields":[{"after":null,"change":"added","field":"branch"}]`)
	var back report.Report
	require.NoError(t, json.Unmarshal(b, &back))
	f := back.Changes[0].Fields[0]
	assert.Nil(t, f.Before)
	require.NotNil(t, f.After)
	assert.Equal(t, snapshot.Null(), *f.After)
}

func TestSchemaRejectsMalformedReports(t *testing.T) {
	sch := schema(t)
	for name, doc := range map[string]string{
		"wrong version":     `{"report_schema_version":2,"status":"pass","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[]}`,
		"pass with changes": `{"report_schema_version":1,"status":"pass","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[{"kind":"k","change":"added","fields":[]}]}`,
		"drift, no changes": `{"report_schema_version":1,"status":"drift","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[]}`,
		"added with before": `{"report_schema_version":1,"status":"drift","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[{"kind":"k","change":"modified","fields":[{"field":"f","change":"added","before":1,"after":2}]}]}`,
		"non-scalar value":  `{"report_schema_version":1,"status":"drift","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[{"kind":"k","change":"modified","fields":[{"field":"f","change":"modified","before":[1],"after":2}]}]}`,
		"extra key":         `{"report_schema_version":1,"status":"pass","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[],"x":1}`,
		"missing protected": `{"report_schema_version":1,"status":"pass","target":{"kind":"k","identifier":"i"},"changes":[]}`,
		"status error":      `{"report_schema_version":1,"status":"error","target":{"kind":"k","identifier":"i"},"protected":[],"changes":[]}`,
	} {
		assert.Error(t, validate(t, sch, []byte(doc)), name)
	}
}

func TestTreeMatchesEncodingJSON(t *testing.T) {
	before, after := load(t, "before.json"), load(t, "after.json")
	delete(before.Evidence[2].Data, "branch")
	after.Evidence[2].Data["branch"] = snapshot.Null()
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
