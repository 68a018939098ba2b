package events_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// verdictVariants returns the golden verdicts and mutations of them: every
// member given values at and past the schema's limits, and reports broken
// in every way the report schema names.
func verdictVariants(tb testing.TB) []events.Verdict {
	tb.Helper()
	all := fixtures(tb)
	goldens := []events.Verdict{
		all["verdict.pass.v2.golden.json"].(events.Verdict),
		all["verdict.drift.v2.golden.json"].(events.Verdict),
		all["verdict.error.v2.golden.json"].(events.Verdict),
		all["verdict.stale.v2.golden.json"].(events.Verdict),
	}
	clone := func(v events.Verdict) events.Verdict {
		if v.Report != nil {
			r := *v.Report
			r.Changes = append([]report.Change(nil), r.Changes...)
			for i := range r.Changes {
				r.Changes[i].Fields = append([]report.Field(nil), r.Changes[i].Fields...)
			}
			r.Protected = append([]string(nil), r.Protected...)
			v.Report = &r
		}
		return v
	}
	texts := []string{"", " ", "x", "\x00", "\x01", "a\u0085", "café", strings.Repeat("é", 1024), strings.Repeat("a", 1025),
		strings.Repeat("a", 2048), strings.Repeat("é", 1025), "sha256:" + strings.Repeat("a", 64), "with space", "~!"}
	edits := []func(*events.Verdict){
		func(*events.Verdict) {},
		func(v *events.Verdict) { v.Status = "weird" },
		func(v *events.Verdict) { v.Status = events.StatusError },
		func(v *events.Verdict) { v.Status = events.StatusPass },
		func(v *events.Verdict) { v.Status = events.StatusDrift },
		func(v *events.Verdict) { v.Status = events.StatusStale },
		func(v *events.Verdict) { v.LastSeen = "" },
		func(v *events.Verdict) { v.LastSeen = "2026-10-06T03:09:41.5Z" },
		func(v *events.Verdict) { v.LastSeen = "2026-10-06T03:09:41+02:00" },
		func(v *events.Verdict) { v.LastSeen = "2026-10-06 03:09:41Z" },
		func(v *events.Verdict) { v.LastSeen = "2026-13-06T03:09:41Z" },
		func(v *events.Verdict) { v.BaselineDigest = "" },
		func(v *events.Verdict) { v.BaselineDigest = digestB },
		func(v *events.Verdict) { v.Error = "" },
		func(v *events.Verdict) { v.Error = "boom" },
		func(v *events.Verdict) { v.Report = nil },
		func(v *events.Verdict) { v.SnapshotDigest = "sha256:" + strings.Repeat("A", 64) },
	}
	for _, s := range texts {
		edits = append(edits,
			func(v *events.Verdict) { v.Host = s },
			func(v *events.Verdict) { v.Target.Kind = s },
			func(v *events.Verdict) { v.Target.Identifier = s },
			func(v *events.Verdict) { v.EvidenceID = s },
			func(v *events.Verdict) { v.Error = s },
			func(v *events.Verdict) { v.BaselineDigest = s },
			func(v *events.Verdict) {
				if v.Report != nil {
					v.Report.Protected = append(v.Report.Protected, s)
				}
			},
			func(v *events.Verdict) {
				if v.Report != nil && len(v.Report.Changes) > 0 {
					v.Report.Changes[0].Kind = s
				}
			},
			func(v *events.Verdict) {
				if v.Report != nil && len(v.Report.Changes) > 0 {
					v.Report.Changes[0].Fields[0].Field = s
				}
			},
			func(v *events.Verdict) {
				if v.Report != nil && len(v.Report.Changes) > 0 {
					v.Report.Changes[0].Fields[0].After = report.Present(snapshot.String(s))
				}
			},
		)
	}
	for _, change := range []diff.Status{diff.Added, diff.Removed, diff.Changed, "modified", "renamed", ""} {
		edits = append(edits,
			func(v *events.Verdict) {
				if v.Report != nil && len(v.Report.Changes) > 0 {
					v.Report.Changes[0].Status = change
				}
			},
			func(v *events.Verdict) {
				if v.Report != nil && len(v.Report.Changes) > 0 {
					v.Report.Changes[0].Status = change
					v.Report.Changes[0].Fields = []report.Field{}
				}
			},
		)
	}
	edits = append(edits,
		func(v *events.Verdict) {
			if v.Report != nil {
				v.Report.Protected = append(v.Report.Protected, v.Report.Protected...)
			}
		},
		func(v *events.Verdict) {
			if v.Report != nil {
				v.Report.Protected = nil
			}
		},
		func(v *events.Verdict) {
			if v.Report != nil {
				v.Report.Changes = nil
			}
		},
		func(v *events.Verdict) {
			if v.Report != nil {
				v.Report.ReportSchemaVersion = 2
			}
		},
		func(v *events.Verdict) {
			if v.Report != nil && len(v.Report.Changes) > 0 {
				v.Report.Changes[0].Fields[0].Before = report.Missing
			}
		},
		func(v *events.Verdict) {
			if v.Report != nil && len(v.Report.Changes) > 0 {
				v.Report.Changes[0].Fields[1].After = report.Present(snapshot.Null())
			}
		},
		func(v *events.Verdict) {
			if v.Report != nil && len(v.Report.Changes) > 0 {
				v.Report.Changes[0].Fields = nil
			}
		},
		func(v *events.Verdict) {
			if v.Report != nil && len(v.Report.Changes) > 0 {
				v.Report.Changes[0].Fields[0].Before, v.Report.Changes[0].Fields[0].After = report.Missing, report.Missing
			}
		},
		func(v *events.Verdict) {
			if v.Report != nil {
				v.Report.Changes = append(v.Report.Changes, report.Change{Status: diff.Added, Kind: "git.repository", Fields: []report.Field{}})
			}
		},
		func(v *events.Verdict) {
			if v.Report != nil {
				v.Report.Target = report.Target{Kind: v.Target.Kind}
			}
		},
	)
	var out []events.Verdict
	for _, g := range goldens {
		for _, edit := range edits {
			v := clone(g)
			edit(&v)
			out = append(out, v)
		}
	}
	return out
}

