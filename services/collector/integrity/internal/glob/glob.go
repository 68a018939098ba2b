// Package glob matches slash-separated paths against glob patterns the way
// the integrity allowlist and npm's ignore rules need: "*", "?" and
// character classes within one path segment (path.Match syntax, with "[!"
// accepted for "[^"), "**" as a whole segment for any number of segments,
// optional case folding, and optional matching of single-segment patterns
// against the last segment only (minimatch's matchBase). Braces are
// expanded by Expand before compiling.
package glob

import (
	"errors"
	"path"
	"strings"
)

// ErrBadPattern is returned for a malformed pattern.
var ErrBadPattern = errors.New("malformed glob pattern")

// Options select matching behaviour.
type Options struct {
	// NoCase folds case in pattern and name.
	NoCase bool
	// MatchBase matches a pattern without a slash against the last
	// segment of the name only.
	MatchBase bool
}

// Pattern is a compiled glob.
type Pattern struct {
	segs   []string
	nocase bool
	base   bool
}

// Compile compiles pattern.
func Compile(pattern string, opts Options) (*Pattern, error) {
	if opts.NoCase {
		pattern = strings.ToLower(pattern)
	}
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		if s == "**" {
			continue
		}
		s = strings.ReplaceAll(s, "[!", "[^")
		if _, err := path.Match(s, ""); err != nil {
			return nil, ErrBadPattern
		}
		segs[i] = s
	}
	return &Pattern{segs: segs, nocase: opts.NoCase, base: opts.MatchBase && len(segs) == 1}, nil
}

// Match reports whether name matches the whole pattern.
func (p *Pattern) Match(name string) bool { return p.match(name, false) }

// MatchPartial reports whether name matches the pattern or is a leading
// part of a name that could (a directory the pattern may reach into).
func (p *Pattern) MatchPartial(name string) bool { return p.match(name, true) }

// Segments reports how many segments the pattern has.
func (p *Pattern) Segments() int { return len(p.segs) }

// LastSegmentEmpty reports whether the pattern ends with a slash.
func (p *Pattern) LastSegmentEmpty() bool { return p.segs[len(p.segs)-1] == "" }

func (p *Pattern) match(name string, partial bool) bool {
	if p.nocase {
		name = strings.ToLower(name)
	}
	if p.base {
		if i := strings.LastIndexByte(name, '/'); i >= 0 {
			name = name[i+1:]
		}
		ok, _ := path.Match(p.segs[0], name)
		return ok
	}
	return matchSegs(p.segs, name, partial)
}

// matchSegs matches pattern segments against name's segments, consuming
// name from the left without splitting it into a slice.
func matchSegs(segs []string, name string, partial bool) bool {
	for len(segs) > 0 {
		if segs[0] == "**" {
			rest := segs[1:]
			if len(rest) == 0 {
				return true
			}
			// Try the rest at every segment boundary of name.
			n := name
			for {
				if matchSegs(rest, n, partial) {
					return true
				}
				i := strings.IndexByte(n, '/')
				if i < 0 {
					return partial
				}
				n = n[i+1:]
			}
		}
		seg, rest, more := strings.Cut(name, "/")
		if ok, _ := path.Match(segs[0], seg); !ok {
			return false
		}
		segs = segs[1:]
		if !more {
			// name ran out
			return len(segs) == 0 || partial
		}
		name = rest
		if len(segs) == 0 {
			return false
		}
	}
	return false
}

// Expand expands brace alternatives ("a{b,c}" → "ab", "ac"; "x{,.y}" → "x",
// "x.y"), innermost-last, left to right. A pattern without a brace pair
// that contains a comma is returned as is.
func Expand(pattern string) []string {
	open, end := -1, -1
	depth := 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++
		case '{':
			if depth == 0 {
				open = i
			}
			depth++
		case '}':
			if depth > 0 {
				depth--
				if depth == 0 {
					end = i
				}
			}
		}
		if end >= 0 {
			break
		}
	}
	if open < 0 || end < 0 {
		return []string{pattern}
	}
	alts := splitTop(pattern[open+1 : end])
	if len(alts) < 2 {
		// "{x}" is literal in minimatch; keep it and expand what follows.
		var out []string
		for _, tail := range Expand(pattern[end+1:]) {
			out = append(out, pattern[:end+1]+tail)
		}
		return out
	}
	var out []string
	for _, a := range alts {
		out = append(out, Expand(pattern[:open]+a+pattern[end+1:])...)
	}
	return out
}

// splitTop splits s at commas outside nested braces.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '{':
			depth++
		case '}':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}
