package events

import (
	"regexp"
	"strings"
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

// digestEquals reports whether digest is "sha256:" and the lower-case hex
// of sum, as "sha256:"+hex.EncodeToString(sum[:]) == digest, without
// building the string.
func digestEquals(digest string, sum *[32]byte) bool {
	if len(digest) != len(digestPrefix)+64 || digest[:len(digestPrefix)] != digestPrefix {
		return false
	}
	const hexDigits = "0123456789abcdef"
	h := digest[len(digestPrefix):]
	for i, b := range sum {
		if h[2*i] != hexDigits[b>>4] || h[2*i+1] != hexDigits[b&0xF] {
			return false
		}
	}
	return true
}

// isTargetSubject reports whether subject is t.String(), without building
// it.
func isTargetSubject(subject string, t Target) bool {
	k := len(t.Kind)
	return len(subject) == k+1+len(t.Identifier) && subject[:k] == t.Kind && subject[k] == ':' && subject[k+1:] == t.Identifier
}

// isEvidenceSubject reports whether subject is EvidenceSubject(host,
// targetKind), without building it.
func isEvidenceSubject(subject, host, targetKind string) bool {
	rest, ok := strings.CutPrefix(subject, Prefix+".evidence.")
	if !ok {
		return false
	}
	hostTok, kindTok, _ := strings.Cut(rest, ".") // tokens hold no '.'
	return isToken(hostTok, host) && isToken(kindTok, targetKind)
}

// isToken reports whether tok is Token(s), without building it unless s
// is long enough for Token to shorten it.
func isToken(tok, s string) bool {
	if s == "" {
		return tok == "="
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if tokenByte(s[i]) {
			n++
		} else {
			n += 3
		}
	}
	if n > MaxTokenLength {
		return Token(s) == tok
	}
	if len(tok) != n {
		return false
	}
	j := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if tokenByte(c) {
			if tok[j] != c {
				return false
			}
			j++
			continue
		}
		if tok[j] != '=' || tok[j+1] != upperHex[c>>4] || tok[j+2] != upperHex[c&0xF] {
			return false
		}
		j += 3
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
