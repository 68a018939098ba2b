package snapshot

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns s safe to print on a terminal, for human output: every
// character that is not graphic (C0 and C1 controls such as ESC, DEL, tab
// and newline; format characters such as bidirectional overrides and
// zero-width joiners; line and paragraph separators; unassigned and private
// use code points) is escaped as Go writes it in a rune literal (\x1b,
// \n, \u202e), and an invalid byte as \xNN. A string of graphic characters
// and spaces is returned unchanged; backslashes are not escaped, so that
// such strings print exactly as they are.
//
// Unlike Quote, it adds no quotes: it is for values printed in place, as
// the human diff, error messages and tables print them.
func Printable(s string) string {
	i := unprintableIndex(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[s[i]>>4])
			b.WriteByte(hexDigits[s[i]&0xf])
		case unicode.IsGraphic(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToGraphic(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

const hexDigits = "0123456789abcdef"

// unprintableIndex is the byte offset of the first character of s that
// Printable escapes, or -1.
func unprintableIndex(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !unicode.IsGraphic(r) {
			return i
		}
		i += size
	}
	return -1
}

// ShellQuote quotes s as one word for a POSIX shell, for the commands that
// human output and messages suggest: a non-empty word of letters, digits
// and -_./:=@,+% is left as it is, anything else single-quoted (a quote
// inside as '\”).
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
