package events

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// NATS subjects. Every event goes to one subject under the "rt." prefix;
// the variable parts are subject tokens made with Token. The streams of
// package topology capture these subjects with the Filter patterns.
const (
	// Prefix is the first token of every subject.
	Prefix = "rt"

	// FilterEvidence matches the subjects of evidence.collected events,
	// rt.evidence.<host>.<target-kind>.
	FilterEvidence = "rt.evidence.>"
	// FilterIntegrity matches the subjects of runnable.modified events,
	// rt.integrity.<host>.
	FilterIntegrity = "rt.integrity.>"
	// FilterCollect matches the subjects of collection.failed events,
	// rt.collect.failed.<host>.
	FilterCollect = "rt.collect.>"
	// FilterVerdict matches the subjects of the verdict events,
	// rt.verdict.<host>.<status>.
	FilterVerdict = "rt.verdict.>"
	// FilterBaseline matches the subjects of baseline.changed events,
	// rt.baseline.<target-kind>.<target-identifier>.
	FilterBaseline = "rt.baseline.>"
	// FilterAttestation matches the subjects of attestation.created events,
	// rt.attestation.<target-kind>.<target-identifier>.
	FilterAttestation = "rt.attestation.>"
	// FilterHostKey matches the subjects of host.key.changed events,
	// rt.hostkey.<host>.
	FilterHostKey = "rt.hostkey.>"
	// FilterDeadLetter matches the dead-letter subjects,
	// rt.dlq.<stream>.<host>.
	FilterDeadLetter = "rt.dlq.>"
)

// EvidenceSubject is rt.evidence.<host>.<target-kind>.
func EvidenceSubject(host, targetKind string) string {
	return join("evidence", Token(host), Token(targetKind))
}

// IntegritySubject is rt.integrity.<host>.
func IntegritySubject(host string) string { return join("integrity", Token(host)) }

// CollectFailedSubject is rt.collect.failed.<host>.
func CollectFailedSubject(host string) string { return join("collect", "failed", Token(host)) }

// VerdictSubject is rt.verdict.<host>.<status>.
func VerdictSubject(host string, status Status) string {
	return join("verdict", Token(host), Token(string(status)))
}

// BaselineSubject is rt.baseline.<target-kind>.<target-identifier>.
func BaselineSubject(t Target) string { return join("baseline", TargetTokens(t)) }

// AttestationSubject is rt.attestation.<target-kind>.<target-identifier>.
func AttestationSubject(t Target) string { return join("attestation", TargetTokens(t)) }

// HostKeySubject is rt.hostkey.<host>.
func HostKeySubject(host string) string { return join("hostkey", Token(host)) }

// CollectNowSubject is rt.ctl.collect.<host>, the request-reply subject on
// which a host's collector collects now (core NATS, outside every stream:
// the EVIDENCE stream captures rt.collect.>).
func CollectNowSubject(host string) string { return join("ctl", "collect", Token(host)) }

// AttestSubject is the request-reply subject on which an attestor signs
// the stored baseline of a target (core NATS, outside every stream: no
// stream captures rt.ctl.>). Attestors share it in a queue group; the
// request and the reply are JSON (services/attestor's SignRequest and
// SignReply). It is the default of the attestor's "subject" setting.
const AttestSubject = Prefix + ".ctl.attest"

// Keys of the baselines bucket. A target's baseline is stored under
// TargetTokens (<kind>.<identifier>: two tokens), the attestation of that
// baseline — the signed statement and its Sigstore bundle — under
// AttestationKey (<kind>.<identifier>.attestation: three tokens).
const (
	// AttestationKeySuffix ends the key of an attestation record.
	AttestationKeySuffix = ".attestation"
	// BaselineKeysFilter matches the baselines of the bucket and none of
	// their attestation records.
	BaselineKeysFilter = "*.*"
)

// AttestationKey is the baselines-bucket key of the attestation record of
// a target's baseline: <kind>.<identifier>.attestation.
func AttestationKey(t Target) string { return TargetTokens(t) + AttestationKeySuffix }

// IsAttestationKey reports whether a baselines-bucket key is an
// attestation record's: three tokens, the last "attestation". A baseline
// key has two, even for a target whose identifier is "attestation".
func IsAttestationKey(key string) bool {
	return strings.HasSuffix(key, AttestationKeySuffix) && strings.Count(key, ".") == 2
}

// DeadLetterSubject is rt.dlq.<stream>.<host>, where the dead letters of
// the named stream's consumers go: <host> is the host token of the
// subject of the message dead-lettered (HostToken), so the DLQ stream
// keeps each host's newest dead letters apart from every other host's
// (topology: DeadLettersPerHost).
func DeadLetterSubject(stream, subject string) string {
	return join("dlq", Token(stream), HostToken(subject))
}

