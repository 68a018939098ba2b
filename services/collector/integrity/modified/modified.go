// Package modified turns integrity results into runnable.modified events and
// records each distinct change once: in the state directory's hash-chained
// audit file (audit.jsonl) and, best effort, in the local syslog.
package modified

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// AuditFile is the name of the hash-chained audit log in the state
// directory.
const AuditFile = "audit.jsonl"

// Scope says where a report came from.
type Scope struct {
	Host        string
	Ecosystem   events.Ecosystem
	Environment string
	Runnable    string
}

// Events returns one runnable.modified payload per modified package.
func Events(rep *integrity.Report, sc Scope) []events.RunnableModified {
	var out []events.RunnableModified
	for i := range rep.Results {
		r := &rep.Results[i]
		if r.Status != integrity.StatusModified {
			continue
		}
		ev := events.RunnableModified{
			Host: sc.Host, Ecosystem: sc.Ecosystem, Environment: sc.Environment, Runnable: sc.Runnable,
			Package: r.Name, Version: r.Version, Source: string(r.Source), Baseline: string(r.Baseline),
			ChangeDigest: r.ChangeDigest,
		}
		for _, c := range r.Unexpected() {
			ev.ChangedFiles = append(ev.ChangedFiles, events.FileChange{Path: c.Path, Change: string(c.Kind), Observed: c.Observed})
		}
		out = append(out, ev)
	}
	return out
}

// reportKey identifies a change within an environment, so the same edit in
// two environments sharing a state directory is reported for each.
func reportKey(ev events.RunnableModified) string {
	sum := sha256.Sum256([]byte(string(ev.Ecosystem) + "\x00" + ev.Environment + "\x00" + ev.ChangeDigest))
	return hex.EncodeToString(sum[:])
}

// Record appends, for each event whose change was not reported before, a
// runnable.modified CloudEvent to the hash chain (chain name = host) in
// store's directory, and returns those events. A further edit has a new
// digest and so is a new event.
func Record(store *integrity.Store, source string, evs []events.RunnableModified) ([]events.RunnableModified, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	keys := make([]string, len(evs))
	byKey := make(map[string]events.RunnableModified, len(evs))
	for i, ev := range evs {
		keys[i] = reportKey(ev)
		byKey[keys[i]] = ev
	}
	fresh, err := store.MarkReported(keys...)
	if err != nil {
		return nil, fmt.Errorf("record runnable.modified: %w", err)
	}
	var out []events.RunnableModified
	path := filepath.Join(store.Dir(), AuditFile)
	for _, k := range fresh {
		ev := byKey[k]
		ce, err := events.New(source, ev)
		if err != nil {
			return out, fmt.Errorf("record runnable.modified: %w", err)
		}
		doc, err := json.Marshal(ce)
		if err != nil {
			return out, fmt.Errorf("record runnable.modified: %w", err)
		}
		tree, err := jsontree.Parse(doc)
		if err != nil {
			return out, fmt.Errorf("record runnable.modified: %w", err)
		}
		if _, err := chain.AppendFile(path, chain.NewHasher(nil), ev.Host, tree); err != nil {
			return out, fmt.Errorf("record runnable.modified: %w", err)
		}
		logSyslog(ev)
		out = append(out, ev)
	}
	return out, nil
}
