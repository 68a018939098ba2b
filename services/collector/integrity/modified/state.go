package modified

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// State files in the integrity state directory.
const (
	// StateFile remembers the last change reported per package and
	// environment.
	StateFile = "last-reported.json"
)

// MaxRemembered bounds the packages StateFile remembers; the least
// recently reported are forgotten first (at worst their change is reported
// once more).
const MaxRemembered = 4096

// lastReport is the last change reported for one package.
type lastReport struct {
	Ecosystem    events.Ecosystem `json:"ecosystem"`
	Environment  string           `json:"environment"`
	Package      string           `json:"package"`
	ChangeDigest string           `json:"change_digest"`
	ReportedAt   string           `json:"reported_at"`
}

// state is the StateFile document, keyed by packageKey.
type state struct {
	Last map[string]lastReport `json:"last"`
}

// packageKey identifies a package within an environment, so the same
// package in two environments sharing a state directory is tracked for
// each.
func packageKey(sc Scope, pkg string) string {
	sum := sha256.Sum256([]byte(string(sc.Ecosystem) + "\x00" + sc.Environment + "\x00" + pkg))
	return hex.EncodeToString(sum[:16])
}

func now(store *integrity.Store) time.Time {
	if store.Now != nil {
		return store.Now()
	}
	return time.Now()
}

// loadState reads StateFile. A missing, unreadable or damaged file is an
// empty state: at worst a change already reported is reported again.
func loadState(dir string) *state {
	st := &state{}
	if data, err := os.ReadFile(filepath.Join(dir, StateFile)); err == nil {
		_ = json.Unmarshal(data, st) // damaged: start afresh, see above
	}
	if st.Last == nil {
		st.Last = map[string]lastReport{}
	}
	return st
}

// unreported applies rep to st: a package found clean forgets its last
// change (forgot reports whether one did); the modified packages whose
// change differs from the last one reported are returned. Skipped
// packages and those that could not be checked are left as they were.
func (st *state) unreported(rep *integrity.Report, sc Scope) (todo []*integrity.Result, forgot bool) {
	for i := range rep.Results {
		r := &rep.Results[i]
		key := packageKey(sc, r.Name)
		switch {
		case r.Status == integrity.StatusOK:
			forgot = st.forget(key) || forgot
		case r.Status == integrity.StatusModified && r.ChangeDigest != "" && st.Last[key].ChangeDigest != r.ChangeDigest:
			todo = append(todo, r)
		}
	}
	return todo, forgot
}

func (st *state) forget(key string) bool {
	if _, ok := st.Last[key]; !ok {
		return false
	}
	delete(st.Last, key)
	return true
}

func (st *state) remember(key string, ev events.RunnableModified, at time.Time) {
	st.Last[key] = lastReport{
		Ecosystem: ev.Ecosystem, Environment: ev.Environment, Package: ev.Package,
		ChangeDigest: ev.ChangeDigest, ReportedAt: at.UTC().Format(time.RFC3339Nano),
	}
	if len(st.Last) <= MaxRemembered {
		return
	}
	keys := make([]string, 0, len(st.Last))
	for k := range st.Last {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := st.Last[keys[i]].ReportedAt, st.Last[keys[j]].ReportedAt
		if a != b {
			return a < b
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys[:len(keys)-MaxRemembered] {
		delete(st.Last, k)
	}
}

// save writes StateFile atomically and durably (Store.WriteFile).
func (st *state) save(store *integrity.Store) error {
	data, err := json.MarshalIndent(st, "", " ")
	if err != nil {
		return fmt.Errorf("write %s: %w", StateFile, err)
	}
	return store.WriteFile(StateFile, append(data, '\n'))
}
