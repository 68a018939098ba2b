package python

import (
	"fmt"
	"regexp"
	"strings"
)

// Metadata is the part of a distribution's METADATA (core metadata,
// RFC 822 style headers) the check uses.
type Metadata struct {
	Name         string
	Version      string
	RequiresDist []string
}

// maxMetadataHeaders bounds the header lines ParseMetadata reads.
const maxMetadataHeaders = 100000

// ParseMetadata reads core metadata headers: "Key: value" lines up to the
// first empty line, continuation lines (starting with a space or tab)
// folded into the previous value. Keys are case-insensitive; Name and
// Version are required.
func ParseMetadata(data []byte) (*Metadata, error) {
	m := &Metadata{}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	var key, value string
	flush := func() {
		switch strings.ToLower(key) {
		case "name":
			if m.Name == "" {
				m.Name = strings.TrimSpace(value)
			}
		case "version":
			if m.Version == "" {
				m.Version = strings.TrimSpace(value)
			}
		case "requires-dist":
			if v := strings.TrimSpace(value); v != "" {
				m.RequiresDist = append(m.RequiresDist, v)
			}
		}
		key, value = "", ""
	}
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" {
			break // end of headers; the body is the description
		}
		if n++; n > maxMetadataHeaders {
			return nil, fmt.Errorf("%w: too many header lines", ErrBadMetadata)
		}
		if line[0] == ' ' || line[0] == '\t' {
			if key == "" {
				return nil, fmt.Errorf("%w: continuation line before any header", ErrBadMetadata)
			}
			value += " " + strings.TrimSpace(line)
			continue
		}
		flush()
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("%w: malformed header line %q", ErrBadMetadata, truncate(line))
		}
		key, value = k, v
	}
	flush()
	if m.Name == "" {
		return nil, fmt.Errorf("%w: no Name", ErrBadMetadata)
	}
	if m.Version == "" {
		return nil, fmt.Errorf("%w: no Version", ErrBadMetadata)
	}
	return m, nil
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// Requirement is a parsed PEP 508 dependency specification.
type Requirement struct {
	// Name is the project name as written.
	Name string
	// Extras are the requested extras.
	Extras []string
	// Specifier is the version specifier text (without parentheses).
	Specifier string
	// URL is the direct reference of "name @ url".
	URL string
	// Marker is the environment marker, or nil.
	Marker *Marker
}

// Key returns the normalized project name.
func (r Requirement) Key() string { return normalizeName(r.Name) }

var reqNameRE = regexp.MustCompile(`^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*`)

// ParseRequirement parses a PEP 508 requirement such as
// `requests[socks] (>=2.8.1,==2.8.*) ; python_version < "2.7"` or
// `pip @ https://example.com/pip.whl ; os_name == "posix"`.
func ParseRequirement(s string) (Requirement, error) {
	var r Requirement
	bad := func(why string) (Requirement, error) {
		return Requirement{}, fmt.Errorf("%w: %s: %q", ErrBadRequirement, why, truncate(s))
	}
	m := reqNameRE.FindStringSubmatchIndex(s)
	if m == nil {
		return bad("no project name")
	}
	r.Name = s[m[2]:m[3]]
	rest := s[m[1]:]
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return bad("unterminated extras")
		}
		for e := range strings.SplitSeq(rest[1:end], ",") {
			if e = strings.TrimSpace(e); e != "" {
				r.Extras = append(r.Extras, e)
			}
		}
		rest = strings.TrimLeft(rest[end+1:], " \t")
	}
	var marker string
	semicolon := false
	if strings.HasPrefix(rest, "@") {
		rest = strings.TrimLeft(rest[1:], " \t")
		// The URL ends at whitespace; a marker must follow " ;".
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		r.URL = rest[:end]
		if r.URL == "" {
			return bad("empty URL")
		}
		rest = strings.TrimLeft(rest[end:], " \t")
		if rest != "" {
			if rest[0] != ';' {
				return bad("expected ; after URL")
			}
			marker, semicolon = rest[1:], true
		}
	} else {
		spec, mk, found := strings.Cut(rest, ";")
		spec = strings.TrimSpace(spec)
		if strings.HasPrefix(spec, "(") {
			if !strings.HasSuffix(spec, ")") {
				return bad("unbalanced parentheses")
			}
			spec = strings.TrimSpace(spec[1 : len(spec)-1])
		}
		if spec != "" {
			for clause := range strings.SplitSeq(spec, ",") {
				if _, ok := parseSpecifier(clause); !ok {
					return bad("invalid version specifier")
				}
			}
		}
		r.Specifier = spec
		marker, semicolon = mk, found
	}
	if semicolon {
		if strings.TrimSpace(marker) == "" {
			return bad("empty marker")
		}
		mk, err := ParseMarker(marker)
		if err != nil {
			return Requirement{}, fmt.Errorf("%w: %w", ErrBadRequirement, err)
		}
		r.Marker = mk
	}
	return r, nil
}

// normalizeName normalizes a project name per PEP 503: lowercase, runs of
// "-", "_" and "." folded into "-".
func normalizeName(name string) string {
	var b strings.Builder
	b.Grow(len(name))
	sep := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '-' || c == '_' || c == '.' {
			sep = true
			continue
		}
		if sep && b.Len() > 0 {
			b.WriteByte('-')
		}
		sep = false
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// NormalizeName is PEP 503 name normalization ("Foo.Bar_baz" →
// "foo-bar-baz").
func NormalizeName(name string) string { return normalizeName(name) }
