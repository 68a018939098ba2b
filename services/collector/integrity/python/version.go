package python

import (
	"cmp"
	"regexp"
	"strconv"
	"strings"
)

// Version is a parsed PEP 440 version.
type Version struct {
	Epoch   uint64
	Release []uint64
	// PreL is "a", "b" or "rc" ("" when not a pre-release).
	PreL  string
	PreN  uint64
	Post  bool
	PostN uint64
	Dev   bool
	DevN  uint64
	Local []string
}

var versionRE = regexp.MustCompile(`(?i)^\s*v?(?:(?:([0-9]+)!)?([0-9]+(?:\.[0-9]+)*)` +
	`([-_.]?(alpha|a|beta|b|preview|pre|c|rc)[-_.]?([0-9]+)?)?` +
	`((?:-([0-9]+))|(?:[-_.]?(post|rev|r)[-_.]?([0-9]+)?))?` +
	`([-_.]?(dev)[-_.]?([0-9]+)?)?)` +
	`(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$`)

// ParseVersion parses a PEP 440 version; ok is false when s is not one.
func ParseVersion(s string) (v Version, ok bool) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return v, false
	}
	num := func(s string) (uint64, bool) {
		if s == "" {
			return 0, true
		}
		n, err := strconv.ParseUint(s, 10, 64)
		return n, err == nil
	}
	var good bool
	if v.Epoch, good = num(m[1]); !good {
		return v, false
	}
	for _, part := range strings.Split(m[2], ".") {
		n, good := num(part)
		if !good {
			return v, false
		}
		v.Release = append(v.Release, n)
	}
	if m[3] != "" {
		switch strings.ToLower(m[4]) {
		case "a", "alpha":
			v.PreL = "a"
		case "b", "beta":
			v.PreL = "b"
		default:
			v.PreL = "rc"
		}
		if v.PreN, good = num(m[5]); !good {
			return v, false
		}
	}
	if m[6] != "" {
		v.Post = true
		n := m[7]
		if n == "" {
			n = m[9]
		}
		if v.PostN, good = num(n); !good {
			return v, false
		}
	}
	if m[10] != "" {
		v.Dev = true
		if v.DevN, good = num(m[12]); !good {
			return v, false
		}
	}
	if m[13] != "" {
		v.Local = strings.FieldsFunc(strings.ToLower(m[13]), func(r rune) bool { return r == '-' || r == '_' || r == '.' })
	}
	return v, true
}

// IsPre reports whether v is a pre-release or development release.
func (v Version) IsPre() bool { return v.PreL != "" || v.Dev }

// baseEqual reports whether v and o have the same epoch and release.
func (v Version) baseEqual(o Version) bool {
	return v.Epoch == o.Epoch && cmpRelease(v.Release, o.Release) == 0
}

func cmpRelease(a, b []uint64) int {
	// Trailing zeros are insignificant.
	for len(a) > 0 && a[len(a)-1] == 0 {
		a = a[:len(a)-1]
	}
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return cmp.Compare(a[i], b[i])
		}
	}
	return cmp.Compare(len(a), len(b))
}

// preKey orders the pre-release part: dev-only releases first, then a, b,
// rc, then final releases (packaging's _cmpkey).
func (v Version) preKey() (rank int, n uint64) {
	switch {
	case v.PreL == "" && !v.Post && v.Dev:
		return -1, 0
	case v.PreL == "":
		return 4, 0
	case v.PreL == "a":
		return 1, v.PreN
	case v.PreL == "b":
		return 2, v.PreN
	}
	return 3, v.PreN
}

