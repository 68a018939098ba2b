package python

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// Options select what Verify checks and how.
type Options struct {
	// Roots are the distributions to check (names, any spelling PEP 503
	// normalizes alike), each with its direct dependencies: METADATA
	// Requires-Dist whose marker holds for the environment (with no extra
	// requested). Dependencies that are not installed are left out.
	Roots []string
	// All checks every installed distribution instead.
	All bool
	// Allow lists expected changes; nil expects none.
	Allow *integrity.Allowlist
	// Store keeps the stat cache; nil hashes every file.
	Store *integrity.Store
	// NoCache re-hashes every file even when a stat cache is available.
	NoCache bool
	// Workers is the number of hashing workers; 0 means GOMAXPROCS.
	Workers int
}

// Selected is a distribution Select picked.
type Selected struct {
	*Distribution
	// NotEvaluated says why the distribution, a direct dependency whose
	// Requires-Dist marker could not be evaluated (it depends on a marker
	// variable the environment does not give, or compares in a way PEP 508
	// leaves undefined), is reported but not checked: "not evaluated: app
	// requires it if python_full_version >= \"3.11.2\", and
	// python_full_version is unknown (...)". It is "" for one that is
	// checked.
	NotEvaluated string
}

// Select returns the distributions Options ask for, from dists: the roots
// in the order given, then their direct dependencies in the order they are
// declared, each once; or, with all, every distribution. A dependency
// whose marker cannot be evaluated, and that no root or other marker puts
// in scope, is in the list with NotEvaluated set: it is neither guessed
// into nor out of scope. A root that is not installed fails with
// ErrNotInstalled; dependencies that are not installed are left out.
func (e *Env) Select(dists []*Distribution, roots []string, all bool) ([]Selected, error) {
	if all {
		out := make([]Selected, len(dists))
		for i, d := range dists {
			out[i] = Selected{Distribution: d}
		}
		return out, nil
	}
	if len(roots) == 0 {
		return nil, ErrNoScope
	}
	byKey := make(map[string]*Distribution, len(dists))
	for _, d := range dists {
		byKey[d.Key] = d
	}
	var out []Selected
	at := map[string]int{} // index in out by key
	var missing []string
	var rootDists []*Distribution
	for _, r := range roots {
		d := byKey[normalizeName(r)]
		if d == nil {
			missing = append(missing, r)
			continue
		}
		rootDists = append(rootDists, d)
		if _, ok := at[d.Key]; !ok {
			at[d.Key] = len(out)
			out = append(out, Selected{Distribution: d})
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotInstalled, strings.Join(missing, ", "))
	}
	for _, root := range rootDists {
		for _, dep := range e.directDependencies(root) {
			d := byKey[dep.Key]
			if d == nil {
				continue
			}
			switch i, ok := at[d.Key]; {
			case !ok:
				at[d.Key] = len(out)
				out = append(out, Selected{Distribution: d, NotEvaluated: dep.NotEvaluated})
			case dep.NotEvaluated == "":
				out[i].NotEvaluated = "" // in scope after all
			}
		}
	}
	return out, nil
}

// dependency is a direct dependency of a distribution: its normalized
// name, and why its marker could not be evaluated ("" when it holds).
type dependency struct {
	Key          string
	NotEvaluated string
}

// directDependencies returns d's Requires-Dist entries whose markers hold
// in the environment, and those whose markers cannot be evaluated there
// (with why); entries whose markers do not hold are left out.
func (e *Env) directDependencies(d *Distribution) []dependency {
	var out []dependency
	for _, r := range d.Requires {
		ok, unknown, err := r.Marker.evaluate(e.Markers)
		switch {
		case err != nil:
			out = append(out, dependency{Key: r.Key(),
				NotEvaluated: fmt.Sprintf("not evaluated: %s requires it if %s, which PEP 508 leaves undefined (%v)", d.Name, r.Marker, err)})
		case len(unknown) > 0:
			out = append(out, dependency{Key: r.Key(), NotEvaluated: e.notEvaluated(d, r, unknown)})
		case ok:
			out = append(out, dependency{Key: r.Key()})
		}
	}
	return out
}

// notEvaluated explains why requirement r of d was not evaluated: the
// unknown variables its marker depends on, and why each is unknown.
func (e *Env) notEvaluated(d *Distribution, r Requirement, unknown []string) string {
	why := make([]string, len(unknown))
	for i, v := range unknown {
		why[i] = v + " is unknown"
		if reason := e.Unknown[v]; reason != "" {
			why[i] += " (" + reason + ")"
		}
	}
	return fmt.Sprintf("not evaluated: %s requires it if %s, and %s", d.Name, r.Marker, strings.Join(why, "; "))
}

