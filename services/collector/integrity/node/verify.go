package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
)

// Options select what Verify checks and how.
type Options struct {
	// Packages limits the check to these package names (the project's own
	// name selects the project folder). Empty means the project and each
	// direct dependency (dependencies, optionalDependencies and
	// devDependencies that are installed).
	Packages []string
	// All checks the project and every package under node_modules,
	// nested ones included.
	All bool
	// Allow lists expected changes; nil expects none.
	Allow *integrity.Allowlist
	// Store keeps stat caches and first-run snapshots; nil disables both
	// (packages without a manifest then have no baseline).
	Store *integrity.Store
	// TakeSnapshots takes the first-run snapshot of packages that have
	// neither a manifest nor a snapshot (what a run does; `verify` does
	// not).
	TakeSnapshots bool
	// Resnapshot takes the snapshot again for every selected package
	// without a manifest (after reinstalling one).
	Resnapshot bool
	// NoCache re-hashes every file.
	NoCache bool
	// Workers is the number of hashing workers; 0 means GOMAXPROCS.
	Workers int
}

// target is one package to check.
type target struct {
	name, version string
	dir           string // absolute package folder
	project       bool
	res           *integrity.Result
	manifest      *Manifest
	snap          *integrity.Snapshot
	links         map[string]string // baseline symbolic links: path → target
	taking        bool              // taking a snapshot now
	baseStart     int               // offset of baseline files in the combined slice
	baseN         int
	basePaths     []string
	addStart      int // offset of files found on disk but not in the baseline
	addN          int
	errs          []string // errors for the package found outside its files (a lockfile)
	bad           string   // why the package cannot be checked at all (an invalid name)
}

