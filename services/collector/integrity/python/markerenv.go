package python

import (
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parsePyvenvCfg parses pyvenv.cfg as CPython's site module reads it:
// every line holding "=" is a key (trimmed, lower-cased) and a value
// (trimmed) split at the first "="; other lines are ignored, and a later
// key replaces an earlier one. Lines end with "\n", "\r\n" or "\r". A file
// with a NUL byte or that is not UTF-8 (which Python itself refuses) is
// an error.
func parsePyvenvCfg(data []byte) (map[string]string, error) {
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("%w: not UTF-8", ErrBadPyvenvCfg)
	}
	text := string(data)
	if strings.IndexByte(text, 0) >= 0 {
		return nil, fmt.Errorf("%w: NUL byte", ErrBadPyvenvCfg)
	}
	cfg := map[string]string{}
	for line := range strings.FieldsFuncSeq(text, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if k, v, ok := strings.Cut(line, "="); ok {
			cfg[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
	}
	return cfg, nil
}

// pyVersion is a Python version as the marker variables need it.
type pyVersion struct {
	major, minor, micro int
	micro0              bool   // micro is known
	level               string // "" for a final release, else "a", "b" or "rc"
	serial              int
}

// pyVersionRE matches pyvenv.cfg's version ("3.11.4", venv), version_info
// ("3.11.4.final.0", virtualenv; "3.12.1", uv), python_version-style
// "3.13.0rc1", and a bare "3.11".
var pyVersionRE = regexp.MustCompile(`^([0-9]{1,4})\.([0-9]{1,4})(?:\.([0-9]{1,4})` +
	`(?:(a|b|rc)([0-9]{1,4})|\.(final|alpha|beta|candidate)\.([0-9]{1,4}))?)?$`)

func parsePyVersion(s string) (pyVersion, bool) {
	m := pyVersionRE.FindStringSubmatch(s)
	if m == nil {
		return pyVersion{}, false
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	v := pyVersion{major: atoi(m[1]), minor: atoi(m[2])}
	if m[3] != "" {
		v.micro, v.micro0 = atoi(m[3]), true
	}
	switch {
	case m[4] != "":
		v.level, v.serial = m[4], atoi(m[5])
	case m[6] != "" && m[6] != "final":
		v.level, v.serial = map[string]string{"alpha": "a", "beta": "b", "candidate": "rc"}[m[6]], atoi(m[7])
	}
	return v, true
}

func (v pyVersion) majorMinor() string { return strconv.Itoa(v.major) + "." + strconv.Itoa(v.minor) }

// full is platform.python_version(): "3.11.4", "3.13.0rc1".
func (v pyVersion) full() string {
	return v.majorMinor() + "." + strconv.Itoa(v.micro) + v.level + v.serialText()
}

// implementation is PEP 508's format_full_version of
// sys.implementation.version, for CPython: "3.11.4", "3.13.0c1".
func (v pyVersion) implementation() string {
	level := v.level
	if level == "rc" {
		level = "c"
	}
	return v.majorMinor() + "." + strconv.Itoa(v.micro) + level + v.serialText()
}

func (v pyVersion) serialText() string {
	if v.level == "" {
		return ""
	}
	return strconv.Itoa(v.serial)
}

// interpreterDirRE matches the folder under lib/ that holds an
// interpreter's site-packages: python3.11, python3.13t (free-threaded),
// pypy3.10; a bare python3 (Debian's /usr/lib/python3) names no minor
// version.
var interpreterDirRE = regexp.MustCompile(`^(python|pypy)([0-9]+)(?:\.([0-9]+))?t?$`)

// implementations maps pyvenv.cfg's implementation (virtualenv and uv
// write platform.python_implementation()) to sys.implementation.name.
var implementations = map[string]string{"cpython": "cpython", "pypy": "pypy", "graalvm": "graalpy"}

// deriveMarkers returns the PEP 508 marker variables of an environment
// from its files alone, nothing run: cfg is its pyvenv.cfg (nil when it
// has none) and dirs the folders under lib/ its site-packages are in
// (python3.11, pypy3.10). A variable that cannot be known is left out of
// the environment, and unknown says why.
//
//   - python_version, python_full_version: pyvenv.cfg's version (or
//     version_info); else the one lib/pythonX.Y folder, which gives
//     python_version only. A pyvenv.cfg version that no lib/ folder
//     agrees with, or several folders and no pyvenv.cfg version, leave
//     them unknown.
//   - implementation_name, platform_python_implementation: pyvenv.cfg's
//     implementation, else the folder (pypyX.Y is PyPy), else CPython.
//   - implementation_version: python_full_version for CPython (in PEP
//     508's format), unknown for any other implementation.
//   - os_name, sys_platform, platform_system, platform_machine,
//     platform_release, platform_version: this host (uname).
//   - extra: "" (the extras requested at install time are not recorded).
func deriveMarkers(cfg map[string]string, dirs []string) (env Environment, unknown map[string]string) {
	env, unknown = Environment{"extra": ""}, map[string]string{}
	missing := func(why string, vars ...string) {
		for _, v := range vars {
			unknown[v] = why
		}
	}

	// What the lib/ folders say.
	var dirVersions []string // "X.Y", sorted, without duplicates
	dirImpl := ""            // "PyPy" or "CPython" when every folder agrees
	for _, d := range dirs {
		m := interpreterDirRE.FindStringSubmatch(d)
		if m == nil {
			continue
		}
		impl := map[string]string{"python": "CPython", "pypy": "PyPy"}[m[1]]
		if dirImpl == "" {
			dirImpl = impl
		} else if dirImpl != impl {
			dirImpl = "mixed"
		}
		if m[3] != "" {
			if mm := m[2] + "." + m[3]; !slices.Contains(dirVersions, mm) {
				dirVersions = append(dirVersions, mm)
			}
		}
	}
	slices.Sort(dirVersions)

	// Implementation.
	impl, implFrom := "CPython", ""
	switch cfgImpl := cfg["implementation"]; {
	case cfgImpl != "":
		impl, implFrom = cfgImpl, "pyvenv.cfg"
		if dirImpl != "" && dirImpl != "mixed" && !strings.EqualFold(dirImpl, cfgImpl) {
			impl, implFrom = "", fmt.Sprintf("pyvenv.cfg says implementation %s, its lib/ folder %s", quoteValue(cfgImpl), dirImpl)
		}
	case dirImpl == "mixed":
		impl, implFrom = "", "lib/ holds both python and pypy folders"
	case dirImpl != "":
		impl = dirImpl
	}
	name := implementations[strings.ToLower(impl)]
	switch {
	case impl == "":
		missing(implFrom, "implementation_name", "platform_python_implementation", "implementation_version")
	case name == "":
		env["platform_python_implementation"] = impl
		missing("implementation "+quoteValue(impl)+" has no known sys.implementation.name", "implementation_name", "implementation_version")
	default:
		env["platform_python_implementation"], env["implementation_name"] = impl, name
	}

	// Version.
	versionVars := []string{"python_version", "python_full_version"}
	if name == "cpython" {
		versionVars = append(versionVars, "implementation_version")
	} else if name != "" {
		missing(impl+"'s own version is not recorded in the environment's files", "implementation_version")
	}
	key, text := "version", cfg["version"]
	if text == "" {
		key, text = "version_info", cfg["version_info"]
	}
	switch v, ok := parsePyVersion(text); {
	case text != "" && !ok:
		missing(fmt.Sprintf("pyvenv.cfg %s %s is not a Python version", key, quoteValue(text)), versionVars...)
	case text != "" && len(dirVersions) > 0 && !slices.Contains(dirVersions, v.majorMinor()):
		missing(fmt.Sprintf("pyvenv.cfg %s %s disagrees with lib/, which holds Python %s", key, quoteValue(text), strings.Join(dirVersions, ", ")), versionVars...)
	case text != "" && !v.micro0:
		env["python_version"] = v.majorMinor()
		missing(fmt.Sprintf("pyvenv.cfg %s %s has no micro version", key, quoteValue(text)), versionVars[1:]...)
	case text != "":
		env["python_version"], env["python_full_version"] = v.majorMinor(), v.full()
		if name == "cpython" {
			env["implementation_version"] = v.implementation()
		}
	case len(dirVersions) == 1:
		env["python_version"] = dirVersions[0]
		missing("only the lib/python"+dirVersions[0]+" folder gives the version, not its micro version", versionVars[1:]...)
	case len(dirVersions) > 1:
		missing("no version in pyvenv.cfg, and lib/ holds several: Python "+strings.Join(dirVersions, ", "), versionVars...)
	default:
		missing("no version in pyvenv.cfg and no lib/pythonX.Y folder", versionVars...)
	}

	hostMarkers(env, missing)
	return env, unknown
}

// hostMarkers sets the marker variables of this host: os_name,
// sys_platform and, from uname, platform_system, platform_machine,
// platform_release and platform_version.
func hostMarkers(env Environment, missing func(why string, vars ...string)) {
	env["os_name"], env["sys_platform"] = "posix", runtime.GOOS
	u, ok := hostUname()
	if runtime.GOOS == "windows" {
		env["os_name"], env["sys_platform"] = "nt", "win32"
	}
	if !ok {
		missing("this host has no uname", "platform_system", "platform_machine", "platform_release", "platform_version")
		return
	}
	switch runtime.GOOS {
	case "freebsd", "openbsd", "netbsd", "dragonfly":
		major, _, _ := strings.Cut(u.release, ".")
		env["sys_platform"] = runtime.GOOS + major // sys.platform is "freebsd14"
	}
	env["platform_system"], env["platform_machine"] = u.sysname, u.machine
	env["platform_release"], env["platform_version"] = u.release, u.version
}

// uname is the part of uname(2) the marker variables read.
type uname struct {
	sysname, release, version, machine string
}

// quoteValue quotes a value read from a file for a message, cut short.
func quoteValue(s string) string { return strconv.Quote(truncate(s)) }