// Owner returns the distribution whose RECORD lists file (compared as
// cleaned absolute paths), for finding the package that ships a
// runnable's files. ok is false when none does. A RECORD that cannot be
// read (see sysfile.ReadFileBeneathInto) or parsed is passed over.
func (e *Env) Owner(dists []*Distribution, file string) (d *Distribution, ok bool, err error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, false, err
	}
	for _, d := range dists {
		if d.EggInfo {
			continue
		}
		data, err := sysfile.ReadFileBeneath(d.Site, filepath.Base(d.InfoDir)+"/RECORD", MaxRecordSize)
		if err != nil {
			continue
		}
		entries, err := ParseRecord(data)
		if err != nil {
			continue
		}
		for _, ent := range entries {
			dir, rel, err := e.resolve(d.Site, ent.Path)
			if err != nil {
				continue
			}
			if dir != "" {
				rel = dir + "/" + rel
			}
			if filepath.Clean(filepath.FromSlash(rel)) == abs {
				return d, true, nil
			}
		}
	}
	return nil, false, nil
}

// resolve turns a RECORD path into the (dir, rel) pair the hasher opens,
// rejecting paths that leave the environment by name. (A path that leaves
// it through a symbolic link is caught when the hasher opens it beneath
// Prefix: see Verify.) The common case, a clean relative path, needs no
// allocation.
func (e *Env) resolve(site, p string) (dir, rel string, err error) {
	if !strings.HasPrefix(p, "/") && cleanRel(p) {
		return site, p, nil
	}
	var full string
	if strings.HasPrefix(p, "/") {
		full = path.Clean(p)
	} else {
		full = path.Clean(filepath.ToSlash(site) + "/" + p)
	}
	root := filepath.ToSlash(e.Prefix)
	if full != root && !strings.HasPrefix(full, strings.TrimSuffix(root, "/")+"/") {
		return "", "", fmt.Errorf("%w: %q", ErrEscape, p)
	}
	return "", full, nil
}

