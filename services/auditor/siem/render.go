package siem

import (
	"fmt"
	"unicode/utf8"
)

// Format is a SIEM record format.
type Format string

// The formats.
const (
	FormatOCSF Format = "ocsf"
	FormatECS  Format = "ecs"
	FormatCEF  Format = "cef"
)

// ParseFormat checks a format's name.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatOCSF, FormatECS, FormatCEF:
		return f, nil
	}
	return "", fmt.Errorf("format %q: want ocsf, ecs or cef", s)
}

// Render renders f in format within limit bytes (0: no limit). A record
// over it leaves out the raw event (OCSF raw_data, ECS event.original)
// and says so (OCSF metadata.is_truncated and untruncated_size; ECS the
// tag "truncated"); one still over it has its message cut.
func Render(format Format, f Finding, p Product, limit int) ([]byte, error) {
	b, err := render(format, f, p)
	if err != nil || limit <= 0 || len(b) <= limit {
		return b, err
	}
	f.Truncated, f.Untruncated, f.Raw = true, len(b), nil
	if b, err = render(format, f, p); err != nil || len(b) <= limit {
		return b, err
	}
	over := len(b) - limit
	if over >= len(f.Message) {
		return nil, fmt.Errorf("%s record of %s: %d bytes without its message, over the limit of %d", format, f.Link.EventID, len(b)-len(f.Message), limit)
	}
	f.Message = cutUTF8(f.Message, len(f.Message)-over-8) + "…" // escaping may grow what is left: a margin
	return render(format, f, p)
}

func render(format Format, f Finding, p Product) ([]byte, error) {
	switch format {
	case FormatOCSF:
		return OCSF(f, p)
	case FormatECS:
		return ECS(f, p)
	case FormatCEF:
		return CEF(f, p), nil
	}
	return nil, fmt.Errorf("format %q: want ocsf, ecs or cef", format)
}

// cutUTF8 cuts s to at most n bytes, on a rune boundary.
func cutUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
