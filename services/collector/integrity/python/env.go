package python

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// Env is one Python environment: a virtual environment or a site-packages
// directory with the prefix it belongs to.
type Env struct {
	// Prefix is the environment root (sys.prefix). RECORD paths must stay
	// inside it.
	Prefix string
	// Sites are the site-packages directories scanned for distributions,
	// without duplicates (lib64 → lib is scanned once).
	Sites []string
	// Markers are the PEP 508 marker variables of the environment's
	// interpreter, derived from the environment's files and this host
	// without running anything (see Open). A variable that cannot be
	// derived is absent: Unknown says why. "extra" is always empty (which
	// extras were requested at install time is not recorded).
	Markers Environment
	// Unknown maps each marker variable missing from Markers to why it
	// is unknown ("no version in pyvenv.cfg and no lib/pythonX.Y folder").
	Unknown map[string]string
}

// OpenOptions tune Open. There are none: Open never runs anything of the
// environment, so there is nothing to tune. It is kept so that callers
// name it, for options to come.
type OpenOptions struct{}

// sitePathRE matches a site-packages directory below its prefix, with the
// folder of its interpreter (python3.11, pypy3.10) when there is one.
var sitePathRE = regexp.MustCompile(`^(?:lib|lib64|Lib)/((?:python|pypy)[0-9][^/]*)/(?:site|dist)-packages$|^Lib/site-packages$`)

// Open opens the environment at path: a virtual environment (a directory
// with pyvenv.cfg; its lib/python*/site-packages, lib/pypy*/site-packages
// and lib64/... are scanned) or a site-packages directory (whose prefix is
// inferred from a <prefix>/lib/pythonX.Y/site-packages or
// <prefix>/Lib/site-packages layout, else the directory itself; the
// prefix's pyvenv.cfg is read when there is one).
//
// Nothing of the environment runs: the environment is writable by others
// than whoever checks it, so its interpreter is never executed. The
// marker environment is derived from its files and this host instead:
// python_version, python_full_version and implementation_version from
// pyvenv.cfg's version or version_info (else python_version alone from
// the lib/pythonX.Y folder), implementation_name and
// platform_python_implementation from pyvenv.cfg's implementation or the
// folder (pypyX.Y is PyPy; else CPython), and os_name, sys_platform,
// platform_system, platform_machine, platform_release and
// platform_version from this host's uname. What cannot be derived is left
// unknown (Env.Unknown) rather than guessed: a dependency whose marker
// depends on it is reported as not evaluated (see Verify).
//
// pyvenv.cfg is read as every file of the environment is (see
// sysfile.ReadFileBeneath): a regular file of at most 64 KiB, no symbolic
// link followed; one that cannot be read (other than missing) fails Open.
func Open(_ context.Context, path string, _ OpenOptions) (*Env, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open python environment %s: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("open python environment %s: %w", path, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("open python environment %s: %w", path, ErrNotEnvironment)
	}
	e := &Env{Prefix: abs}
	cfg, err := readPyvenvCfg(abs)
	if err != nil {
		return nil, fmt.Errorf("open python environment %s: %w", path, err)
	}
	var dirs []string // the lib/ folders of the interpreter: python3.11
	if cfg != nil {
		e.Sites, dirs = venvSites(abs)
		if len(e.Sites) == 0 {
			return nil, fmt.Errorf("open python environment %s: %w: no site-packages", path, ErrNotEnvironment)
		}
	} else {
		e.Sites = []string{abs}
		parent := filepath.Dir(abs)
		for _, up := range []string{filepath.Dir(parent), filepath.Dir(filepath.Dir(parent))} {
			rel, err := filepath.Rel(up, abs)
			if err != nil {
				continue
			}
			if m := sitePathRE.FindStringSubmatch(filepath.ToSlash(rel)); m != nil {
				e.Prefix = up
				if m[1] != "" {
					dirs = []string{m[1]}
				}
				break
			}
		}
		if !hasDistInfo(abs) && e.Prefix == abs {
			return nil, fmt.Errorf("open python environment %s: %w", path, ErrNotEnvironment)
		}
		if e.Prefix != abs {
			if cfg, err = readPyvenvCfg(e.Prefix); err != nil {
				return nil, fmt.Errorf("open python environment %s: %w", path, err)
			}
		}
	}
	e.Markers, e.Unknown = deriveMarkers(cfg, dirs)
	return e, nil
}

