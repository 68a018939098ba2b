package collector

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/modified"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/node"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
)

// Snapshot target kinds of the installed-code targets.
const (
	// TargetPythonEnvironment is the target kind of a python target; the
	// identifier is the environment prefix.
	TargetPythonEnvironment = "python.environment"
	// TargetNodeProject is the target kind of a node target; the
	// identifier is the project folder.
	TargetNodeProject = "node.project"
)

// integrityCheck is what the collector needs from the integrity engine
// for one ecosystem: check the target's installed code with the given
// state and return the report and its evidence record.
type integrityCheck struct {
	ecosystem  events.Ecosystem
	targetKind string
	check      func(ctx context.Context, tc TargetConfig, store *integrity.Store) (*integrity.Report, snapshot.Record, error)
}

// integrityChecks maps the python and node kinds to the engine
// (services/collector/integrity).
var integrityChecks = map[string]integrityCheck{
	KindPython: {ecosystem: events.Python, targetKind: TargetPythonEnvironment, check: checkPython},
	KindNode:   {ecosystem: events.Node, targetKind: TargetNodeProject, check: checkNode},
}

func checkPython(ctx context.Context, tc TargetConfig, store *integrity.Store) (*integrity.Report, snapshot.Record, error) {
	env, err := python.Open(ctx, tc.Env, python.OpenOptions{})
	if err != nil {
		return nil, snapshot.Record{}, err
	}
	opts := python.Options{All: tc.Options.All || tc.Options.Runnable == "", Store: store}
	if tc.Options.Runnable != "" {
		opts.Roots = []string{tc.Options.Runnable}
	}
	rep, err := python.Verify(ctx, env, opts)
	if err != nil {
		return nil, snapshot.Record{}, err
	}
	return rep, python.Evidence(rep), nil
}

func checkNode(ctx context.Context, tc TargetConfig, store *integrity.Store) (*integrity.Report, snapshot.Record, error) {
	opts := node.Options{All: tc.Options.All, Store: store, TakeSnapshots: true}
	if tc.Options.Runnable != "" {
		opts.Packages = []string{tc.Options.Runnable}
	}
	rep, err := node.Verify(ctx, tc.Dir, opts)
	if err != nil {
		return nil, snapshot.Record{}, err
	}
	return rep, node.Evidence(rep), nil
}

// integrityNotFound reports the engine's "no such environment or package"
// errors.
func integrityNotFound(err error) bool {
	return errors.Is(err, python.ErrNotEnvironment) || errors.Is(err, python.ErrNotInstalled) ||
		errors.Is(err, node.ErrNotProject) || errors.Is(err, node.ErrNotInstalled)
}

// checkIntegrity checks a python or node target: the snapshot holds the
// engine's evidence record, and every modified package whose change digest
// was not reported before becomes a runnable.modified payload.
func (c *Collector) checkIntegrity(ctx context.Context, t *target) (observation, error) {
	ic, ok := integrityChecks[t.cfg.Kind]
	if !ok {
		return observation{}, fmt.Errorf("no integrity check for kind %q", t.cfg.Kind)
	}
	if t.store == nil {
		dir := filepath.Join(c.cfg.StateDir, "integrity", events.Token(t.cfg.Name))
		st, err := integrity.OpenStore(dir)
		if err != nil {
			return observation{}, err
		}
		t.store = st
	}
	rep, rec, err := ic.check(ctx, t.cfg, t.store)
	if err != nil {
		return observation{}, err
	}
	if rep.CacheError != "" {
		// The check stands (its cache could not be saved); the next
		// check hashes what this one could not record.
		c.log.Warn("integrity stat cache", "target", t.cfg.Name, "err", rep.CacheError)
	}
	s := snapshot.New(snapshot.Target{Kind: ic.targetKind, Identifier: rep.Root}, rec)
	if err := s.Validate(); err != nil {
		return observation{}, err
	}
	sc := modified.Scope{Host: c.cfg.Host, Ecosystem: ic.ecosystem, Environment: rep.Root, Runnable: t.cfg.Options.Runnable}
	changes, err := modified.Unreported(t.store, rep, sc)
	if err != nil {
		return observation{}, err
	}
	results := make(map[string]*integrity.Result, len(rep.Results))
	for i := range rep.Results {
		results[rep.Results[i].Name] = &rep.Results[i]
	}
	ids := make([]string, len(changes))
	for i, p := range changes {
		var at int64
		if r := results[p.Package]; r != nil {
			at = r.ChangedAt()
		}
		ids[i] = runnableEventID(p, at)
	}
	obs := observation{snap: s, changes: changes, ids: ids, reported: func(digests []string) error {
		sent := make([]events.RunnableModified, 0, len(digests))
		for _, ch := range changes {
			if slices.Contains(digests, ch.ChangeDigest) {
				sent = append(sent, ch)
			}
		}
		return modified.Reported(t.store, sc, sent)
	}}
	return obs, nil
}
