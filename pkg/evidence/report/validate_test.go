package report_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// reportFrom builds a report, valid or not, from fuzz bytes: each byte
// picks one of a few values for the next field, so every rule of the
// schema is hit both ways.
func reportFrom(b []byte) *report.Report {
	next := func(n int) int {
		if len(b) == 0 {
			return 0
		}
		v := int(b[0]) % n
		b = b[1:]
		return v
	}
	pick := func(opts ...string) string { return opts[next(len(opts))] }
	statuses := []diff.Status{diff.Added, diff.Removed, diff.Changed, diff.Changed, "modified", ""}
	sides := []report.Side{report.Missing, report.Present(snapshot.String("x")), report.Present(snapshot.Int(-3)),
		report.Present(snapshot.Bool(false)), report.Present(snapshot.Null())}
	r := &report.Report{
		ReportSchemaVersion: []int{1, 1, 1, 0, 2}[next(5)],
		Status:              report.Status(pick("pass", "drift", "drift", "", "PASS")),
		Target:              report.Target{Kind: pick("git.repository", "", "k"), Identifier: pick("/srv", "", "é")},
	}
	if next(8) != 0 {
		r.Protected = []string{}
		for range next(4) {
			r.Protected = append(r.Protected, pick("a:b", "c", "", "a:b"))
		}
	}
	if next(8) != 0 {
		r.Changes = []report.Change{}
		for range next(4) {
			c := report.Change{Kind: pick("k", "", "systemd.unit"), Status: statuses[next(len(statuses))]}
			if next(8) != 0 {
				c.Fields = []report.Field{}
				for range next(4) {
					c.Fields = append(c.Fields, report.Field{Field: pick("f", ""),
						Before: sides[next(len(sides))], After: sides[next(len(sides))]})
				}
			}
			r.Changes = append(r.Changes, c)
		}
	}
	return r
}

// FuzzValidateMatchesSchema: Validate accepts exactly the reports whose
// JSON (encoding/json's, as events carry them: a nil slice is null) the
// published schema accepts.
func FuzzValidateMatchesSchema(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 1, 1, 0, 1, 0})
	f.Add([]byte{0, 1, 0, 0, 1, 2, 1, 1, 0, 0, 1, 1, 0, 0, 1, 2})
	f.Add([]byte{0, 1, 0, 0, 1, 1, 1, 1, 1, 2, 1, 1, 0, 2, 1, 1})
	f.Add([]byte{3, 4, 1, 1, 0, 3, 2, 2, 2, 1, 1, 3, 4, 0, 3, 3, 4, 4, 4})
	sch := schema(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		r := reportFrom(b)
		doc, err := json.Marshal(r)
		require.NoError(t, err)
		want := validate(t, sch, doc)
		got := r.Validate()
		assert.Equal(t, want == nil, got == nil, "%s\nschema: %v\nValidate: %v", doc, want, got)
	})
}

// TestValidateMatchesSchema runs the generator over every short input, so
// the comparison holds without fuzzing too.
func TestValidateMatchesSchema(t *testing.T) {
	sch := schema(t)
	valid, invalid := 0, 0
	for i := range 1 << 14 {
		b := make([]byte, 20)
		x := uint64(i)*0x9E3779B97F4A7C15 + 1
		for j := range b {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			b[j] = byte(x)
		}
		r := reportFrom(b)
		doc, err := json.Marshal(r)
		require.NoError(t, err)
		want := validate(t, sch, doc)
		got := r.Validate()
		require.Equal(t, want == nil, got == nil, "%s\nschema: %v\nValidate: %v", doc, want, got)
		if got == nil {
			valid++
		} else {
			invalid++
		}
	}
	assert.Greater(t, valid, 100, "the generator makes valid reports")
	assert.Greater(t, invalid, 100)
}