// Verify checks the Node project in dir (the folder with package.json,
// as deployed) and its dependencies in node_modules.
//
// Nothing is checked when dir is inside a git checkout (dir or a folder
// above it has .git): the report's Skipped says so. A dependency installed
// as a symbolic link is skipped; one whose lockfile entry (or
// package.json "_resolved") points at a local tarball or folder, or at
// git, is a local build; a dependency folder with its own .git is skipped.
//
// Known-good hashes come from the package's manifest (runtimetruth-files.json,
// else runspec-files.json), else from the snapshot in Store. Every file
// listed is hashed; any other file in the package folder is reported as
// added (its nested node_modules excluded). Symbolic links are checked by
// target against a snapshot, and against a manifest's links section as
// Manifest describes (per scope: project folder or dependency). For the project folder the
// snapshot, and the search for added files, leave out logs/, bin/,
// node_modules/ and package-lock.json at the top, and every name starting
// with "." at any depth; for a dependency only its nested node_modules is
// left out.
//
// The tree is read as someone else may have written it. Each file listed
// is opened beneath its package folder: one whose path leads out of it
// through a symbolic link on the way (lib -> /etc, lib/shadow listed) is
// an error for the package (ErrEscape) and is never read. package.json,
// the lockfiles and the manifests are read beneath their folder, never
// through a final symbolic link, only when regular files (a FIFO or
// device is refused without waiting on it) and only up to a size cap per
// kind; a file that fails so is an error for its package naming it (the
// project's package.json, an error of Verify; a lockfile, the project
// folder's, or each dependency's when the project folder is not checked).
func Verify(ctx context.Context, dir string, opts Options) (*integrity.Report, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("verify node project %s: %w", dir, err)
	}
	pkg, err := readPackageJSON(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("verify node project %s: %w", dir, ErrNotProject)
	}
	if err != nil {
		return nil, fmt.Errorf("verify node project %s: %w", dir, err)
	}
	rep := &integrity.Report{Root: abs}
	if git := gitCheckout(abs); git != "" {
		rep.Skipped = "git checkout at " + git
		return rep, nil
	}
	targets, err := selectTargets(abs, pkg, opts)
	if err != nil {
		return nil, err
	}
	locks, lockErrs := readLocks(abs)
	hasProject := false
	for i := range targets {
		hasProject = hasProject || targets[i].project
	}
	for i := range targets {
		// A lockfile is the project's: an error reading it is the
		// project folder's, or, when that is not checked, that of each
		// dependency classified without it.
		if t := &targets[i]; t.project || !hasProject {
			t.errs = lockErrs
		}
	}
	rep.Results = make([]integrity.Result, len(targets))
	var files []integrity.File
	var stateDir string
	if opts.Store != nil {
		stateDir = opts.Store.Dir()
	}
	for i := range targets {
		t := &targets[i]
		t.res = &rep.Results[i]
		if err := prepare(abs, t, locks, opts, stateDir, &files); err != nil {
			return nil, err
		}
	}
	stats, err := check(ctx, opts.Store, cacheScope(abs), files, opts)
	if err != nil {
		return nil, err
	}
	rep.SetStats(stats)
	for i := range targets {
		if err := finish(&targets[i], files, opts); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// gitCheckout returns the folder holding .git at or above dir, or "".
func gitCheckout(dir string) string {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

func selectTargets(project string, pkg *packageJSON, opts Options) ([]target, error) {
	name := pkg.Name
	if name == "" {
		name = filepath.Base(project)
	}
	proj := target{name: name, version: pkg.Version, dir: project, project: true}
	depDir := func(n string) string { return filepath.Join(project, "node_modules", filepath.FromSlash(n)) }
	var deps []target
	if opts.All {
		found, err := allPackages(filepath.Join(project, "node_modules"), "node_modules")
		if err != nil {
			return nil, err
		}
		deps = found
	} else {
		seen := map[string]bool{}
		add := func(m map[string]string, required bool) {
			names := make([]string, 0, len(m))
			for n := range m {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if seen[n] {
					continue
				}
				seen[n] = true
				if !validName(n) {
					deps = append(deps, target{name: n, bad: fmt.Sprintf("%v %q", ErrBadName, n)})
					continue
				}
				dir := depDir(n)
				if _, err := os.Lstat(dir); err != nil && !required {
					continue // optional or dev dependency not installed
				}
				deps = append(deps, target{name: n, dir: dir})
			}
		}
		add(pkg.Dependencies, true)
		add(pkg.OptionalDependencies, false)
		add(pkg.DevDependencies, false)
	}
	all := append([]target{proj}, deps...)
	if len(opts.Packages) == 0 {
		return all, nil
	}
	var out []target
	var missing []string
	for _, want := range opts.Packages {
		if !validName(want) {
			return nil, fmt.Errorf("%w: %q", ErrBadName, want)
		}
		found := false
		for _, t := range all {
			if t.name == want {
				out = append(out, t)
				found = true
			}
		}
		if !found {
			// A package that is not a direct dependency: look it up
			// directly under node_modules.
			dir := depDir(want)
			if _, err := os.Lstat(filepath.Join(dir, "package.json")); err == nil {
				out = append(out, target{name: want, dir: dir})
				continue
			}
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotInstalled, strings.Join(missing, ", "))
	}
	return out, nil
}

// allPackages lists the packages under a node_modules folder, nested
// node_modules included, in path order. rel is the folder's path relative
// to the project.
func allPackages(nm, rel string) ([]target, error) {
	ents, err := os.ReadDir(nm)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", nm, err)
	}
	var out []target
	visit := func(name, dir string, e fs.DirEntry) error {
		out = append(out, target{name: name, dir: dir})
		if e.Type()&fs.ModeSymlink != 0 {
			return nil // never descend into a linked package
		}
		nested, err := allPackages(filepath.Join(dir, "node_modules"), rel+"/"+name+"/node_modules")
		out = append(out, nested...)
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			continue
		}
		if strings.HasPrefix(n, "@") && e.IsDir() {
			scoped, err := os.ReadDir(filepath.Join(nm, n))
			if err != nil {
				return nil, fmt.Errorf("list %s: %w", filepath.Join(nm, n), err)
			}
			for _, s := range scoped {
				if err := visit(n+"/"+s.Name(), filepath.Join(nm, n, s.Name()), s); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := visit(n, filepath.Join(nm, n), e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// prepare classifies t, chooses its baseline and appends its files to
// files.
func prepare(project string, t *target, locks lockInfo, opts Options, stateDir string, files *[]integrity.File) error {
	r := t.res
	*r = integrity.Result{Name: t.name, Version: t.version, Location: t.dir, Status: integrity.StatusOK}
	skip := func(src integrity.Source, reason string) {
		r.Source, r.Status, r.Baseline, r.Reason = src, integrity.StatusSkipped, integrity.BaselineNone, reason
	}
	switch {
	case t.bad != "":
		r.Source, r.Status, r.Baseline, r.Reason = integrity.SourceIndex, integrity.StatusError, integrity.BaselineNone, t.bad
		return nil
	case t.project:
		r.Source = integrity.SourceProject
	default:
		fi, err := os.Lstat(t.dir)
		switch {
		case err != nil:
			r.Source, r.Status, r.Baseline, r.Reason = integrity.SourceIndex, integrity.StatusError, integrity.BaselineNone, "not installed"
			return nil
		case fi.Mode()&fs.ModeSymlink != 0:
			skip(integrity.SourceLink, "installed as a symbolic link")
			return nil
		}
		rel, _ := filepath.Rel(project, t.dir)
		entry := locks[filepath.ToSlash(rel)]
		pkg, err := readPackageJSON(t.dir)
		if err != nil {
			r.Source, r.Status, r.Baseline, r.Reason = integrity.SourceIndex, integrity.StatusError, integrity.BaselineNone, "read package.json: "+err.Error()
			return nil
		}
		if pkg.Name != "" {
			r.Name = pkg.Name
		}
		t.version, r.Version = pkg.Version, pkg.Version
		resolved := entry.Resolved
		if resolved == "" {
			resolved = pkg.Resolved
		}
		r.Source = classifyResolved(resolved)
		if entry.Link {
			skip(integrity.SourceLink, "installed as a link")
			return nil
		}
		if _, err := os.Lstat(filepath.Join(t.dir, ".git")); err == nil {
			skip(r.Source, "git checkout")
			return nil
		}
	}
	m, err := ReadManifest(t.dir)
	if err != nil {
		r.Status, r.Baseline, r.Reason = integrity.StatusError, integrity.BaselineManifest, err.Error()
		return nil
	}
	var baseline map[string]integrity.Digest
	switch {
	case m != nil:
		t.manifest, r.Baseline, baseline = m, integrity.BaselineManifest, m.Files
		if t.project {
			t.links = m.Links // nil without a links section: links are ignored
		}
	case opts.Store != nil && !opts.Resnapshot:
		snap, err := opts.Store.Snapshot(t.dir)
		if err != nil {
			return err
		}
		if snap != nil {
			t.snap, r.Baseline = snap, integrity.BaselineSnapshot
			baseline = map[string]integrity.Digest{}
			for p, h := range snap.Files {
				if target, ok := strings.CutPrefix(h, symlinkPrefix); ok {
					if t.links == nil {
						t.links = map[string]string{}
					}
					t.links[p] = target
					continue
				}
				d, err := integrity.ParseHex(h)
				if err != nil {
					snap = nil
					break
				}
				baseline[p] = d
			}
			if snap == nil {
				t.snap, baseline, t.links = nil, nil, nil
			}
		}
	}
	if baseline == nil {
		if opts.Store == nil || !opts.TakeSnapshots && !opts.Resnapshot {
			skip(r.Source, "no manifest and no snapshot yet")
			return nil
		}
		t.taking, r.Baseline = true, integrity.BaselineSnapshot
	}
	onDisk, err := packageFiles(t.dir, t.project, stateDir)
	if err != nil {
		r.Status, r.Reason = integrity.StatusError, err.Error()
		return nil
	}
	t.baseStart = len(*files)
	if t.taking {
		for _, p := range onDisk {
			*files = append(*files, integrity.File{Dir: t.dir, Rel: p})
		}
		t.baseN, t.basePaths = len(onDisk), onDisk
		return nil
	}
	paths := make([]string, 0, len(baseline)+len(t.links))
	for p := range baseline {
		paths = append(paths, p)
	}
	for p := range t.links {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := integrity.File{Dir: t.dir, Rel: p, Want: baseline[p]}
		if n, ok := t.wantSize(p); ok {
			// Size first: a file of another size is FileWrongSize, not
			// read (reported modified, observed "size:<bytes>").
			f.SetWantSize(n)
		}
		*files = append(*files, f)
	}
	t.baseN, t.basePaths = len(paths), paths
	t.addStart = len(*files)
	for _, p := range onDisk {
		_, isLink := t.links[p]
		if _, ok := baseline[p]; !ok && !isLink && !isManifestFile(p) {
			*files = append(*files, integrity.File{Dir: t.dir, Rel: p})
		}
	}
	t.addN = len(*files) - t.addStart
	return nil
}

// wantSize returns the size the manifest records for the file p, if it
// records one.
func (t *target) wantSize(p string) (int64, bool) {
	if t.manifest == nil {
		return 0, false
	}
	n, ok := t.manifest.Sizes[p]
	return n, ok
}

// symlinkPrefix marks a symbolic link in a snapshot: its value is
// "symlink:" followed by the link's target.
const symlinkPrefix = "symlink:"

// packageFiles lists the files in a package folder that belong to its
// snapshot: every regular file and symbolic link (the snapshot records a
// link by its target, so that one planted or redirected is reported),
// without the nested node_modules; for the project folder also without
// logs/, bin/ and package-lock.json at the top and dot-names anywhere
// (and the state directory, if inside). Sockets, FIFOs and devices hold
// no code and come and go with the processes using them: they are left
// out (as npm pack leaves them out of a manifest).
func packageFiles(dir string, project bool, stateDir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel := filepath.ToSlash(p[len(dir)+1:])
		name := d.Name()
		top := !strings.Contains(rel, "/")
		if d.IsDir() {
			switch {
			case top && name == "node_modules",
				project && top && (name == "logs" || name == "bin"),
				project && strings.HasPrefix(name, "."),
				stateDir != "" && p == stateDir:
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() && d.Type()&fs.ModeSymlink == 0 {
			return nil // socket, FIFO, device
		}
		if project && (strings.HasPrefix(name, ".") || top && name == "package-lock.json") {
			return nil
		}
		if top && isManifestFile(rel) {
			return nil
		}
		out = append(out, rel)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	sort.Strings(out)
	return out, nil
}

func finish(t *target, files []integrity.File, opts Options) error {
	r := t.res
	defer t.failFound()
	if r.Status == integrity.StatusSkipped || r.Status == integrity.StatusError {
		r.Finish(opts.Allow)
		return nil
	}
	var errs, escapes []string
	fail := func(f *integrity.File) {
		if errors.Is(f.Err, integrity.ErrOutsideRoot) {
			escapes = append(escapes, fmt.Sprintf("%v: %q", ErrEscape, f.Rel))
			return
		}
		errs = append(errs, fmt.Sprintf("%s: %v", f.Rel, f.Err))
	}
	failed := func() bool {
		if len(escapes)+len(errs) == 0 {
			return false
		}
		reasons := escapes
		if len(errs) > 0 {
			reasons = append(reasons, "cannot read "+strings.Join(errs, "; "))
		}
		r.Status, r.Reason = integrity.StatusError, strings.Join(reasons, "; ")
		return true
	}
	if t.taking {
		snap := &integrity.Snapshot{Dir: t.dir, Name: r.Name, Version: r.Version, Files: map[string]string{}}
		for i := t.baseStart; i < t.baseStart+t.baseN; i++ {
			f := &files[i]
			switch f.State {
			case integrity.FileHashed:
				snap.Files[f.Rel] = f.Got().String()
			case integrity.FileSymlink:
				target, err := readlink(t.dir, f.Rel)
				switch {
				case err == nil:
					snap.Files[f.Rel] = symlinkPrefix + target
				case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.EINVAL):
					errs = append(errs, fmt.Sprintf("%s: %v", f.Rel, err))
				}
			case integrity.FileNotRegular, integrity.FileMissing:
				// gone, or no longer a file, since the walk
			default:
				fail(f)
			}
		}
		if failed() {
			r.Finish(opts.Allow)
			return nil
		}
		if err := opts.Store.SaveSnapshot(snap); err != nil {
			return err
		}
		r.Files, r.SnapshotTaken = len(snap.Files), true
		r.Finish(opts.Allow)
		return nil
	}
	r.Files = t.baseN
	for i := t.baseStart; i < t.baseStart+t.baseN; i++ {
		f := &files[i]
		if f.State == integrity.FileError {
			fail(f)
			continue
		}
		if target, ok := t.links[f.Rel]; ok {
			c, changed, err := linkChange(t.dir, f, target)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %v", f.Rel, err))
			} else if changed {
				r.Changes = append(r.Changes, c)
			}
			continue
		}
		if c, changed := integrity.ChangeFor(f, f.Rel); changed {
			r.Changes = append(r.Changes, c)
		}
	}
	for i := t.addStart; i < t.addStart+t.addN; i++ {
		f := &files[i]
		observed := ""
		switch f.State {
		case integrity.FileHashed:
			observed = f.Got().String()
		case integrity.FileSymlink:
			observed = f.State.String()
			target, err := readlink(t.dir, f.Rel)
			if err == nil {
				observed = symlinkPrefix + target
			}
			if t.linkIgnored(f.Rel, target, err == nil) {
				continue
			}
		case integrity.FileNotRegular:
			observed = f.State.String()
		case integrity.FileMissing:
			continue // gone again since the walk
		default:
			fail(f)
			continue
		}
		r.Changes = append(r.Changes, integrity.Added(f.Rel, path.Join(filepath.ToSlash(t.dir), f.Rel), observed))
	}
	failed()
	r.Finish(opts.Allow)
	return nil
}

// failFound makes the errors found for the package outside its files
// (t.errs: a lockfile that could not be read) errors of its result, in
// front of any reason it has.
func (t *target) failFound() {
	if len(t.errs) == 0 {
		return
	}
	r := t.res
	reasons := append([]string(nil), t.errs...)
	if r.Reason != "" {
		reasons = append(reasons, r.Reason)
	}
	r.Status, r.Reason = integrity.StatusError, strings.Join(reasons, "; ")
}

// validName reports whether n is an npm package name as a folder under
// node_modules: "name" or "@scope/name", no component empty, "." or "..",
// no backslash or NUL. Anything else (a dependency "../../etc" in a
// package.json) would name a folder outside node_modules.
func validName(n string) bool {
	if strings.ContainsAny(n, "\\\x00") {
		return false
	}
	parts := strings.Split(n, "/")
	if len(parts) > 2 || len(parts) == 2 && !strings.HasPrefix(parts[0], "@") {
		return false
	}
	for _, p := range parts {
		if p == "" || p == "." || p == ".." || p == "@" {
			return false
		}
	}
	return true
}

// linkIgnored reports whether a symbolic link at rel (to target, when
// known) that the baseline does not list is left out of the added files.
// A snapshot records every link, so none is. With a manifest: in the
// project folder (deployed by copying, links and all) links are ignored
// when the manifest has no links section (an older manifest, or
// runspec-files.json), since it could not list them; with one, listed
// links are checked as baseline entries and any other is added. In a
// dependency npm installs no links from the tarball, so the links a
// manifest lists are not expected (never missing), one still there with
// the recorded target is accepted, and any other link is added, section
// or not.
func (t *target) linkIgnored(rel, target string, known bool) bool {
	switch {
	case t.manifest == nil:
		return false
	case t.project:
		return t.manifest.Links == nil
	}
	want, ok := t.manifest.Links[rel]
	return ok && known && want == target
}

// linkChange classifies a file the baseline records as a symbolic link to
// target: still a link to target is no change; a link elsewhere is
// modified (observed "symlink:NEW-TARGET"); a regular file or anything
// else in its place is modified, and none at all is missing.
func linkChange(dir string, f *integrity.File, target string) (integrity.Change, bool, error) {
	if f.State != integrity.FileSymlink {
		c, changed := integrity.ChangeFor(f, f.Rel) // a zero Want: any content is a change
		return c, changed, nil
	}
	got, err := readlink(dir, f.Rel)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			f.State = integrity.FileMissing
			c, changed := integrity.ChangeFor(f, f.Rel)
			return c, changed, nil
		}
		return integrity.Change{}, false, err
	}
	if got == target {
		return integrity.Change{}, false, nil
	}
	c, changed := integrity.ChangeFor(f, f.Rel)
	c.Observed = symlinkPrefix + got
	return c, changed, nil
}
