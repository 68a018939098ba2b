package events

import (
	"regexp"
)

// Hand-written checks of the payloads' fixed patterns, in place of regular
// expressions on the hot paths. patterns_test.go holds each to the
// expression it replaces (the schemas' "pattern" where there is one), and
// the subject matchers to the functions that build the subjects.

// digestPrefix starts every digest.
const digestPrefix = "sha256:"

// ValidDigest reports whether s is a digest as the payloads carry them:
// sha256:<64 lower-case hex digits> (^sha256:[0-9a-f]{64}$).
func ValidDigest(s string) bool {
	return len(s) == len(digestPrefix)+64 && s[:len(digestPrefix)] == digestPrefix && isLowerHex(s[len(digestPrefix):])
}

// isHex64 reports whether s matches ^[0-9a-f]{64}$.
func isHex64(s string) bool { return len(s) == 64 && isLowerHex(s) }

// isLowerHex reports whether every byte of s is 0-9 or a-f.
func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isLowerHexByte(s[i]) {
			return false
		}
	}
	return true
}

// isReasonToken reports whether s matches ^[a-z][a-z0-9_]{0,63}$.
func isReasonToken(s string) bool {
	if len(s) == 0 || len(s) > 64 || !isLowerAlpha(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isLowerAlpha(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// isDigit reports whether c is 0-9.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isLowerAlpha reports whether c is a-z.
func isLowerAlpha(c byte) bool { return 'a' <= c && c <= 'z' }

// isLowerHexByte reports whether c is 0-9 or a-f.
func isLowerHexByte(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'f' }

// utcTime is the schemas' pattern of a time in UTC (a verdict's
// last_seen).
var utcTime = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?Z$`)

// isUTCTime reports whether s matches utcTime.
func isUTCTime(s string) bool { return utcTime.MatchString(s) }
