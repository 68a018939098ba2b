package modified_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/modified"
)

const source = "/runtimetruth/cli/test"

// report returns a report of one package: clean when observed is empty,
// else with app.py changed to observed.
func report(name, version, observed string) *integrity.Report {
	r := integrity.Result{Name: name, Version: version, Source: integrity.SourceIndex, Baseline: integrity.BaselineRecord, Files: 2}
	if observed != "" {
		r.Changes = []integrity.Change{{Path: "app.py", Kind: integrity.ChangeModified, Observed: observed}}
	}
	r.Finish(nil)
	return &integrity.Report{Root: "/srv/venv", Results: []integrity.Result{r}}
}

func scope() modified.Scope {
	return modified.Scope{Host: "web-1", Ecosystem: events.Python, Environment: "/srv/venv", Runnable: "app"}
}

func newStore(t *testing.T) *integrity.Store {
	t.Helper()
	store, err := integrity.OpenStore(t.TempDir())
	require.NoError(t, err)
	return store
}

// links counts the links of the store's audit chain, which must verify.
func links(t *testing.T, store *integrity.Store) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store.Dir(), modified.AuditFile))
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	rep, err := chain.Run(context.Background(), chain.NewHasher(nil), nil, chain.Lines(bytes.NewReader(data), ""))
	require.NoError(t, err)
	require.Nil(t, rep.Broken)
	return rep.Links
}

const (
	editA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	editB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestRecordOncePerDistinctChange(t *testing.T) {
	steps := []struct {
		name     string
		observed string // "" is the clean state
		env      string
		want     int // events emitted by this step
	}{
		{"edit A", editA, "", 1},
		{"edit A again", editA, "", 0},
		{"edit B", editB, "", 1},
		{"back to A", editA, "", 1},
		{"A once more", editA, "", 0},
		{"clean", "", "", 0},
		{"A after clean", editA, "", 1},
		{"A in another environment", editA, "/srv/other", 1},
		{"A again in the first", editA, "", 0},
	}
	// Record (the CLI), and Unreported then Reported (the collector
	// service, which publishes in between), keep the same account.
	t.Run("Record", func(t *testing.T) {
		store := newStore(t)
		total := 0
		for _, s := range steps {
			sc := scope()
			if s.env != "" {
				sc.Environment = s.env
			}
			got, err := modified.Record(store, source, report("app", "1.0.0", s.observed), sc)
			require.NoError(t, err, s.name)
			assert.Len(t, got, s.want, s.name)
			total += s.want
			assert.Equal(t, total, links(t, store), s.name)
		}
	})
	t.Run("Unreported and Reported", func(t *testing.T) {
		store := newStore(t)
		for _, s := range steps {
			sc := scope()
			if s.env != "" {
				sc.Environment = s.env
			}
			got, err := modified.Unreported(store, report("app", "1.0.0", s.observed), sc)
			require.NoError(t, err, s.name)
			assert.Len(t, got, s.want, s.name)
			again, err := modified.Unreported(store, report("app", "1.0.0", s.observed), sc)
			require.NoError(t, err)
			assert.Len(t, again, s.want, "%s: not reported until Reported", s.name)
			require.NoError(t, modified.Reported(store, sc, got), s.name)
		}
	})
}

func TestRecordRetriesWhenAppendFails(t *testing.T) {
	store := newStore(t)
	audit := filepath.Join(store.Dir(), modified.AuditFile)
	// A directory where the audit file belongs: the append fails.
	require.NoError(t, os.Mkdir(audit, 0o700))
	got, err := modified.Record(store, source, report("app", "1.0.0", editA), scope())
	require.Error(t, err)
	assert.Empty(t, got)

	require.NoError(t, os.Remove(audit))
	got, err = modified.Record(store, source, report("app", "1.0.0", editA), scope())
	require.NoError(t, err)
	assert.Len(t, got, 1, "a change whose event was not written is reported by the next check")
	assert.Equal(t, 1, links(t, store))
}

func TestRecordRetriesInvalidEvent(t *testing.T) {
	store := newStore(t)
	sc := scope()
	sc.Host = "" // fails the event's validation
	_, err := modified.Record(store, source, report("app", "1.0.0", editA), sc)
	require.ErrorContains(t, err, "host")
	assert.Equal(t, 0, links(t, store))

	got, err := modified.Record(store, source, report("app", "1.0.0", editA), scope())
	require.NoError(t, err)
	assert.Len(t, got, 1)
	assert.Equal(t, 1, links(t, store))
}

func TestRecordUnversionedPackage(t *testing.T) {
	store := newStore(t)
	sc := scope()
	sc.Ecosystem = events.Node
	got, err := modified.Record(store, source, report("proj", "", editA), sc)
	require.NoError(t, err, "a package.json without a version still yields an event")
	require.Len(t, got, 1)
	assert.Equal(t, modified.Unversioned, got[0].Version)
	assert.Equal(t, "pkg:npm/proj@unversioned", got[0].Subject())
	assert.Equal(t, 1, links(t, store))
}

func TestRecordSkipsUncheckedPackages(t *testing.T) {
	store := newStore(t)
	_, err := modified.Record(store, source, report("app", "1.0.0", editA), scope())
	require.NoError(t, err)
	// An error result neither reports nor forgets the last change.
	rep := report("app", "1.0.0", "")
	rep.Results[0].Status, rep.Results[0].Reason = integrity.StatusError, "cannot read RECORD"
	got, err := modified.Record(store, source, rep, scope())
	require.NoError(t, err)
	assert.Empty(t, got)
	got, err = modified.Record(store, source, report("app", "1.0.0", editA), scope())
	require.NoError(t, err)
	assert.Empty(t, got, "the same change is still the last one reported")
	assert.Equal(t, 1, links(t, store))
}
