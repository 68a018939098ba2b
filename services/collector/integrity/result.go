package integrity

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// Status is the outcome of checking one package.
type Status string

// The package statuses.
const (
	// StatusOK means every checked file matches (expected changes
	// included).
	StatusOK Status = "ok"
	// StatusModified means at least one file changed unexpectedly.
	StatusModified Status = "modified"
	// StatusSkipped means the package was deliberately not checked
	// (editable or symlinked install, git checkout, no baseline yet).
	StatusSkipped Status = "skipped"
	// StatusError means the package could not be checked (Reason says
	// why), e.g. a RECORD path escaping the environment.
	StatusError Status = "error"
)

// Source says where a package's installed code came from.
type Source string

// The package sources.
const (
	// SourceIndex is a package installed from a package index (no PEP 610
	// direct_url.json; an npm registry tarball).
	SourceIndex Source = "index"
	// SourceLocalBuild is a package built or unpacked from a local
	// directory, a wheel or archive, or a VCS checkout: its code may never
	// have been published.
	SourceLocalBuild Source = "local build"
	// SourceEditable is a pip editable install (PEP 660): not checked.
	SourceEditable Source = "editable"
	// SourceLink is an npm dependency installed as a symbolic link: not
	// checked.
	SourceLink Source = "link"
	// SourceProject is the Node project folder itself.
	SourceProject Source = "project"
)

// Baseline says where a package's known-good hashes came from.
type Baseline string

// The baselines.
const (
	// BaselineRecord is pip's .dist-info/RECORD.
	BaselineRecord Baseline = "RECORD"
	// BaselineManifest is a file manifest shipped in the package.
	BaselineManifest Baseline = "manifest"
	// BaselineSnapshot is a snapshot taken on first check.
	BaselineSnapshot Baseline = "snapshot"
	// BaselineNone means there are no known-good hashes yet.
	BaselineNone Baseline = "none"
)

// ChangeKind classifies one changed file.
type ChangeKind string

// The change kinds.
const (
	// ChangeModified means the content differs (or its size, which then
	// was not read, or the path is now a symbolic link, directory or other
	// non-regular file).
	ChangeModified ChangeKind = "modified"
	// ChangeMissing means a listed file no longer exists.
	ChangeMissing ChangeKind = "missing"
	// ChangeAdded means a file not in the baseline appeared (manifest and
	// snapshot baselines only).
	ChangeAdded ChangeKind = "added"
	// ChangeExpected means the change matches an Allowlist entry; Actual
	// holds the underlying kind and Reason the entry's reason.
	ChangeExpected ChangeKind = "expected"
)

// Change is one changed file.
type Change struct {
	// Path is the file as the baseline lists it.
	Path string `json:"path"`
	// Kind classifies the change.
	Kind ChangeKind `json:"kind"`
	// Actual is the underlying kind of an expected change.
	Actual ChangeKind `json:"actual,omitempty"`
	// Reason is the allowlist reason of an expected change.
	Reason string `json:"reason,omitempty"`
	// Observed is what is on disk now: "<algorithm>:<hex>", "size:<bytes>"
	// (a file not of its known-good size, not read), "symlink", "not a
	// regular file", or "" when missing.
	Observed string `json:"observed,omitempty"`

	abs string // absolute path, for absolute allowlist patterns
}

// Label renders the change as shown to people: "modified",
// "modified (expected: REASON)", ...
func (c Change) Label() string {
	if c.Kind == ChangeExpected {
		return string(c.Actual) + " (expected: " + c.Reason + ")"
	}
	return string(c.Kind)
}

// Result is the outcome of checking one package.
type Result struct {
	// Name is the package name as the package declares it.
	Name string `json:"name"`
	// Version is the installed version.
	Version string `json:"version"`
	// Location is the package's metadata or install directory.
	Location string `json:"location"`
	// Source is where the code came from.
	Source Source `json:"source"`
	// Baseline is where the known-good hashes came from.
	Baseline Baseline `json:"baseline"`
	// Status is the outcome.
	Status Status `json:"status"`
	// Reason explains a skipped or error status.
	Reason string `json:"reason,omitempty"`
	// Files is how many files were checked against a known-good hash.
	Files int `json:"files"`
	// Unchecked is how many listed entries carry no hash (RECORD itself,
	// byte-code) and so were not checked.
	Unchecked int `json:"unchecked"`
	// Changes lists changed files sorted by path, expected ones included.
	Changes []Change `json:"changes,omitempty"`
	// ChangeDigest identifies the set of unexpected changes (see Finish);
	// empty when there are none.
	ChangeDigest string `json:"change_digest,omitempty"`
	// SnapshotTaken reports that this check took the package's first-run
	// snapshot.
	SnapshotTaken bool `json:"snapshot_taken,omitempty"`
}

// Unexpected returns the changes that are not expected.
func (r *Result) Unexpected() []Change {
	var out []Change
	for _, c := range r.Changes {
		if c.Kind != ChangeExpected {
			out = append(out, c)
		}
	}
	return out
}

// ChangedAt returns when what r's unexpected changes touched last changed
// status: the latest ctime (nanoseconds since the epoch) of each modified
// or added file and of the folder of each missing one; 0 when none can be
// read (or the platform keeps no ctime). A change that comes back after
// another (A, then B, then A again) was written again, so it has a later
// ChangedAt than its first occurrence, while a second look at the same
// occurrence (a retry, another check of the same environment) has the same.
func (r *Result) ChangedAt() int64 {
	var latest int64
	var p sysfile.Path
	var st sysfile.Stat
	for _, c := range r.Changes {
		if c.Kind == ChangeExpected || c.abs == "" {
			continue
		}
		path := c.abs
		if c.Kind == ChangeMissing {
			path = filepath.Dir(path)
		}
		p.Set("", path)
		if sysfile.Lstat(&p, &st) == nil {
			latest = max(latest, st.Ctime)
		}
	}
	return latest
}