// readPyvenvCfg reads and parses prefix/pyvenv.cfg; nil (and no error)
// when there is none.
func readPyvenvCfg(prefix string) (map[string]string, error) {
	data, err := sysfile.ReadFileBeneath(prefix, "pyvenv.cfg", maxPyvenvCfgSize)
	if sysfile.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	cfg, err := parsePyvenvCfg(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(prefix, "pyvenv.cfg"), err)
	}
	return cfg, nil
}

// venvSites lists a venv's site-packages directories, lib before lib64,
// dropping those that resolve to one already listed, with the folders
// under lib/ they are in (python3.11, pypy3.10).
func venvSites(prefix string) (sites, dirs []string) {
	seen := map[string]bool{}
	add := func(dir string) bool {
		resolved, err := filepath.EvalSymlinks(dir)
		if err != nil || seen[resolved] {
			return false
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return false
		}
		seen[resolved] = true
		sites = append(sites, dir)
		return true
	}
	for _, lib := range []string{"lib", "lib64"} {
		var matches []string
		for _, interp := range []string{"python*", "pypy*"} {
			m, _ := filepath.Glob(filepath.Join(prefix, lib, interp, "site-packages"))
			matches = append(matches, m...)
		}
		sort.Strings(matches)
		for _, m := range matches {
			if add(m) {
				dirs = append(dirs, filepath.Base(filepath.Dir(m)))
			}
		}
	}
	add(filepath.Join(prefix, "Lib", "site-packages"))
	return sites, dirs
}

func hasDistInfo(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".dist-info") {
			return true
		}
	}
	return false
}

// Distribution is one installed distribution.
type Distribution struct {
	// Name and Version are from METADATA (or the .dist-info directory
	// name when METADATA is unreadable).
	Name    string
	Version string
	// Key is the PEP 503 normalized name.
	Key string
	// Site is the site-packages directory holding it.
	Site string
	// InfoDir is the .dist-info (or .egg-info) directory.
	InfoDir string
	// Requires are the parsed Requires-Dist entries; entries that do not
	// parse are in BadRequires.
	Requires    []Requirement
	BadRequires []string
	// Direct is the PEP 610 direct_url.json, nil for an index install.
	Direct *DirectURL
	// DirectErr is why direct_url.json could not be read or parsed, if
	// it exists and could not.
	DirectErr error
	// MetadataErr is why METADATA could not be read or parsed.
	MetadataErr error
	// Err is why the distribution cannot be checked because one of its
	// metadata files exists but cannot be read safely: it is not a regular
	// file (a FIFO, a device, a symbolic link), is over its size cap, or
	// lies through a symbolic link outside its site-packages. Verify
	// reports it as an error, naming the file.
	Err error
	// EggInfo marks a legacy .egg-info distribution, which has no RECORD.
	EggInfo bool
}

// Source classifies the installation (PEP 610): no direct_url.json is an
// index install; dir_info with editable is editable; any other direct URL
// (local directory, wheel or archive, VCS) is a local build, and so is a
// direct_url.json that cannot be read or parsed (one that exists but
// cannot be read safely also makes the distribution an error: see Err).
func (d *Distribution) Source() integrity.Source {
	switch {
	case d.DirectErr != nil:
		return integrity.SourceLocalBuild
	case d.Direct == nil:
		return integrity.SourceIndex
	case d.Direct.DirInfo != nil && d.Direct.DirInfo.Editable:
		return integrity.SourceEditable
	}
	return integrity.SourceLocalBuild
}

