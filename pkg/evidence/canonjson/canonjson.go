// Package canonjson produces the RFC 8785 JSON Canonicalization Scheme (JCS)
// form of JSON values.
//
// Digests of snapshots and in-toto statements are computed over these bytes,
// so they must equal what RuntimeTruth's Python rfc8785 package produces for
// the same document: object members sorted by their UTF-16 code units,
// strings escaped minimally, numbers in ECMAScript Number.toString form,
// no insignificant whitespace.
package canonjson

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/gowebpki/jcs"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// MaxSafeInteger is the largest integer magnitude RFC 8785 can carry exactly
// (2^53 - 1); Python's rfc8785 refuses larger integers and so do we.
const MaxSafeInteger = 1<<53 - 1

// ErrIntegerDomain is returned for an integer outside ±MaxSafeInteger.
var ErrIntegerDomain = errors.New("integer outside the RFC 8785 safe range ±(2^53-1)")

// Transform canonicalizes JSON text: jsontree.Parse (which refuses
// duplicate keys and invalid input), then Append.
func Transform(data []byte) ([]byte, error) {
	v, err := jsontree.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("canonicalize: %w", err)
	}
	return Append(nil, v)
}

// Append appends the canonical form of v to dst. Integers must lie within
// ±MaxSafeInteger, as Python's rfc8785 requires.
func Append(dst []byte, v jsontree.Value) ([]byte, error) {
	switch v.Kind {
	case jsontree.Null:
		return append(dst, "null"...), nil
	case jsontree.Bool:
		return strconv.AppendBool(dst, v.Bool), nil
	case jsontree.String:
		return AppendString(dst, v.Text), nil
	case jsontree.Number:
		return appendNumber(dst, v)
	case jsontree.Array:
		dst = append(dst, '[')
		var err error
		for i, item := range v.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = Append(dst, item); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case jsontree.Object:
		members := v.Members
		if !slices.IsSortedFunc(members, compareMembers) {
			members = slices.Clone(members)
			SortMembers(members)
		}
		dst = append(dst, '{')
		var err error
		for i, m := range members {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, m.Key)
			dst = append(dst, ':')
			if dst, err = Append(dst, m.Value); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	return nil, fmt.Errorf("canonjson: unknown kind %v", v.Kind)
}

// Marshal returns the canonical form of v.
func Marshal(v jsontree.Value) ([]byte, error) { return Append(nil, v) }

// Digest returns "sha256:<hex>" over the canonical form of v.
func Digest(v jsontree.Value) (string, error) {
	b, err := Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func appendNumber(dst []byte, v jsontree.Value) ([]byte, error) {
	if v.IsInteger() {
		n, err := v.Int64()
		if err != nil || n > MaxSafeInteger || n < -MaxSafeInteger {
			return nil, fmt.Errorf("%w: %s", ErrIntegerDomain, v.Text)
		}
		return strconv.AppendInt(dst, n, 10), nil
	}
	f, err := v.Float64()
	if err != nil {
		return nil, fmt.Errorf("canonjson: number %s: %w", v.Text, err)
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return nil, fmt.Errorf("canonjson: number %s: %w", v.Text, err)
	}
	return append(dst, s...), nil
}

// AppendString appends s with RFC 8785 escaping: only '"', '\\' and control
// characters are escaped; everything else is written as UTF-8.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s) }

func appendString[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		dst = jsontree.AppendEscape(dst, c)
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// SortMembers sorts object members by the UTF-16 code units of their keys,
// the order RFC 8785 prescribes.
func SortMembers(members []jsontree.Member) {
	slices.SortFunc(members, compareMembers)
}

func compareMembers(a, b jsontree.Member) int { return CompareKeys(a.Key, b.Key) }

// CompareKeys orders two keys by their UTF-16 code units.
//
// UTF-8 byte order equals code point order, which equals UTF-16 order except
// that code points above U+FFFF (lead bytes 0xF0..0xF4, surrogate pairs
// starting 0xD800 in UTF-16) sort before U+E000..U+FFFF (lead bytes 0xEE,
// 0xEF). Common prefixes are whole characters, so the first differing byte
// is either a continuation byte of same-length characters or a lead byte.
func CompareKeys(a, b string) int { return compareKeys(a, b) }

func compareKeys[S ~string | ~[]byte](a, b S) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		return len(a) - len(b)
	}
	ca, cb := a[i], b[i]
	if ca >= 0xEE && cb >= 0xEE && (ca >= 0xF0) != (cb >= 0xF0) {
		if ca >= 0xF0 {
			return -1
		}
		return 1
	}
	return int(ca) - int(cb)
}
