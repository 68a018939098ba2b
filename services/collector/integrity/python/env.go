package python

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/subproc"
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
	// Python is the interpreter that reported Markers, or "" when they
	// were derived without running one.
	Python string
	// Markers are the PEP 508 marker variables of the target interpreter;
	// "extra" is always empty (which extras were requested at install
	// time is not recorded).
	Markers Environment
}

// OpenOptions tune Open.
type OpenOptions struct {
	// NoExec derives the marker environment from pyvenv.cfg or the
	// site-packages path and this host's platform instead of running the
	// environment's interpreter.
	NoExec bool
	// Python overrides the interpreter run for the marker environment.
	Python string
	// Timeout bounds the interpreter run; 0 means 10 seconds.
	Timeout time.Duration
}

// probeScript prints the marker environment as JSON. It runs with -I -S:
// isolated (no PYTHON* variables, no user site, no current directory on
// sys.path) and without importing site, so no .pth file of the checked
// environment runs.
const probeScript = `import json, os, platform, sys
def fmt(info):
    v = "%d.%d.%d" % (info.major, info.minor, info.micro)
    if info.releaselevel != "final":
        v += info.releaselevel[0] + str(info.serial)
    return v
print(json.dumps({
    "implementation_name": sys.implementation.name,
    "implementation_version": fmt(sys.implementation.version),
    "os_name": os.name,
    "platform_machine": platform.machine(),
    "platform_release": platform.release(),
    "platform_system": platform.system(),
    "platform_version": platform.version(),
    "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]),
    "sys_platform": sys.platform,
}))
`

var sitePathRE = regexp.MustCompile(`^(?:lib|lib64|Lib)/(python[0-9][^/]*)/(?:site|dist)-packages$|^Lib/site-packages$`)

// Open opens the environment at path: a virtual environment (a directory
// with pyvenv.cfg; its lib/python*/site-packages and lib64/... are
// scanned) or a site-packages directory (whose prefix is inferred from a
// <prefix>/lib/pythonX.Y/site-packages or <prefix>/Lib/site-packages
// layout, else the directory itself).
//
// The marker environment comes from running the environment's interpreter
// once (bin/python, or <prefix>/bin/pythonX.Y for a site-packages
// directory) with -I -S and a short script; with NoExec, when there is no
// interpreter, or when it fails, it is derived instead: python_version and
// python_full_version from pyvenv.cfg's version (or the pythonX.Y
// directory name, full version X.Y.0), CPython, and this host's OS and
// machine (os_name, sys_platform, platform_system, platform_machine,
// platform_release and platform_version from uname).
func Open(ctx context.Context, path string, opts OpenOptions) (*Env, error) {
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
	e := &Env{}
	var version string
	if cfg, err := readPyvenvCfg(filepath.Join(abs, "pyvenv.cfg")); err == nil {
		e.Prefix = abs
		version = cfg["version"]
		if version == "" {
			version = cfg["version_info"]
		}
		e.Sites = venvSites(abs)
		if len(e.Sites) == 0 {
			return nil, fmt.Errorf("open python environment %s: %w: no site-packages", path, ErrNotEnvironment)
		}
	} else {
		e.Sites = []string{abs}
		e.Prefix = abs
		parent := filepath.Dir(abs)
		for _, up := range []string{filepath.Dir(parent), filepath.Dir(filepath.Dir(parent))} {
			rel, err := filepath.Rel(up, abs)
			if err != nil {
				continue
			}
			if m := sitePathRE.FindStringSubmatch(filepath.ToSlash(rel)); m != nil {
				e.Prefix = up
				if m[1] != "" {
					version = strings.TrimPrefix(m[1], "python")
				}
				break
			}
		}
		if !hasDistInfo(abs) && e.Prefix == abs {
			return nil, fmt.Errorf("open python environment %s: %w", path, ErrNotEnvironment)
		}
	}
	if !opts.NoExec {
		py := opts.Python
		if py == "" {
			py = findPython(e.Prefix, version)
		}
		if py != "" {
			if m, err := probe(ctx, py, opts.Timeout); err == nil {
				e.Python, e.Markers = py, m
			}
		}
	}
	if e.Markers == nil {
		e.Markers = derivedMarkers(version)
	}
	e.Markers["extra"] = ""
	return e, nil
}

