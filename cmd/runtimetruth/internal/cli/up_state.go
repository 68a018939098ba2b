package cli

import (
	"slices"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

// The words of up's lines that are not a verdict status's.
const (
	wordNoBaseline = "NO BASELINE"
	wordRejected   = "REJECTED"
	wordApproved   = "APPROVED"
)

// targetState is what up prints of a target's outcome, less what changes
// at every collection (the time, the snapshot): up prints an outcome only
// when its target's state differs from the last one printed, so a target
// that stays as it was prints nothing more.
type targetState struct {
	// word is the line's: PASS, DRIFT, STALE, ERROR, NO BASELINE,
	// REJECTED (the verifier refused its evidence) or APPROVED (up
	// approved its first snapshot).
	word string
	// detail tells two states of one word apart: a DRIFT's changed
	// fields, an ERROR's text, a REJECTED's reason; empty for the rest.
	detail string
}

// verdictState is the state of a target whose verdict is v: its status;
// a drift with the set of its changed fields, an error with its text,
// and an error without a baseline as NO BASELINE alone.
func verdictState(v events.Verdict) targetState {
	switch {
	case v.Status == events.StatusError && v.BaselineDigest == "":
		return targetState{word: wordNoBaseline}
	case v.Status == events.StatusError:
		return targetState{word: verifier.StatusWord(v.Status), detail: v.Error}
	case v.Status == events.StatusDrift:
		return targetState{word: verifier.StatusWord(v.Status), detail: driftFields(v.Report)}
	}
	return targetState{word: verifier.StatusWord(v.Status)}
}

// failureState is the state of a target whose collection failed.
func failureState(reason, msg string) targetState {
	return targetState{word: verifier.StatusWord(events.StatusError), detail: "collection failed (" + reason + "): " + msg}
}

// rejectedState is the state of a target whose evidence the verifier
// refused: its reason, not its text, so refusals for one reason (a clock
// off by a few seconds more each time) are one state.
func rejectedState(r events.EventRejected) targetState {
	return targetState{word: wordRejected, detail: rejectReason(r)}
}

// rejectReason is why the verifier refused evidence: the reason its
// error names ("rejected evidence (<reason>): …", as the verifier words
// its refusals), else the dead letter's own.
func rejectReason(r events.EventRejected) string {
	const mark = "rejected evidence ("
	if i := strings.Index(r.Error, mark); i >= 0 {
		if reason, _, ok := strings.Cut(r.Error[i+len(mark):], ")"); ok && reason != "" {
			return reason
		}
	}
	return string(r.Reason)
}

// driftFields is the set of a drift's changes, sorted: kind.field for a
// changed field, "kind added" or "kind removed" for an evidence kind; not
// their values.
func driftFields(r *report.Report) string {
	if r == nil {
		return ""
	}
	var fields []string
	for _, c := range r.Changes {
		if c.Status != diff.Changed {
			fields = append(fields, c.Kind+" "+string(c.Status))
		}
		for _, f := range c.Fields {
			fields = append(fields, c.Kind+"."+f.Field)
		}
	}
	slices.Sort(fields)
	return strings.Join(slices.Compact(fields), "\x00")
}

// targetStates are the states up last printed, by target (up prints one
// host's).
type targetStates map[string]targetState

// changed records s as key's state and reports whether it differs from
// the one last printed, that is whether to print it.
func (l targetStates) changed(key string, s targetState) bool {
	if old, ok := l[key]; ok && old == s {
		return false
	}
	l[key] = s
	return true
}