// NewMsg of a verdict (its own encoder and report check) gives what the
// reference gives (encoding/json, the whole JSON Schema, the sdk-go
// setters), for every verdict: the same message and event, or an error of
// the same reason; again when the report was seen before.
func TestNewMsgOfVerdictIsReference(t *testing.T) {
	accepted, reasons := 0, map[events.Reason]int{}
	for i, v := range verdictVariants(t) {
		opts := []events.Option{events.WithID(fixtureID), events.WithTime(fixtureTime), events.WithTraceContext(fixtureTraceparent, "")}
		m1, e1, err1 := events.NewMsgReference(fixtureSource, v, opts...)
		for range 2 {
			m2, e2, err2 := events.NewMsg(fixtureSource, v, opts...)
			require.Equal(t, err1 == nil, err2 == nil, "variant %d: reference %v, NewMsg %v: %+v", i, err1, err2, v)
			if err1 != nil {
				require.Equal(t, events.ReasonOf(err1), events.ReasonOf(err2), "variant %d: reference %v, NewMsg %v", i, err1, err2)
				continue
			}
			require.Equal(t, m1.Subject, m2.Subject)
			require.Equal(t, m1.Header, m2.Header)
			require.Equal(t, string(m1.Data), string(m2.Data))
			assertSameEvent(t, e1, e2)
		}
		if err1 == nil {
			accepted++
		}
		reasons[events.ReasonOf(err1)]++
	}
	t.Logf("accepted %d, rejected by reason %v", accepted, reasons)
	require.Greater(t, accepted, 20)
	require.Greater(t, reasons[events.ReasonSchema], 5, "the report rules are reached")
}

// The verdict encoder writes what encoding/json writes (HTML escaping
// off).
func TestMarshalVerdictIsMarshal(t *testing.T) {
	for _, v := range verdictVariants(t) {
		want, wantErr := events.MarshalPayload(v)
		got := events.MarshalVerdict(v)
		require.NoError(t, wantErr)
		require.Equal(t, string(want), string(got))
	}
	v := fixtures(t)["verdict.error.v2.golden.json"].(events.Verdict)
	v.Error = "<&> \"quoted\" \u2028 \x01 \xff"
	want, err := events.MarshalPayload(v)
	require.NoError(t, err)
	got := events.MarshalVerdict(v)
	require.Equal(t, string(want), string(got))
}
