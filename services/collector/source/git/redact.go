package git

import "strings"

// RedactURL removes credentials from a remote URL before it becomes
// evidence. URLs are rewritten by string rules rather than net/url, so that
// every input, parseable or not, has a defined redaction:
//
//   - scheme://[userinfo@]host/path?query#fragment (https, http, ftp, git,
//     file, ...): the whole userinfo is removed, user name included, because
//     hosting services accept tokens in the user position
//     (https://ghp_token@github.com/..., https://oauth2:token@gitlab...), and
//     the query and fragment are removed (signed URLs carry tokens there).
//     https://user:tok@host/x?token=y becomes https://host/x.
//   - ssh://, git+ssh:// and ssh+git://: a plain login name is kept
//     (ssh://git@host/x), since ssh authenticates with keys and the name is
//     not a secret; userinfo containing ':' (a password) is removed whole.
//   - scp-style [user@]host:path (no "://", a ':' before any '/'): a plain
//     login name such as git@ is kept for the same reason; a user part
//     containing ':' is removed whole.
//   - anything else (local paths) is returned unchanged.
//
// Redaction only removes; it never alters the host or path, so two URLs that
// differ only in credentials redact to the same evidence and rotating a
// token is not drift.
func RedactURL(raw string) string {
	if scheme, rest, ok := strings.Cut(raw, "://"); ok && isScheme(scheme) {
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		authority, tail := rest[:end], rest[end:]
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			user := authority[:at]
			authority = authority[at+1:]
			if isSSH(scheme) && plainUser(user) {
				authority = user + "@" + authority
			}
		}
		if cut := strings.IndexAny(tail, "?#"); cut >= 0 {
			tail = tail[:cut]
		}
		return scheme + "://" + authority + tail
	}
	// scp-style: git treats "host:path" as ssh when the ':' comes before
	// any '/'.
	colon := strings.IndexByte(raw, ':')
	if colon < 0 || strings.IndexByte(raw[:colon], '/') >= 0 {
		return raw
	}
	hostPart := raw[:colon]
	if at := strings.LastIndexByte(hostPart, '@'); at >= 0 {
		if plainUser(hostPart[:at]) {
			return raw
		}
		return raw[at+1:]
	}
	// "user:pw@host:path": the first ':' is inside the userinfo. Drop
	// everything up to the last '@' when a host:path follows it.
	if at := strings.LastIndexByte(raw, '@'); at > colon &&
		!strings.ContainsRune(raw[:at], '/') && strings.ContainsRune(raw[at+1:], ':') {
		return raw[at+1:]
	}
	return raw
}

// isScheme reports whether s is an RFC 3986 scheme: a letter, then
// letters, digits, '+', '-' and '.'.
func isScheme(s string) bool {
	return madeOf(s, func(i int, r rune) bool {
		return isLetter(r) || i > 0 && (isDigit(r) || r == '+' || r == '-' || r == '.')
	})
}

func isSSH(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "ssh", "git+ssh", "ssh+git":
		return true
	}
	return false
}

// plainUser reports whether u is a login name with no password: non-empty,
// no ':' and no characters outside a conservative user-name set.
func plainUser(u string) bool {
	return madeOf(u, func(_ int, r rune) bool {
		return isLetter(r) || isDigit(r) || r == '.' || r == '_' || r == '-'
	})
}

// madeOf reports whether s is non-empty and ok accepts each of its runes,
// given with its byte offset.
func madeOf(s string, ok func(i int, r rune) bool) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !ok(i, r) {
			return false
		}
	}
	return true
}

// isLetter and isDigit are ASCII only.
func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

func isDigit(r rune) bool { return r >= '0' && r <= '9' }
