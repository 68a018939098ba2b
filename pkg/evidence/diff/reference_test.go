package diff_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/diff"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// compareReference is Compare as first written (each snapshot indexed in
// a map, every key listed and sorted), which Compare's fixed-size index
// and unchanged-record check must agree with.
func compareReference(before, after *snapshot.Snapshot) (*diff.Result, error) {
	if before.Target != after.Target {
		return nil, fmt.Errorf("%w: %s != %s", diff.ErrTargetMismatch, before.Target, after.Target)
	}
	index := func(s *snapshot.Snapshot) (map[string]*snapshot.Record, error) {
		m := make(map[string]*snapshot.Record, len(s.Evidence))
		for i := range s.Evidence {
			r := &s.Evidence[i]
			if _, ok := snapshot.LookupKind(r.Kind); !ok {
				return nil, fmt.Errorf("%w %s", diff.ErrUnsupportedKind, snapshot.Quote(r.Kind))
			}
			if _, dup := m[r.Kind]; dup {
				return nil, fmt.Errorf("duplicate evidence kind %s", snapshot.Quote(r.Kind))
			}
			m[r.Kind] = r
		}
		return m, nil
	}
	fieldsOf := func(before, after snapshot.Data) []diff.FieldChange {
		var keys []string
		for k := range before {
			keys = append(keys, k)
		}
		for k := range after {
			if _, ok := before[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var out []diff.FieldChange
		for _, k := range keys {
			vb, hb := before[k]
			va, ha := after[k]
			if hb && ha && vb == va {
				continue
			}
			out = append(out, diff.FieldChange{Field: k, Before: vb, After: va, HasBefore: hb, HasAfter: ha})
		}
		return out
	}
	b, err := index(before)
	if err != nil {
		return nil, err
	}
	a, err := index(after)
	if err != nil {
		return nil, err
	}
	res := &diff.Result{Target: before.Target}
	for _, k := range snapshot.Kinds() {
		rb, okb := b[k.Name]
		ra, oka := a[k.Name]
		switch {
		case !okb && !oka:
			continue
		case !okb:
			res.Changes = append(res.Changes, diff.KindChange{Kind: k.Name, Status: diff.Added, Fields: fieldsOf(nil, ra.Data)})
		case !oka:
			res.Changes = append(res.Changes, diff.KindChange{Kind: k.Name, Status: diff.Removed, Fields: fieldsOf(rb.Data, nil)})
		default:
			if rb.Plane != ra.Plane || rb.Source != ra.Source {
				return nil, fmt.Errorf("%w for %s; schema-v1 provenance changes are not comparable yet", diff.ErrProvenance, snapshot.Quote(k.Name))
			}
			if fields := fieldsOf(rb.Data, ra.Data); len(fields) > 0 {
				res.Changes = append(res.Changes, diff.KindChange{Kind: k.Name, Status: diff.Changed, Fields: fields})
			}
		}
	}
	return res, nil
}

// randomSnapshot builds a snapshot of a few records of supported kinds
// (now and then an unsupported or repeated one), drawn from small sets so
// that two snapshots often share records, fields and values.
func randomSnapshot(r *rand.Rand) *snapshot.Snapshot {
	kinds := []string{"systemd.unit", "linux.process", "git.repository", "codex.config", "node.packages"}
	s := &snapshot.Snapshot{SchemaVersion: 1, Target: snapshot.Target{Kind: "systemd.unit", Identifier: "a"}}
	if r.IntN(40) == 0 {
		s.Target.Identifier = "b"
	}
	for range r.IntN(4) {
		kind := kinds[r.IntN(len(kinds))]
		switch r.IntN(50) {
		case 0:
			kind = "unknown.kind"
		case 1:
			if len(s.Evidence) > 0 {
				kind = s.Evidence[0].Kind
			}
		}
		rec := snapshot.Record{Plane: snapshot.Live, Kind: kind, Source: snapshot.Source{Collector: "c", Method: "m"}, Data: snapshot.Data{}}
		if r.IntN(30) == 0 {
			rec.Source.Method = "other"
		}
		if slices.ContainsFunc(s.Evidence, func(x snapshot.Record) bool { return x.Kind == kind }) && r.IntN(2) == 0 {
			continue
		}
		for range r.IntN(12) {
			k := fmt.Sprintf("f%d", r.IntN(14))
			switch r.IntN(4) {
			case 0:
				rec.Data[k] = snapshot.String(fmt.Sprint(r.IntN(3)))
			case 1:
				rec.Data[k] = snapshot.Int(int64(r.IntN(3)))
			case 2:
				rec.Data[k] = snapshot.Bool(r.IntN(2) == 0)
			default:
				rec.Data[k] = snapshot.Null()
			}
		}
		s.Evidence = append(s.Evidence, rec)
	}
	return s
}

func TestCompareMatchesTheReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	changed, same, failed := 0, 0, 0
	for range 20000 {
		a := randomSnapshot(r)
		b := a
		if r.IntN(3) > 0 {
			b = randomSnapshot(r)
		}
		want, wantErr := compareReference(a, b)
		got, err := diff.Compare(a, b)
		if wantErr != nil {
			require.Error(t, err)
			require.Equal(t, wantErr.Error(), err.Error())
			require.Equal(t, errors.Unwrap(wantErr) == nil, errors.Unwrap(err) == nil)
			failed++
			continue
		}
		require.NoError(t, err)
		require.Equal(t, want, got)
		if got.Empty() {
			same++
		} else {
			changed++
		}
	}
	t.Logf("%d changed, %d unchanged, %d errors", changed, same, failed)
	require.Greater(t, changed, 1000)
	require.Greater(t, same, 1000)
	require.Greater(t, failed, 100)
}
