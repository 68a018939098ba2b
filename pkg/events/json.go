package events

import (
	"unicode/utf8"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// AppendJSONString appends s as encoding/json writes a string with HTML
// escaping off (json.Encoder.SetEscapeHTML(false)), as every string of an
// event's data is written: '"', '\\' and control characters escaped,
// invalid UTF-8 replaced by \ufffd, U+2028 and U+2029 escaped. Passing the
// result through json.HTMLEscape gives what json.Marshal writes.
func AppendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = jsontree.AppendEscape(append(dst, s[start:i]...), c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
