package python

import (
	"fmt"
	"slices"
	"strings"
)

// Environment holds PEP 508 marker variables (python_version,
// sys_platform, extra, ...), keyed by their canonical names. A variable
// that is absent is unknown: a marker whose value depends on it is not
// evaluated (ErrUnknownVariable).
type Environment map[string]string

// markerVars are the PEP 508 variables, with the legacy dotted spellings
// packaging still accepts mapped to them.
var markerVars = map[string]string{
	"implementation_name":            "implementation_name",
	"implementation_version":         "implementation_version",
	"os_name":                        "os_name",
	"platform_machine":               "platform_machine",
	"platform_release":               "platform_release",
	"platform_system":                "platform_system",
	"platform_version":               "platform_version",
	"python_full_version":            "python_full_version",
	"platform_python_implementation": "platform_python_implementation",
	"python_version":                 "python_version",
	"sys_platform":                   "sys_platform",
	"extra":                          "extra",
	"os.name":                        "os_name",
	"sys.platform":                   "sys_platform",
	"platform.version":               "platform_version",
	"platform.machine":               "platform_machine",
	"platform.python_implementation": "platform_python_implementation",
	"python_implementation":          "platform_python_implementation",
}

// Marker is a parsed PEP 508 environment marker.
type Marker struct {
	root markerNode
	text string
}

// String returns the marker as written, without surrounding spaces.
func (m *Marker) String() string {
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m.text)
}

type markerNode interface {
	// eval returns the node's value in env and, when it is unknown, the
	// unknown variables it depends on.
	eval(env Environment) (truth, []string, error)
}

// truth is a marker's value when some variables may be unknown, in
// Kleene's three-valued logic: "A or B" is true when either is, whatever
// the other, and "A and B" false when either is false; otherwise an
// unknown operand makes the result unknown.
type truth uint8

const (
	isFalse truth = iota
	isTrue
	isUnknown
)

// markerJoin is "l or r" (decisive isTrue) or "l and r" (decisive
// isFalse): an operand of the decisive value decides it, the left one
// without the right evaluated.
type markerJoin struct {
	l, r     markerNode
	decisive truth
}

type markerCmp struct {
	lhs, rhs markerValue
	op       string
}

type markerValue struct {
	variable string // canonical variable name, or "" for a literal
	literal  string
}

func (n markerJoin) eval(env Environment) (truth, []string, error) {
	l, lv, err := n.l.eval(env)
	switch {
	case err != nil:
		return isFalse, nil, err
	case l == n.decisive:
		return l, nil, nil
	}
	r, rv, err := n.r.eval(env)
	switch {
	case err != nil:
		return isFalse, nil, err
	case r == n.decisive:
		return r, nil, nil
	case l == isUnknown || r == isUnknown:
		return isUnknown, union(lv, rv), nil
	}
	return l, nil, nil // neither decisive nor unknown: both the other value
}

