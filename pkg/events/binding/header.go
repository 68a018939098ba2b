package binding

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
)

// Header names. Attribute headers are "ce-" and the attribute name, written
// in lower case and matched case-insensitively, as NATS header names are.
const (
	// HeaderPrefix starts the header of every attribute.
	HeaderPrefix = "ce-"
	// HeaderMsgID is the JetStream de-duplication header; it carries the id.
	HeaderMsgID = nats.MsgIdHdr
	// headerContentType marks a structured-mode message when it holds
	// application/cloudevents.
	headerContentType = "content-type"
)

// encodeValue percent-encodes an attribute value for a NATS header as the
// CloudEvents NATS binding (1.0.3, 3.1.3.2) says: every byte of a character
// outside U+0021-U+007E, and space, '"' and '%', becomes %XX in upper case.
func encodeValue(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if !plainHeaderByte(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	b := make([]byte, 0, len(s)+2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plainHeaderByte(c) {
			b = append(b, c)
			continue
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&0xF])
	}
	return string(b)
}

func plainHeaderByte(c byte) bool { return 0x21 <= c && c <= 0x7E && c != '"' && c != '%' }

var (
	errQuoted  = errors.New("malformed double-quoted value")
	errPercent = errors.New("malformed percent-encoding")
	errRawByte = errors.New("byte outside printable ASCII (not percent-encoded)")
	errUTF8    = errors.New("percent-encoded bytes are not valid UTF-8")
)

// decodeValue undoes encodeValue for a received header value: optional
// whitespace is trimmed, a double-quoted string (RFC 7230 3.2.6) is
// unquoted, then one round of percent-decoding is done (either hex case).
// The result must be valid UTF-8, which rejects overlong encodings.
func decodeValue(v string) (string, error) {
	v, err := headerText(v)
	if err != nil {
		return "", err
	}
	var b strings.Builder // its String is the bytes written, not a copy
	for {
		run, rest, escaped := strings.Cut(v, "%")
		for i := 0; i < len(run); i++ {
			if run[i] < 0x20 || run[i] > 0x7E {
				return "", errRawByte
			}
		}
		switch {
		case !escaped && b.Len() == 0:
			return v, nil // nothing was percent-encoded
		case !escaped:
			b.WriteString(run)
			if !utf8.ValidString(b.String()) {
				return "", errUTF8
			}
			return b.String(), nil
		case len(rest) < 2 || !isHex(rest[0]) || !isHex(rest[1]):
			return "", errPercent
		}
		if b.Cap() == 0 {
			b.Grow(len(v))
		}
		b.WriteString(run)
		b.WriteByte(hexVal(rest[0])<<4 | hexVal(rest[1]))
		v = rest[2:]
	}
}

// headerText is a header value without its optional white space, and
// unquoted if it is a quoted-string.
func headerText(v string) (string, error) {
	v = strings.Trim(v, " \t")
	if strings.HasPrefix(v, `"`) {
		return unquote(v)
	}
	return v, nil
}

// unquote decodes a quoted-string: '"' *( qdtext / "\" char ) '"'.
func unquote(v string) (string, error) {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return "", errQuoted
	}
	in := v[1 : len(v)-1]
	b := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		switch c := in[i]; c {
		case '\\':
			if i+1 >= len(in) {
				return "", errQuoted
			}
			i++
			b = append(b, in[i])
		case '"':
			return "", errQuoted
		default:
			b = append(b, c)
		}
	}
	return string(b), nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexVal(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// headerSize is the size of h's encoded header block, as nats.go writes
// it: "NATS/1.0\r\n", "Name: value\r\n" per value, and "\r\n".
func headerSize(h nats.Header) int {
	n := headerBase
	for k, vs := range h {
		n += headerLineSize(k, vs)
	}
	return n
}

// headerBase is the size of a header block without a header: the status
// line and the blank line that ends it.
const headerBase = len("NATS/1.0\r\n") + 2

// headerLineSize is the size of the lines of header k with values vs.
func headerLineSize(k string, vs []string) int {
	n := 0
	for _, v := range vs {
		n += len(k) + 2 + len(v) + 2
	}
	return n
}

// hexDigits are the digits of percent-encoding (upper case).
const hexDigits = "0123456789ABCDEF"