// Finish sorts and de-duplicates Changes, applies allow (which may be nil)
// to them, sets Status (unless it is already skipped or error) and computes
// ChangeDigest.
//
// The change digest is the lowercase hex SHA-256 of
//
//	name "\n" version "\n"
//	then for each unexpected change, sorted by path:
//	path "\x00" kind "\x00" observed "\n"
//
// so it is stable across checks while the same files stay changed the
// same way, and any further edit (or reverting one file) yields a new one;
// except that a file not of its known-good size is observed by its size
// alone (it is not read), so an edit that keeps that wrong size is the
// same change.
func (r *Result) Finish(allow *Allowlist) {
	sort.Slice(r.Changes, func(i, j int) bool {
		if r.Changes[i].Path != r.Changes[j].Path {
			return r.Changes[i].Path < r.Changes[j].Path
		}
		return r.Changes[i].Kind < r.Changes[j].Kind
	})
	out := r.Changes[:0]
	for i, c := range r.Changes {
		if i > 0 && c == r.Changes[i-1] {
			continue
		}
		if c.Kind != ChangeExpected {
			if reason, ok := allow.MatchFile(r.Name, c.Path, c.abs); ok {
				c.Actual, c.Kind, c.Reason = c.Kind, ChangeExpected, reason
			}
		}
		out = append(out, c)
	}
	r.Changes = out
	h := sha256.New()
	n := 0
	h.Write([]byte(r.Name + "\n" + r.Version + "\n"))
	for _, c := range r.Changes {
		if c.Kind == ChangeExpected {
			continue
		}
		n++
		h.Write([]byte(c.Path + "\x00" + string(c.Kind) + "\x00" + c.Observed + "\n"))
	}
	r.ChangeDigest = ""
	if n > 0 {
		r.ChangeDigest = hex.EncodeToString(h.Sum(nil))
	}
	if r.Status == StatusSkipped || r.Status == StatusError {
		return
	}
	r.Status = StatusOK
	if n > 0 {
		r.Status = StatusModified
	}
}

// ChangeFor classifies a checked file against its known-good digest; ok is
// false when the file matches. Files in FileError or FilePending state are
// not changes (the caller reports them as errors). path is the file as the
// baseline lists it.
func ChangeFor(f *File, path string) (c Change, ok bool) {
	c, ok = changeFor(f, path)
	if ok {
		c.abs = f.Path()
	}
	return c, ok
}

// Added returns the change for a file that is not in the baseline; abs is
// its absolute path and observed what is there ("sha256:<hex>", "symlink").
func Added(path, abs, observed string) Change {
	return Change{Path: path, Kind: ChangeAdded, Observed: observed, abs: abs}
}

func changeFor(f *File, path string) (Change, bool) {
	switch f.State {
	case FileHashed:
		if f.gotWant {
			return Change{}, false
		}
		return Change{Path: path, Kind: ChangeModified, Observed: f.Got().String()}, true
	case FileMissing:
		return Change{Path: path, Kind: ChangeMissing}, true
	case FileSymlink:
		return Change{Path: path, Kind: ChangeModified, Observed: "symlink"}, true
	case FileNotRegular:
		return Change{Path: path, Kind: ChangeModified, Observed: "not a regular file"}, true
	case FileWrongSize:
		return Change{Path: path, Kind: ChangeModified, Observed: "size:" + strconv.FormatInt(f.Size, 10)}, true
	}
	return Change{}, false
}

// Report is the outcome of one check of an environment or project.
type Report struct {
	// Root is the environment or project checked.
	Root string `json:"root"`
	// Skipped explains why nothing was checked (e.g. a git checkout).
	Skipped string `json:"skipped,omitempty"`
	// Results has one entry per package, in check order.
	Results []Result `json:"results"`
	// Full reports that the stat cache was bypassed.
	Full bool `json:"full"`
	// Hashed and Cached count files read and hashed versus taken from
	// the stat cache.
	Hashed int `json:"hashed"`
	Cached int `json:"cached"`
	// CacheError is why the stat cache could not be saved; the check
	// itself stands.
	CacheError string `json:"cache_error,omitempty"`
}

// SetStats records how the check ran: full or not, files hashed and
// cached, and the stat cache's error, if any.
func (r *Report) SetStats(st CheckStats) {
	r.Full, r.Hashed, r.Cached = st.Full, st.Hashed, st.Cached
	if st.CacheErr != nil {
		r.CacheError = st.CacheErr.Error()
	}
}

// Modified returns the results with status modified.
func (r *Report) Modified() []Result { return r.with(StatusModified) }

// Errors returns the results with status error.
func (r *Report) Errors() []Result { return r.with(StatusError) }

func (r *Report) with(s Status) []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Status == s {
			out = append(out, res)
		}
	}
	return out
}

// Summary renders a one-line count of the report's outcomes.
func (r *Report) Summary() string {
	if r.Skipped != "" {
		return "skipped: " + r.Skipped
	}
	counts := map[Status]int{}
	for _, res := range r.Results {
		counts[res.Status]++
	}
	return strconv.Itoa(len(r.Results)) + " checked, " + strconv.Itoa(counts[StatusModified]) + " modified, " +
		strconv.Itoa(counts[StatusError]) + " error, " + strconv.Itoa(counts[StatusSkipped]) + " skipped"
}