// union returns the variables of a and b, each once.
func union(a, b []string) []string {
	out := append([]string(nil), a...)
	for _, v := range b {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// value returns the literal, or the variable's value in env; ok is false
// for a variable env does not give.
func (v markerValue) value(env Environment) (s string, ok bool) {
	if v.variable == "" {
		return v.literal, true
	}
	s, ok = env[v.variable]
	return s, ok
}

func (n markerCmp) eval(env Environment) (truth, []string, error) {
	lhs, lok := n.lhs.value(env)
	rhs, rok := n.rhs.value(env)
	if !lok || !rok {
		var vars []string
		if !lok {
			vars = append(vars, n.lhs.variable)
		}
		if !rok && n.rhs.variable != n.lhs.variable {
			vars = append(vars, n.rhs.variable)
		}
		return isUnknown, vars, nil
	}
	ok, err := n.compare(lhs, rhs)
	if ok {
		return isTrue, nil, err
	}
	return isFalse, nil, err
}

func (n markerCmp) compare(lhs, rhs string) (bool, error) {
	if n.lhs.variable == "extra" || n.rhs.variable == "extra" {
		// Extras compare as normalized names.
		lhs, rhs = normalizeName(lhs), normalizeName(rhs)
	}
	switch n.op {
	case "in":
		return strings.Contains(rhs, lhs), nil
	case "not in":
		return !strings.Contains(rhs, lhs), nil
	}
	if sp, ok := parseSpecifier(n.op + rhs); ok {
		return sp.contains(lhs), nil
	}
	switch n.op {
	case "==":
		return lhs == rhs, nil
	case "!=":
		return lhs != rhs, nil
	case "<":
		return lhs < rhs, nil
	case "<=":
		return lhs <= rhs, nil
	case ">":
		return lhs > rhs, nil
	case ">=":
		return lhs >= rhs, nil
	}
	return false, fmt.Errorf("%w: %q %s %q", ErrUndefinedComparison, lhs, n.op, rhs)
}

// Evaluate evaluates the marker in env. A comparison packaging cannot
// make (e.g. "~=" between strings that are not versions) is an error
// wrapping ErrUndefinedComparison; a marker whose value depends on a
// variable env does not give is an error wrapping ErrUnknownVariable
// that names the variables (one that does not depend on it, such as
// `python_version < "3" or sys_platform == "linux"` on Linux, is
// evaluated).
func (m *Marker) Evaluate(env Environment) (bool, error) {
	ok, unknown, err := m.evaluate(env)
	if err == nil && len(unknown) > 0 {
		err = fmt.Errorf("%w: %s", ErrUnknownVariable, strings.Join(unknown, ", "))
	}
	return ok, err
}

// evaluate is Evaluate returning the unknown variables the marker's value
// depends on (none when it is known) rather than an error for them.
func (m *Marker) evaluate(env Environment) (ok bool, unknown []string, err error) {
	if m == nil || m.root == nil {
		return true, nil, nil
	}
	t, vars, err := m.root.eval(env)
	if err != nil {
		return false, nil, err
	}
	if t == isUnknown {
		return false, vars, nil
	}
	return t == isTrue, nil, nil
}

// maxMarkerDepth bounds parenthesis nesting.
const maxMarkerDepth = 64

// ParseMarker parses a PEP 508 marker expression.
func ParseMarker(s string) (*Marker, error) {
	p := markerParser{s: s}
	n, err := p.or(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.errorf("unexpected %q", p.s[p.i:])
	}
	return &Marker{root: n, text: s}, nil
}

type markerParser struct {
	s string
	i int
}

func (p *markerParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s at offset %d in %q", ErrBadMarker, fmt.Sprintf(format, args...), p.i, p.s)
}

func (p *markerParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// keyword consumes word when it is next and followed by a non-identifier
// character.
func (p *markerParser) keyword(word string) bool {
	p.space()
	if !strings.HasPrefix(p.s[p.i:], word) {
		return false
	}
	j := p.i + len(word)
	if j < len(p.s) && isIdent(p.s[j]) {
		return false
	}
	p.i = j
	return true
}

func isIdent(c byte) bool {
	return c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// or parses and-expressions joined by "or".
func (p *markerParser) or(depth int) (markerNode, error) {
	return p.join(depth, "or", isTrue, (*markerParser).and)
}

// and parses atoms joined by "and".
func (p *markerParser) and(depth int) (markerNode, error) {
	return p.join(depth, "and", isFalse, (*markerParser).atom)
}

// join parses operands separated by keyword, grouped from the left into
// markerJoins that decisive decides.
func (p *markerParser) join(depth int, keyword string, decisive truth, operand func(*markerParser, int) (markerNode, error)) (markerNode, error) {
	l, err := operand(p, depth)
	if err != nil {
		return nil, err
	}
	for p.keyword(keyword) {
		r, err := operand(p, depth)
		if err != nil {
			return nil, err
		}
		l = markerJoin{l, r, decisive}
	}
	return l, nil
}

func (p *markerParser) atom(depth int) (markerNode, error) {
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '(' {
		if depth >= maxMarkerDepth {
			return nil, p.errorf("nested too deeply")
		}
		p.i++
		n, err := p.or(depth + 1)
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return nil, p.errorf("expected )")
		}
		p.i++
		return n, nil
	}
	lhs, err := p.value()
	if err != nil {
		return nil, err
	}
	op, err := p.op()
	if err != nil {
		return nil, err
	}
	rhs, err := p.value()
	if err != nil {
		return nil, err
	}
	return markerCmp{lhs: lhs, rhs: rhs, op: op}, nil
}

func (p *markerParser) value() (markerValue, error) {
	p.space()
	if p.i >= len(p.s) {
		return markerValue{}, p.errorf("expected a variable or string")
	}
	if q := p.s[p.i]; q == '\'' || q == '"' {
		end := strings.IndexByte(p.s[p.i+1:], q)
		if end < 0 {
			return markerValue{}, p.errorf("unterminated string")
		}
		v := markerValue{literal: p.s[p.i+1 : p.i+1+end]}
		p.i += end + 2
		return v, nil
	}
	j := p.i
	for j < len(p.s) && isIdent(p.s[j]) {
		j++
	}
	name := p.s[p.i:j]
	canon, ok := markerVars[name]
	if !ok {
		return markerValue{}, p.errorf("unknown marker variable %q", name)
	}
	p.i = j
	return markerValue{variable: canon}, nil
}

func (p *markerParser) op() (string, error) {
	p.space()
	for _, op := range []string{"===", "==", "!=", "<=", ">=", "~=", "<", ">"} {
		if strings.HasPrefix(p.s[p.i:], op) {
			p.i += len(op)
			return op, nil
		}
	}
	if p.keyword("in") {
		return "in", nil
	}
	if p.keyword("not") {
		if p.keyword("in") {
			return "not in", nil
		}
		return "", p.errorf("expected in after not")
	}
	return "", p.errorf("expected a comparison operator")
}
