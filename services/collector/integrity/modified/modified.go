// Package modified turns integrity results into runnable.modified events and
// records each distinct change once: in the state directory's hash-chained
// audit file (audit.jsonl) and, best effort, in the local syslog.
//
// # Once per distinct change
//
// For each package of an environment the state directory remembers the
// last change reported (last-reported.json): a check that finds the same
// change again emits nothing, a check that finds any other change (a
// further edit, or a return to an earlier one) emits a new event, and a
// check that finds the package clean forgets it, so the same edit made
// again later is reported again.
//
// The event is appended to the audit chain first and the change remembered
// after, under an exclusive lock (last-reported.lock), so an event that
// cannot be built or written is retried by the next check rather than
// lost. A crash between the two leaves the change unremembered: the next
// check appends the event again. A duplicate is the accepted cost; a
// missing event is not.
package modified

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// AuditFile is the name of the hash-chained audit log in the state
// directory.
const AuditFile = "audit.jsonl"

// Unversioned is the version an event carries for a package that declares
// none (a Node project whose package.json has no "version"): the event
// schema requires a non-empty version.
const Unversioned = "unversioned"

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
		if r := &rep.Results[i]; r.Status == integrity.StatusModified {
			out = append(out, event(r, sc))
		}
	}
	return out
}

func event(r *integrity.Result, sc Scope) events.RunnableModified {
	ev := events.RunnableModified{
		Host: sc.Host, Ecosystem: sc.Ecosystem, Environment: sc.Environment, Runnable: sc.Runnable,
		Package: r.Name, Version: r.Version, Source: string(r.Source), Baseline: string(r.Baseline),
		ChangeDigest: r.ChangeDigest,
	}
	if ev.Version == "" {
		ev.Version = Unversioned
	}
	for _, c := range r.Unexpected() {
		ev.ChangedFiles = append(ev.ChangedFiles, events.FileChange{Path: c.Path, Change: string(c.Kind), Observed: c.Observed})
	}
	return ev
}

// Record appends a runnable.modified CloudEvent to the hash chain (chain
// name = host) in store's directory for each modified package of rep whose
// change differs from the last one reported for that package in sc's
// environment, and returns those events. A package found clean forgets its
// last change; skipped packages and those that could not be checked are
// left as they were. An event that cannot be built or appended is
// reported in the error (the others are still recorded) and is tried again
// by the next Record.
func Record(store *integrity.Store, source string, rep *integrity.Report, sc Scope) ([]events.RunnableModified, error) {
	if rep == nil || len(rep.Results) == 0 {
		return nil, nil
	}
	var out []events.RunnableModified
	err := locked(store, func(st *state) error {
		todo, save := st.unreported(rep, sc)
		var errs []error
		for _, r := range todo {
			ev := event(r, sc)
			if err := appendEvent(filepath.Join(store.Dir(), AuditFile), source, ev); err != nil {
				errs = append(errs, fmt.Errorf("record runnable.modified of %s: %w", r.Name, err))
				continue
			}
			logSyslog(ev)
			out = append(out, ev)
			st.remember(packageKey(sc, r.Name), ev, now(store))
			// Remember each event as soon as it is appended: a crash or
			// error later in the loop then duplicates none of the
			// earlier ones.
			if err := st.save(store); err != nil {
				errs = append(errs, fmt.Errorf("record runnable.modified: %w", err))
			}
			save = false
		}
		if save {
			if err := st.save(store); err != nil {
				errs = append(errs, fmt.Errorf("record runnable.modified: %w", err))
			}
		}
		return errors.Join(errs...)
	})
	return out, err
}

// Unreported returns the runnable.modified payloads of rep's modified
// packages whose change differs from the last one reported for that
// package in sc's environment — what Record would append — and forgets
// the last change of the packages found clean. Once the payloads are sent
// elsewhere (the collector service publishes them), Reported remembers
// them.
func Unreported(store *integrity.Store, rep *integrity.Report, sc Scope) ([]events.RunnableModified, error) {
	if rep == nil || len(rep.Results) == 0 {
		return nil, nil
	}
	var out []events.RunnableModified
	err := locked(store, func(st *state) error {
		todo, forgot := st.unreported(rep, sc)
		for _, r := range todo {
			out = append(out, event(r, sc))
		}
		if forgot {
			return st.save(store)
		}
		return nil
	})
	return out, err
}

// Reported remembers evs (of sc's environment) as the last changes
// reported for their packages.
func Reported(store *integrity.Store, sc Scope, evs []events.RunnableModified) error {
	if len(evs) == 0 {
		return nil
	}
	return locked(store, func(st *state) error {
		for _, ev := range evs {
			st.remember(packageKey(sc, ev.Package), ev, now(store))
		}
		return st.save(store)
	})
}

// locked runs fn on the state in store's directory under the store's
// lock.
func locked(store *integrity.Store, fn func(*state) error) error {
	unlock, err := store.Lock()
	if err != nil {
		return fmt.Errorf("runnable.modified state: %w", err)
	}
	defer unlock()
	return fn(loadState(store.Dir()))
}

// appendEvent validates ev as a CloudEvent and appends it to the chain
// ev.Host in the audit file at path.
func appendEvent(path, source string, ev events.RunnableModified) error {
	ce, err := binding.New(source, ev)
	if err != nil {
		return err
	}
	doc, err := json.Marshal(ce)
	if err != nil {
		return err
	}
	tree, err := jsontree.Parse(doc)
	if err != nil {
		return err
	}
	_, err = chain.AppendFile(path, chain.NewHasher(nil), ev.Host, tree)
	return err
}