// Distributions lists the distributions installed in the environment's
// site-packages directories, sorted by key (the first site wins when a
// name is installed twice).
func (e *Env) Distributions() ([]*Distribution, error) {
	var out []*Distribution
	seen := map[string]bool{}
	for _, site := range e.Sites {
		ents, err := os.ReadDir(site)
		if err != nil {
			return nil, fmt.Errorf("list distributions in %s: %w", site, err)
		}
		for _, ent := range ents {
			name := ent.Name()
			isDist := strings.HasSuffix(name, ".dist-info")
			if !isDist && !strings.HasSuffix(name, ".egg-info") {
				continue
			}
			dir := filepath.Join(site, name)
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				continue
			}
			d := readDistribution(site, dir, !isDist)
			if seen[d.Key] {
				continue
			}
			seen[d.Key] = true
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// readDistribution reads the distribution whose metadata directory is
// dir, in site: its METADATA (PKG-INFO for .egg-info) and
// direct_url.json, each read beneath site (see sysfile.ReadFileBeneath).
func readDistribution(site, dir string, egg bool) *Distribution {
	d := &Distribution{Site: site, InfoDir: dir, EggInfo: egg}
	base := filepath.Base(dir)
	stem := strings.TrimSuffix(strings.TrimSuffix(base, ".dist-info"), ".egg-info")
	d.Name, d.Version, _ = strings.Cut(stem, "-")
	if i := strings.IndexByte(d.Version, '-'); i >= 0 && egg {
		d.Version = d.Version[:i] // name-1.0-py3.11.egg-info
	}
	metaFile := "METADATA"
	if egg {
		metaFile = "PKG-INFO"
	}
	data, err := sysfile.ReadFileBeneath(site, base+"/"+metaFile, maxMetadataSize)
	switch {
	case err == nil:
		var m *Metadata
		if m, err = ParseMetadata(data); err == nil {
			d.Name, d.Version = m.Name, m.Version
			for _, r := range m.RequiresDist {
				req, err := ParseRequirement(r)
				if err != nil {
					d.BadRequires = append(d.BadRequires, r)
					continue
				}
				d.Requires = append(d.Requires, req)
			}
		}
	case !sysfile.IsNotExist(err):
		d.Err = fmt.Errorf("read %s: %w", metaFile, err)
	}
	d.MetadataErr = err
	d.Key = normalizeName(d.Name)
	if !egg {
		d.Direct, d.DirectErr = readDirectURL(site, base+"/direct_url.json")
		if d.DirectErr != nil && !errors.Is(d.DirectErr, errBadDirectURL) && d.Err == nil {
			d.Err = fmt.Errorf("read direct_url.json: %w", d.DirectErr)
		}
	}
	return d
}

// DirectURL is PEP 610's direct_url.json.
type DirectURL struct {
	URL     string `json:"url"`
	DirInfo *struct {
		Editable bool `json:"editable"`
	} `json:"dir_info,omitempty"`
	ArchiveInfo *struct {
		Hash   string            `json:"hash,omitempty"`
		Hashes map[string]string `json:"hashes,omitempty"`
	} `json:"archive_info,omitempty"`
	VCSInfo *struct {
		VCS               string `json:"vcs"`
		CommitID          string `json:"commit_id"`
		RequestedRevision string `json:"requested_revision,omitempty"`
	} `json:"vcs_info,omitempty"`
}

// Kind returns "editable", "dir", "archive" or "vcs".
func (u *DirectURL) Kind() string {
	switch {
	case u.DirInfo != nil && u.DirInfo.Editable:
		return "editable"
	case u.DirInfo != nil:
		return "dir"
	case u.ArchiveInfo != nil:
		return "archive"
	case u.VCSInfo != nil:
		return "vcs"
	}
	return ""
}

// errBadDirectURL marks a direct_url.json that was read but does not
// parse: a local build (see Distribution.Source), not an error.
var errBadDirectURL = errors.New("direct_url.json")

// ParseDirectURL parses direct_url.json: an object with a url and exactly
// one of dir_info, archive_info and vcs_info.
func ParseDirectURL(data []byte) (*DirectURL, error) {
	var u DirectURL
	if err := json.Unmarshal(data, &u); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadDirectURL, err)
	}
	n := 0
	for _, set := range []bool{u.DirInfo != nil, u.ArchiveInfo != nil, u.VCSInfo != nil} {
		if set {
			n++
		}
	}
	if u.URL == "" || n != 1 {
		return nil, fmt.Errorf("%w: want a url and exactly one of dir_info, archive_info, vcs_info", errBadDirectURL)
	}
	return &u, nil
}

// readDirectURL reads and parses the direct_url.json rel beneath site;
// nil (and no error) when there is none.
func readDirectURL(site, rel string) (*DirectURL, error) {
	data, err := sysfile.ReadFileBeneath(site, rel, maxDirectURLSize)
	if sysfile.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseDirectURL(data)
}