// DeadLetterFilter matches the dead letters of a stream's consumers, of
// every host: rt.dlq.<stream>.*.
func DeadLetterFilter(stream string) string { return join("dlq", Token(stream), "*") }

// HostToken is the token naming the host in a subject of the catalog's
// host events (rt.evidence.<host>.<kind>, rt.integrity.<host>,
// rt.collect.failed.<host>, rt.verdict.<host>.<status>), or "=" (Token
// of no host) for any other subject. It is the host a message claims by
// its subject, which per-host credentials make the publisher's own; the
// verifier budgets retries and the DLQ keeps dead letters by it.
func HostToken(subject string) string {
	tokens := strings.SplitN(subject, ".", 5)
	switch {
	case len(tokens) < 3 || tokens[0] != Prefix:
	case tokens[1] == "evidence" && len(tokens) >= 4, tokens[1] == "integrity" && len(tokens) == 3,
		tokens[1] == "verdict" && len(tokens) == 4:
		return tokens[2]
	case tokens[1] == "collect" && tokens[2] == "failed" && len(tokens) == 4:
		return tokens[3]
	}
	return Token("")
}

// TargetTokens renders a target as two subject tokens, <kind>.<identifier>;
// it is also the key of a target in the key-value buckets.
func TargetTokens(t Target) string { return Token(t.Kind) + "." + Token(t.Identifier) }

func join(tokens ...string) string { return Prefix + "." + strings.Join(tokens, ".") }

// Token encodes any string as one NATS subject token, reversibly (see
// ParseToken) and in the character set that NATS key-value keys also allow.
//
// Letters, digits, '-' and '_' stand for themselves; every other byte
// (including '.', ' ', '/', '*', '>', '=' and each byte of a multi-byte
// UTF-8 character) becomes '=' and two upper-case hex digits, as in
// quoted-printable: "web-01.example.com" → "web-01=2Eexample=2Ecom". The
// empty string becomes "=". An encoding longer than MaxTokenLength is cut
// to its first 96 characters (never inside an escape) followed by "==" and
// the first 24 hex digits of the SHA-256 of the value; such a token
// identifies the value but does not decode.
func Token(s string) string {
	if s == "" {
		return "="
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if tokenByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&0xF])
	}
	tok := b.String()
	if len(tok) <= MaxTokenLength {
		return tok
	}
	cut := 96
	for i := cut - 2; i < cut; i++ {
		if tok[i] == '=' { // never split "=XX"
			cut = i
			break
		}
	}
	sum := sha256.Sum256([]byte(s))
	return tok[:cut] + "==" + hex.EncodeToString(sum[:12])
}

// ErrToken is returned by ParseToken for a string Token does not produce.
var ErrToken = errors.New("invalid subject token")

// ErrHashedToken is returned by ParseToken for a shortened token, which
// names its value by hash and cannot be decoded.
var ErrHashedToken = fmt.Errorf("%w: shortened with a hash", ErrToken)

// ParseToken decodes a token made by Token.
func ParseToken(tok string) (string, error) {
	if tok == "=" {
		return "", nil
	}
	if tok == "" || len(tok) > MaxTokenLength {
		return "", fmt.Errorf("%w: length %d", ErrToken, len(tok))
	}
	if strings.Contains(tok, "==") {
		return "", ErrHashedToken
	}
	out := make([]byte, 0, len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case tokenByte(c):
			out = append(out, c)
		case c == '=' && i+2 < len(tok) && isUpperHex(tok[i+1]) && isUpperHex(tok[i+2]):
			b := unhex(tok[i+1])<<4 | unhex(tok[i+2])
			if tokenByte(b) {
				return "", fmt.Errorf("%w: %q escapes a plain character", ErrToken, tok[i:i+3])
			}
			out = append(out, b)
			i += 2
		default:
			return "", fmt.Errorf("%w: unexpected %q at %d", ErrToken, c, i)
		}
	}
	return string(out), nil
}

// ValidSubject reports whether s is a subject one can publish to: non-empty
// tokens of printable ASCII without '*' or '>'.
func ValidSubject(s string) bool {
	if s == "" {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c <= ' ' || c >= 0x7F || c == '*' || c == '>' {
				return false
			}
		}
	}
	return true
}

// Source returns the source attribute of events produced by a component
// ("collector", "verifier", "auditor", "attestor", "cli") instance
// (a host name, a pod name): "/<component>/<instance>", with the instance
// path-escaped.
func Source(component, instance string) string {
	return "/" + url.PathEscape(component) + "/" + url.PathEscape(instance)
}

const upperHex = "0123456789ABCDEF"

func tokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'A' + 10
}
