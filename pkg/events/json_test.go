package events_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

var jsonStrings = []string{
	"", "plain", `"quoted"`, `back\slash`, "<&>", "tab\tnew\nline\rfeed\fback\b", "\x00\x01\x1f\x7f",
	"café ☕", "\u2028\u2029", "\xe2\x80", "\xe2\x80\xa8x", "\xff", "a\xffb", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	"😀", "\ufffd", "\u0085", strings.Repeat("é<", 100),
}

// checkJSONString holds AppendJSONString to encoding/json on s: with HTML
// escaping off, and, through json.HTMLEscape, json.Marshal.
func checkJSONString(t *testing.T, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(s))
	got := events.AppendJSONString([]byte("x"), s)
	require.Equal(t, "x"+strings.TrimSuffix(buf.String(), "\n"), string(got), "%q", s)

	want, err := json.Marshal(s)
	require.NoError(t, err)
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, got[1:])
	require.Equal(t, string(want), escaped.String(), "%q", s)
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range jsonStrings {
		checkJSONString(t, s)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(checkJSONString)
}

// FuzzMarshalVerdict holds NewMsg's encoding of a verdict to
// marshal's, with any text in every string of the verdict and its report.
func FuzzMarshalVerdict(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s, int64(len(s)), false)
	}
	all := fixtures(f)
	goldens := []events.Verdict{
		all["verdict.pass.v2.golden.json"].(events.Verdict),
		all["verdict.drift.v2.golden.json"].(events.Verdict),
		all["verdict.error.v2.golden.json"].(events.Verdict),
	}
	f.Fuzz(func(t *testing.T, s string, n int64, b bool) {
		for i, g := range goldens {
			v := g
			v.Host, v.Target.Kind, v.EvidenceID = s, s+"k", s+"e"
			v.BaselineDigest = strings.Repeat(s, i)
			if v.Error != "" {
				v.Error = s
			}
			if v.Report != nil {
				r := *v.Report
				r.Protected = append(append([]string(nil), r.Protected...), s)
				r.Target.Identifier = s
				r.ReportSchemaVersion = int(n)
				r.Changes = append([]report.Change(nil), r.Changes...)
				str, num, boo := snapshot.String(s), snapshot.Int(n), snapshot.Bool(b)
				r.Changes = append(r.Changes,
					report.Change{Status: diff.Status(s), Kind: s, Fields: []report.Field{
						{After: report.Present(str), Before: report.Present(num), Field: s},
						{After: report.Present(boo), Before: report.Missing, Field: "x"},
						{After: report.Missing, Before: report.Present(str), Field: "y"},
					}},
					report.Change{Status: diff.Added, Kind: "k"})
				v.Report = &r
			}
			want, err := events.MarshalPayload(v)
			require.NoError(t, err)
			got := events.MarshalVerdict(v)
			require.Equal(t, string(want), string(got))
		}
	})
}
