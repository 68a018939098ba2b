package integrity

import (
	"fmt"
	"path"
	"strings"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity/internal/glob"
)

// Expectation is one expected change, as written in policy.
type Expectation struct {
	// Package limits the entry to one package (a Python distribution name,
	// compared after PEP 503 normalisation, or an npm package name); empty
	// means any package.
	Package string `json:"package,omitempty" yaml:"package,omitempty" mapstructure:"package"`
	// Path is a glob matched against the changed file's path as the
	// baseline lists it (relative to site-packages, or to the npm package
	// folder). A pattern without a slash matches the file name in any
	// directory; "*", "?" and "[...]" stay within one path segment and
	// "**" spans any number of them. An absolute pattern is matched
	// against the file's absolute, cleaned path instead.
	Path string `json:"path" yaml:"path" mapstructure:"path"`
	// Reason says why the change is expected; it is required and shown
	// as "modified (expected: REASON)".
	Reason string `json:"reason" yaml:"reason" mapstructure:"reason"`
}

// Allowlist is a compiled set of expected changes. A nil *Allowlist
// expects nothing.
type Allowlist struct {
	rules []allowRule
}

type allowRule struct {
	pkg    string
	abs    bool
	pat    *glob.Pattern
	reason string
}

// NewAllowlist compiles exps; every entry needs a path and a reason.
func NewAllowlist(exps []Expectation) (*Allowlist, error) {
	a := &Allowlist{}
	for i, e := range exps {
		if strings.TrimSpace(e.Reason) == "" {
			return nil, fmt.Errorf("expected change %d (%q): %w", i, e.Path, ErrNoReason)
		}
		if e.Path == "" {
			return nil, fmt.Errorf("expected change %d: %w: empty path", i, ErrBadPattern)
		}
		for _, p := range glob.Expand(e.Path) {
			pat, err := glob.Compile(strings.TrimPrefix(p, "./"), glob.Options{MatchBase: true})
			if err != nil {
				return nil, fmt.Errorf("expected change %d: %w: %q", i, ErrBadPattern, e.Path)
			}
			a.rules = append(a.rules, allowRule{
				pkg: normalizeName(e.Package), abs: strings.HasPrefix(p, "/"), pat: pat, reason: e.Reason,
			})
		}
	}
	return a, nil
}

// Match returns the reason of the first entry matching the change of
// file in package pkg. file is the path as listed; for absolute patterns
// MatchFile also needs the file's absolute path.
func (a *Allowlist) Match(pkg, file string) (string, bool) {
	return a.MatchFile(pkg, file, "")
}

// MatchFile is Match with the file's absolute path for absolute patterns
// (empty abs lets only relative patterns match).
func (a *Allowlist) MatchFile(pkg, file, abs string) (string, bool) {
	if a == nil {
		return "", false
	}
	npkg := normalizeName(pkg)
	for _, r := range a.rules {
		if r.pkg != "" && r.pkg != npkg {
			continue
		}
		if r.abs {
			if abs != "" && r.pat.Match(path.Clean(abs)) {
				return r.reason, true
			}
			continue
		}
		if r.pat.Match(file) {
			return r.reason, true
		}
	}
	return "", false
}

// Len returns the number of compiled rules.
func (a *Allowlist) Len() int {
	if a == nil {
		return 0
	}
	return len(a.rules)
}

// normalizeName lowercases a package name and folds runs of "-", "_" and
// "." into "-" (PEP 503); npm names are lowercase already and never
// contain runs of those characters that would collide.
func normalizeName(name string) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(name) {
		if r == '-' || r == '_' || r == '.' {
			sep = true
			continue
		}
		if sep && b.Len() > 0 {
			b.WriteByte('-')
		}
		sep = false
		b.WriteRune(r)
	}
	return b.String()
}