// cleanRel reports whether p is a relative path with no empty, "." or
// ".." segment (so it stays under the directory it is relative to).
func cleanRel(p string) bool {
	if p == "" {
		return false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// Verify checks the distributions Options select: each file its RECORD
// lists with a hash is hashed again and compared. Editable installs are
// skipped, legacy .egg-info distributions (no RECORD) are skipped, and a
// distribution whose RECORD is missing, malformed or lists a path outside
// the environment is an error (none of its files is opened). Every file
// is opened beneath the environment root (Prefix): a listed path that
// would lead out of it through a symbolic link on the way (a directory in
// site-packages replaced by a link to /etc) is not followed, and is the
// same error for its distribution. A listed file that is missing, is now
// a symbolic link or is no longer a regular file counts as modified.
func Verify(ctx context.Context, env *Env, opts Options) (*integrity.Report, error) {
	// Load the stat cache while the distributions are listed.
	type opened struct {
		c   *integrity.Cache
		err error
	}
	cacheCh := make(chan opened, 1)
	if opts.Store != nil {
		go func() {
			c, err := opts.Store.Cache(env.Prefix, opts.NoCache)
			cacheCh <- opened{c, err}
		}()
	} else {
		cacheCh <- opened{}
	}
	var sel []Selected
	dists, err := env.Distributions()
	if err == nil {
		sel, err = env.Select(dists, opts.Roots, opts.All)
	}
	oc := <-cacheCh
	if err != nil {
		return nil, err
	}
	if oc.err != nil {
		return nil, oc.err
	}
	return env.check(ctx, sel, oc.c, opts)
}

// check hashes the files of the selected distributions (with cache, when
// not nil) and makes the report.
func (e *Env) check(ctx context.Context, sel []Selected, cache *integrity.Cache, opts Options) (*integrity.Report, error) {
	rep := &integrity.Report{Root: e.Prefix, Results: make([]integrity.Result, len(sel))}
	lists, stats, err := e.hash(ctx, sel, rep.Results, cache, opts)
	if err != nil {
		return nil, err
	}
	rep.SetStats(stats)
	for i, l := range lists {
		r := &rep.Results[i]
		var errs, escapes []string
		for j := range l.Len() {
			if l.OK(j) {
				continue
			}
			f := l.File(j)
			if f.State == integrity.FileError {
				if errors.Is(f.Err, integrity.ErrOutsideRoot) {
					// Through a symbolic link: the same error as a
					// RECORD path escaping by name.
					escapes = append(escapes, fmt.Errorf("%w: %q", ErrEscape, l.Label(j)).Error())
					continue
				}
				errs = append(errs, fmt.Sprintf("%s: %v", l.Label(j), f.Err))
				continue
			}
			if c, changed := integrity.ChangeFor(f, l.Label(j)); changed {
				r.Changes = append(r.Changes, c)
			}
		}
		switch {
		case len(escapes) > 0:
			r.Status = integrity.StatusError
			r.Reason = strings.Join(escapes, "; ")
		case len(errs) > 0:
			r.Status = integrity.StatusError
			r.Reason = "cannot read " + strings.Join(errs, "; ")
		}
		r.Finish(opts.Allow)
	}
	return rep, nil
}

// hash plans every selected distribution and hashes its files: the
// hashing workers parse the RECORDs (or take them from the cache) as they
// run out of files to hash, so planning and hashing overlap on the same
// workers. It returns each distribution's files as checked (a nil list
// for one without files to check).
func (e *Env) hash(ctx context.Context, sel []Selected, results []integrity.Result, cache *integrity.Cache, opts Options) ([]*integrity.List, integrity.CheckStats, error) {
	lists := make([]*integrity.List, len(sel))
	// Resolve every file beneath the environment root, so that a
	// symbolic link on the way cannot lead out of it.
	h := integrity.Hasher{Workers: opts.Workers, Root: e.Prefix}
	err := h.RunPlanned(ctx, len(sel), func(i int) *integrity.List {
		lists[i] = e.plan(sel[i], &results[i], cache)
		return lists[i]
	}, cache)
	if err != nil {
		return nil, integrity.CheckStats{}, err
	}
	st := integrity.CheckStats{Full: cache.Full()}
	for _, l := range lists {
		h, c := l.Stats()
		st.Hashed += h
		st.Cached += c
		cache.UpdateList(l)
	}
	st.CacheErr = cache.Commit()
	return lists, st, nil
}

// plan returns the files of d to check, from the cache when its RECORD
// is unchanged, else parsed from the RECORD (and stored in the cache);
// nil when there are none. Each file carries the size its RECORD row
// lists, so that one of another size is reported without being read.
func (e *Env) plan(d Selected, r *integrity.Result, cache *integrity.Cache) *integrity.List {
	*r = integrity.Result{
		Name: d.Name, Version: d.Version, Location: d.InfoDir,
		Source: d.Source(), Baseline: integrity.BaselineRecord, Status: integrity.StatusOK,
	}
	switch {
	case d.NotEvaluated != "":
		r.Status, r.Reason = integrity.StatusSkipped, d.NotEvaluated
		if d.EggInfo {
			r.Baseline = integrity.BaselineNone
		}
		return nil
	case d.Err != nil:
		r.Status, r.Reason = integrity.StatusError, d.Err.Error()
		return nil
	case d.EggInfo:
		r.Status, r.Baseline, r.Reason = integrity.StatusSkipped, integrity.BaselineNone, "egg-info distribution: no RECORD"
		return nil
	case r.Source == integrity.SourceEditable:
		r.Status, r.Baseline, r.Reason = integrity.StatusSkipped, integrity.BaselineNone, "editable install"
		return nil
	}
	recordPath := filepath.Join(d.InfoDir, "RECORD")
	src := cache.Source(recordPath)
	if l, ok := cache.List(recordPath, src, d.Site); ok {
		r.Files, r.Unchecked = l.Len(), l.Extra
		return l
	}
	buf := recordBuffers.Get().(*[]byte)
	defer releaseRecord(buf)
	data, err := readRecord(d.Site, d.InfoDir, buf)
	if err != nil {
		r.Status, r.Reason = integrity.StatusError, "read RECORD: "+err.Error()
		return nil
	}
	n := bytesCount(data, '\n') + 1
	l := &integrity.List{Files: make([]integrity.File, 0, n/2+1), Labels: make([]string, 0, n/2+1)}
	err = eachRecordEntry(data, func(ent *RecordEntry) error {
		if ent.Hash.IsZero() {
			r.Unchecked++
			return nil
		}
		dir, rel, err := e.resolve(d.Site, ent.Path)
		if err != nil {
			return err
		}
		l.Files = append(l.Files, integrity.File{Dir: dir, Rel: rel, Want: ent.Hash})
		l.Files[len(l.Files)-1].SetWantSize(ent.Size) // -1, not listed: unknown
		l.Labels = append(l.Labels, ent.Path)
		return nil
	})
	if err != nil {
		r.Status, r.Reason = integrity.StatusError, err.Error()
		r.Unchecked, r.Files = 0, 0
		return nil
	}
	keepStrings(l, data)
	r.Files, l.Extra = len(l.Files), r.Unchecked
	cache.PutList(recordPath, src, l)
	return l
}
