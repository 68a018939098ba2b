// Package pyjson writes JSON byte-for-byte as Python's json.dumps does.
//
// RuntimeTruth (the Python tool whose snapshots runtimetruth reads and
// writes) serializes with json.dumps(sort_keys=True) and either compact
// separators or indent=2, always with ensure_ascii. Matching its bytes keeps
// snapshot files and the MCP tool-catalog fingerprint interchangeable.
package pyjson

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// Options select the json.dumps flavour.
type Options struct {
	// Indent is the indent width; 0 means compact separators (",", ":").
	Indent int
	// SortKeys sorts object keys by code point, like sort_keys=True.
	SortKeys bool
}

// Compact is json.dumps(v, separators=(",", ":"), sort_keys=True).
var Compact = Options{SortKeys: true}

// Pretty is json.dumps(v, indent=2, sort_keys=True).
var Pretty = Options{Indent: 2, SortKeys: true}

// ErrNotFinite is returned for a number Python would print as Infinity.
var ErrNotFinite = errors.New("number is not finite")

// Append appends the encoding of v to dst.
func Append(dst []byte, v jsontree.Value, o Options) ([]byte, error) {
	return appendValue(dst, v, o, 0)
}

// Marshal returns the encoding of v.
func Marshal(v jsontree.Value, o Options) ([]byte, error) {
	return Append(nil, v, o)
}

func appendValue(dst []byte, v jsontree.Value, o Options, level int) ([]byte, error) {
	switch v.Kind {
	case jsontree.Null:
		return append(dst, "null"...), nil
	case jsontree.Bool:
		return strconv.AppendBool(dst, v.Bool), nil
	case jsontree.String:
		return AppendString(dst, v.Text), nil
	case jsontree.Number:
		return AppendNumber(dst, v.Text)
	case jsontree.Array:
		if len(v.Items) == 0 {
			return append(dst, "[]"...), nil
		}
		dst = append(dst, '[')
		var err error
		for i, item := range v.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = newline(dst, o, level+1)
			if dst, err = appendValue(dst, item, o, level+1); err != nil {
				return nil, err
			}
		}
		dst = newline(dst, o, level)
		return append(dst, ']'), nil
	case jsontree.Object:
		if len(v.Members) == 0 {
			return append(dst, "{}"...), nil
		}
		members := v.Members
		if o.SortKeys && !slices.IsSortedFunc(members, compareMembers) {
			members = slices.Clone(members)
			slices.SortFunc(members, compareMembers)
		}
		dst = append(dst, '{')
		var err error
		for i, m := range members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = newline(dst, o, level+1)
			dst = AppendString(dst, m.Key)
			if o.Indent > 0 {
				dst = append(dst, ": "...)
			} else {
				dst = append(dst, ':')
			}
			if dst, err = appendValue(dst, m.Value, o, level+1); err != nil {
				return nil, err
			}
		}
		dst = newline(dst, o, level)
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("pyjson: unknown kind %v", v.Kind)
}

func newline(dst []byte, o Options, level int) []byte {
	if o.Indent <= 0 {
		return dst
	}
	dst = append(dst, '\n')
	for i := 0; i < level*o.Indent; i++ {
		dst = append(dst, ' ')
	}
	return dst
}

// compareMembers orders keys by code point, as Python's sort_keys does.
func compareMembers(a, b jsontree.Member) int { return strings.Compare(a.Key, b.Key) }

const hexDigits = "0123456789abcdef"

// AppendString appends s as Python's ensure_ascii encoder writes it.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		if c < utf8.RuneSelf {
			dst = jsontree.AppendEscape(dst, c)
			i++
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r >= 0x10000 {
				r -= 0x10000
				dst = appendU(dst, 0xD800|(r>>10)&0x3FF)
				dst = appendU(dst, 0xDC00|r&0x3FF)
			} else {
				dst = appendU(dst, r)
			}
			i += size
		}
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
}

// AppendNumber appends a JSON number literal as Python re-serializes it after
// json.loads: integers exactly (Python ints are unbounded), other numbers as
// repr(float).
func AppendNumber(dst []byte, literal string) ([]byte, error) {
	if !strings.ContainsAny(literal, ".eE") {
		if literal == "-0" {
			return append(dst, '0'), nil
		}
		return append(dst, literal...), nil
	}
	f, err := strconv.ParseFloat(literal, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, fmt.Errorf("pyjson: number %q: %w", literal, err)
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("pyjson: %q: %w", literal, ErrNotFinite)
	}
	return AppendFloat(dst, f), nil
}

// AppendFloat appends repr(f) for a finite float, as Python 3 prints it.
func AppendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		if math.Signbit(f) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	// Shortest round-trip digits and decimal exponent.
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddddde±XX
	neg := e[0] == '-'
	if neg {
		e = e[1:]
		dst = append(dst, '-')
	}
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	decpt := exp + 1 // position of the decimal point relative to digits
	// Python's float_repr_style 'short' uses scientific notation when
	// decpt <= -4 or decpt > 16.
	if decpt <= -4 || decpt > 16 {
		dst = append(dst, digits[0])
		if len(digits) > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if exp < 0 {
			dst = append(dst, '-')
			exp = -exp
		} else {
			dst = append(dst, '+')
		}
		if exp < 10 {
			dst = append(dst, '0')
		}
		return strconv.AppendInt(dst, int64(exp), 10)
	}
	switch {
	case decpt <= 0:
		dst = append(dst, "0."...)
		for i := 0; i < -decpt; i++ {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	case decpt >= len(digits):
		dst = append(dst, digits...)
		for i := len(digits); i < decpt; i++ {
			dst = append(dst, '0')
		}
		return append(dst, ".0"...)
	default:
		dst = append(dst, digits[:decpt]...)
		dst = append(dst, '.')
		return append(dst, digits[decpt:]...)
	}
}