func readPyvenvCfg(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			cfg[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return cfg, nil
}

// venvSites lists a venv's site-packages directories, lib before lib64,
// dropping those that resolve to one already listed.
func venvSites(prefix string) []string {
	var sites []string
	seen := map[string]bool{}
	add := func(dir string) {
		resolved, err := filepath.EvalSymlinks(dir)
		if err != nil || seen[resolved] {
			return
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return
		}
		seen[resolved] = true
		sites = append(sites, dir)
	}
	for _, lib := range []string{"lib", "lib64"} {
		matches, _ := filepath.Glob(filepath.Join(prefix, lib, "python*", "site-packages"))
		sort.Strings(matches)
		for _, m := range matches {
			add(m)
		}
	}
	add(filepath.Join(prefix, "Lib", "site-packages"))
	return sites
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

func findPython(prefix, version string) string {
	var cands []string
	if runtime.GOOS == "windows" {
		cands = []string{filepath.Join(prefix, "Scripts", "python.exe"), filepath.Join(prefix, "python.exe")}
	} else {
		if mm := majorMinor(version); mm != "" {
			cands = append(cands, filepath.Join(prefix, "bin", "python"+mm))
		}
		cands = append(cands, filepath.Join(prefix, "bin", "python3"), filepath.Join(prefix, "bin", "python"))
	}
	for _, c := range cands {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return c
		}
	}
	return ""
}

func majorMinor(version string) string {
	parts := strings.SplitN(version, ".", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "." + parts[1]
}

func probe(ctx context.Context, python string, timeout time.Duration) (Environment, error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	out, err := subproc.Command{
		Path: python, Args: []string{"-I", "-S", "-c", probeScript},
		Timeout: timeout, MaxStdout: 1 << 16,
	}.Run(ctx)
	if err != nil {
		return nil, err
	}
	var m map[string]string
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("%s printed no marker environment: %w", python, err)
	}
	if m["python_version"] == "" {
		return nil, errors.New(python + " printed no python_version")
	}
	return Environment(m), nil
}

// derivedMarkers builds the marker environment without an interpreter.
func derivedMarkers(version string) Environment {
	full := version
	if i := strings.Index(full, ".final"); i >= 0 {
		full = full[:i] // version_info = 3.12.1.final.0
	}
	if strings.Count(full, ".") == 1 {
		full += ".0"
	}
	env := Environment{
		"implementation_name":            "cpython",
		"implementation_version":         full,
		"platform_python_implementation": "CPython",
		"python_full_version":            full,
		"python_version":                 majorMinor(full),
		"os_name":                        "posix",
		"sys_platform":                   runtime.GOOS,
		"platform_system":                platformSystem(),
		"platform_machine":               platformMachine(),
	}
	switch runtime.GOOS {
	case "windows":
		env["os_name"], env["sys_platform"] = "nt", "win32"
	case "freebsd", "openbsd", "netbsd":
		major, _, _ := strings.Cut(unameRelease(), ".")
		env["sys_platform"] = runtime.GOOS + major
	}
	env["platform_release"], env["platform_version"] = unameRelease(), unameVersion()
	return env
}

func platformSystem() string {
	switch runtime.GOOS {
	case "linux":
		return "Linux"
	case "darwin":
		return "Darwin"
	case "windows":
		return "Windows"
	case "freebsd":
		return "FreeBSD"
	}
	return runtime.GOOS
}

func platformMachine() string {
	switch runtime.GOARCH {
	case "amd64":
		if runtime.GOOS == "windows" {
			return "AMD64"
		}
		return "x86_64"
	case "arm64":
		if runtime.GOOS == "linux" {
			return "aarch64"
		}
		return "arm64"
	case "386":
		return "i686"
	}
	return runtime.GOARCH
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
	// DirectErr is why direct_url.json could not be read, if it exists
	// and could not.
	DirectErr error
	// MetadataErr is why METADATA could not be read.
	MetadataErr error
	// EggInfo marks a legacy .egg-info distribution, which has no RECORD.
	EggInfo bool
}

// Source classifies the installation (PEP 610): no direct_url.json is an
// index install; dir_info with editable is editable; any other direct URL
// (local directory, wheel or archive, VCS) is a local build, and so is a
// direct_url.json that cannot be read.
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
	data, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err == nil {
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
	}
	d.MetadataErr = err
	d.Key = normalizeName(d.Name)
	if !egg {
		d.Direct, d.DirectErr = readDirectURL(filepath.Join(dir, "direct_url.json"))
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

// ParseDirectURL parses direct_url.json: an object with a url and exactly
// one of dir_info, archive_info and vcs_info.
func ParseDirectURL(data []byte) (*DirectURL, error) {
	var u DirectURL
	if err := json.Unmarshal(data, &u); err != nil {
		return nil, fmt.Errorf("direct_url.json: %w", err)
	}
	n := 0
	for _, set := range []bool{u.DirInfo != nil, u.ArchiveInfo != nil, u.VCSInfo != nil} {
		if set {
			n++
		}
	}
	if u.URL == "" || n != 1 {
		return nil, errors.New("direct_url.json: want a url and exactly one of dir_info, archive_info, vcs_info")
	}
	return &u, nil
}

func readDirectURL(path string) (*DirectURL, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseDirectURL(data)
}