// Compare orders versions as PEP 440 does: -1, 0 or 1.
func (v Version) Compare(o Version) int {
	if c := cmp.Compare(v.Epoch, o.Epoch); c != 0 {
		return c
	}
	if c := cmpRelease(v.Release, o.Release); c != 0 {
		return c
	}
	vr, vn := v.preKey()
	or, on := o.preKey()
	if c := cmp.Compare(vr, or); c != 0 {
		return c
	}
	if c := cmp.Compare(vn, on); c != 0 {
		return c
	}
	if v.Post != o.Post {
		if v.Post {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(v.PostN, o.PostN); c != 0 {
		return c
	}
	if v.Dev != o.Dev {
		if v.Dev {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(v.DevN, o.DevN); c != 0 {
		return c
	}
	return cmpLocal(v.Local, o.Local)
}

// cmpLocal orders local version labels: none first, then segment by
// segment with numeric segments after alphanumeric ones.
func cmpLocal(a, b []string) int {
	if len(a) == 0 || len(b) == 0 {
		return cmp.Compare(len(a), len(b))
	}
	for i := 0; i < len(a) && i < len(b); i++ {
		an, aerr := strconv.ParseUint(a[i], 10, 64)
		bn, berr := strconv.ParseUint(b[i], 10, 64)
		switch {
		case aerr == nil && berr == nil:
			if c := cmp.Compare(an, bn); c != 0 {
				return c
			}
		case aerr == nil:
			return 1
		case berr == nil:
			return -1
		default:
			if c := strings.Compare(a[i], b[i]); c != 0 {
				return c
			}
		}
	}
	return cmp.Compare(len(a), len(b))
}

// public returns v without its local label.
func (v Version) publicVersion() Version {
	v.Local = nil
	return v
}

// specifier is one PEP 440 version specifier clause.
type specifier struct {
	op       string
	raw      string // the version text after the operator
	v        Version
	wildcard bool
}

var specOps = []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"}

// parseSpecifier parses "<op><version>" the way packaging's Specifier
// does; ok is false for anything packaging would reject.
func parseSpecifier(s string) (sp specifier, ok bool) {
	s = strings.TrimSpace(s)
	for _, op := range specOps {
		if strings.HasPrefix(s, op) {
			sp.op = op
			sp.raw = strings.TrimSpace(s[len(op):])
			break
		}
	}
	if sp.op == "" || sp.raw == "" {
		return sp, false
	}
	if sp.op == "===" {
		return sp, !strings.ContainsAny(sp.raw, " \t;")
	}
	text := sp.raw
	if sp.op == "==" || sp.op == "!=" {
		if t, found := strings.CutSuffix(text, ".*"); found {
			sp.wildcard = true
			text = t
		}
	}
	v, good := ParseVersion(text)
	if !good {
		return sp, false
	}
	sp.v = v
	switch sp.op {
	case "==", "!=":
		if sp.wildcard && (v.PreL != "" || v.Post || v.Dev || len(v.Local) > 0) {
			return sp, false
		}
	case "~=":
		if len(v.Local) > 0 || len(v.Release) < 2 {
			return sp, false
		}
	default:
		if len(v.Local) > 0 {
			return sp, false
		}
	}
	return sp, true
}

// contains reports whether version text item satisfies the specifier,
// with pre-releases allowed (as marker evaluation asks); an item that is
// not a version does not.
func (sp specifier) contains(item string) bool {
	if sp.op == "===" {
		return strings.EqualFold(strings.TrimSpace(item), sp.raw)
	}
	v, ok := ParseVersion(item)
	if !ok {
		return false
	}
	switch sp.op {
	case "==":
		return sp.equal(v)
	case "!=":
		return !sp.equal(v)
	case "~=":
		prefix := sp.v.Release[:len(sp.v.Release)-1]
		pv := v.publicVersion()
		return pv.Compare(sp.v) >= 0 && v.Epoch == sp.v.Epoch && releasePrefix(pv.Release, prefix)
	case "<=":
		return v.publicVersion().Compare(sp.v) <= 0
	case ">=":
		return v.publicVersion().Compare(sp.v) >= 0
	case "<":
		if v.Compare(sp.v) >= 0 {
			return false
		}
		return sp.v.IsPre() || !v.IsPre() || !v.baseEqual(sp.v)
	case ">":
		if v.Compare(sp.v) <= 0 {
			return false
		}
		if !sp.v.Post && v.Post && v.baseEqual(sp.v) {
			return false
		}
		return len(v.Local) == 0 || !v.baseEqual(sp.v)
	}
	return false
}

func (sp specifier) equal(v Version) bool {
	if sp.wildcard {
		return v.Epoch == sp.v.Epoch && releasePrefix(v.Release, sp.v.Release)
	}
	if len(sp.v.Local) > 0 {
		return v.Compare(sp.v) == 0
	}
	return v.publicVersion().Compare(sp.v) == 0
}

// releasePrefix reports whether release, padded with zeros, starts with
// prefix.
func releasePrefix(release, prefix []uint64) bool {
	for i, p := range prefix {
		var r uint64
		if i < len(release) {
			r = release[i]
		}
		if r != p {
			return false
		}
	}
	return true
}
