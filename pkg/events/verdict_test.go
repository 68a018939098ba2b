package events_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
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

// NewMsg of a verdict is held to the JSON Schema, for every variant: what
// it sends, the schema takes, and it decodes to the verdict sent; what it
// refuses for the schema's rules, the schema refuses.
func TestNewMsgOfVerdictMatchesTheSchema(t *testing.T) {
	accepted, reasons := 0, map[events.Reason]int{}
	for i, v := range verdictVariants(t) {
		opts := []binding.Option{binding.WithID(fixtureID), binding.WithTime(fixtureTime), binding.WithTraceContext(fixtureTraceparent, "")}
		m, e, err := binding.NewMsg(fixtureSource, v, opts...)
		reasons[events.ReasonOf(err)]++
		if err != nil {
			if events.ReasonOf(err) == events.ReasonSchema && v.Type() != "" {
				// The verdict as a Go value, nil slices null (as
				// Validate sees them).
				asValue, merr := json.Marshal(v)
				require.NoError(t, merr)
				require.Error(t, events.CheckSchema(v.Type(), asValue), "variant %d: NewMsg refused for the schema (%v) what the schema takes: %s", i, err, asValue)
			}
			continue
		}
		data, err := events.EncodeData(v)
		require.NoError(t, err)
		schemaErr := events.CheckSchema(v.Type(), data)
		require.NoError(t, schemaErr, "variant %d: NewMsg sent what the schema refuses: %s", i, data)
		require.Equal(t, string(data), string(m.Data))
		got, err := binding.Decode[events.Verdict](e)
		require.NoError(t, err)
		again, err := events.EncodeData(got)
		require.NoError(t, err)
		require.Equal(t, string(data), string(again), "the verdict decodes to itself")
		accepted++
	}
	t.Logf("accepted %d, rejected by reason %v", accepted, reasons)
	require.Greater(t, accepted, 20)
	require.Greater(t, reasons[events.ReasonSchema], 5, "the report rules are reached")
}
