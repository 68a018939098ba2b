package events_test

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// The regular expressions the hand-written checks replace (the schemas'
// patterns, and the W3C traceparent format).
var (
	digestRE      = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	hex64RE       = regexp.MustCompile(`^[0-9a-f]{64}$`)
	reasonTokenRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$`)
)

// patternCases are strings at and around the patterns' edges.
func patternCases() []string {
	hex64 := strings.Repeat("0123456789abcdef", 4)
	cases := []string{
		"", "sha256:", "sha256", "a", "z", "_", "0", "a_0", "a-b", "A", "aB", "a\n", "\na", "é",
		hex64, hex64[:63], hex64 + "0", strings.ToUpper(hex64), hex64[:63] + "g", hex64[:63] + "\n",
		"sha256:" + hex64, "sha256:" + hex64[:63], "sha256:" + hex64 + "0", "SHA256:" + hex64,
		"sha256:" + strings.ToUpper(hex64), "sha256:" + hex64 + "\n", "sha256;" + hex64, " sha256:" + hex64,
		"sha256:" + hex64[:62] + "é", "sha512:" + hex64,
		strings.Repeat("a", 64), strings.Repeat("a", 65), "a" + strings.Repeat("_", 63), "a" + strings.Repeat("9", 64),
		fixtureTraceparent, strings.ToUpper(fixtureTraceparent), "01" + fixtureTraceparent[2:],
		fixtureTraceparent + "\n", fixtureTraceparent[:54], fixtureTraceparent + "0",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-00000000000000000000000000000000-0000000000000000-00",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
		"00-4bf92f3577b34da6a3ce929d0e0e473é-00f067aa0ba902b7-01",
	}
	for i := range 64 {
		for _, c := range []byte{'/', ':', '`', '{', 'G', 'g', '-', '\x00', '\xff'} {
			b := []byte(hex64)
			b[i] = c
			cases = append(cases, string(b), "sha256:"+string(b))
		}
	}
	return cases
}

// checkPatterns holds every hand-written check to its expression on s.
func checkPatterns(t *testing.T, s string) {
	assert.Equal(t, digestRE.MatchString(s), events.ValidDigest(s), "digest %q", s)
	assert.Equal(t, hex64RE.MatchString(s), events.IsHex64(s), "hex64 %q", s)
	assert.Equal(t, reasonTokenRE.MatchString(s), events.IsReasonToken(s), "reason token %q", s)
	want := ""
	if m := traceparentRE.FindStringSubmatch(s); m == nil {
		want = "not a version-00 W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case)"
	} else if strings.Trim(m[1], "0") == "" || strings.Trim(m[2], "0") == "" {
		want = "all-zero trace-id or parent-id"
	}
	got := ""
	if err := events.ValidTraceparent(s); err != nil {
		got = err.Error()
	}
	assert.Equal(t, want, got, "traceparent %q", s)
}

func TestPatternChecksMatchTheirExpressions(t *testing.T) {
	for _, s := range patternCases() {
		checkPatterns(t, s)
	}
}

func FuzzPatternChecks(f *testing.F) {
	for _, s := range patternCases() {
		f.Add(s)
	}
	f.Fuzz(checkPatterns)
}

func TestDigestEquals(t *testing.T) {
	for _, data := range []string{"", "x", `{"a":1}`} {
		sum := sha256.Sum256([]byte(data))
		want := "sha256:" + hex.EncodeToString(sum[:])
		assert.True(t, events.DigestEquals(want, []byte(data)))
		for _, other := range []string{"", "sha256:", want[:len(want)-1], want + "0", strings.ToUpper(want),
			"sha257" + want[6:], want[:len(want)-1] + "g", digestA} {
			assert.False(t, events.DigestEquals(other, []byte(data)), "%q", other)
		}
		for i := len("sha256:"); i < len(want); i++ {
			b := []byte(want)
			b[i] ^= 1
			assert.False(t, events.DigestEquals(string(b), []byte(data)), "%q", b)
		}
	}
}

func FuzzDigestEquals(f *testing.F) {
	f.Add("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", []byte(""))
	f.Add(digestA, []byte("x"))
	f.Fuzz(func(t *testing.T, digest string, data []byte) {
		sum := sha256.Sum256(data)
		want := "sha256:" + hex.EncodeToString(sum[:])
		require.Equal(t, want == digest, events.DigestEquals(digest, data))
		require.True(t, events.DigestEquals(want, data))
	})
}

// capturedAtSchema is the snapshot's captured_at as the evidence.collected
// schema states it, formats asserted.
func capturedAtSchema(tb testing.TB) *jsonschema.Schema {
	tb.Helper()
	c, err := events.Compiler()
	require.NoError(tb, err)
	sch, err := c.Compile("https://runtimetruth.dev/schemas/events/evidence.collected/v1.json#/$defs/snapshot/properties/captured_at")
	require.NoError(tb, err)
	return sch
}

// dateTimes are captured_at values at and around the edges of the rule,
// and whether a snapshot takes them.
var dateTimes = []struct {
	ts string
	ok bool
}{
	{"2026-10-06T03:09:40Z", true}, {"2026-10-06T03:09:40.123456Z", true}, {"2026-10-06t03:09:40z", true},
	{"2026-10-06t03:09:40Z", true}, {"2026-10-06T03:09:40z", true}, {"2026-10-06T03:09:40+01:00", true},
	{"2026-10-06T03:09:40+00:00", true}, {"2026-10-06T03:09:40-00:00", true}, {"2026-10-06T03:09:40-23:59", true},
	{"2026-10-06T03:09:40+23:59", true}, {"2026-10-06T03:09:40.5Z", true}, {"2026-10-06T03:09:40.120Z", true},
	{"2026-10-06T03:09:40.0Z", true}, {"2026-10-06T03:09:40.123456789Z", true}, {"2026-10-06T03:09:40.123456789123Z", true},
	{"2026-10-06T05:09:40.5+02:00", true}, {"0000-01-01T00:00:00Z", true}, {"0001-01-01T00:00:00Z", true},
	{"9999-12-31T23:59:59.999Z", true}, {"2024-02-29T00:00:00Z", true},
	{"2026-10-06T03:09:40+24:00", false}, {"2026-10-06T03:09:40+01:60", false}, {"2026-10-06T03:09:40+0100", false},
	{"2026-10-06T03:09:40+01", false}, {"2026-10-06T23:59:60Z", false}, {"2026-10-06T23:59:60+00:00", false},
	{"2026-10-06T22:59:60-01:00", false}, {"2026-10-06T00:59:60+01:00", false}, {"2026-10-06T12:00:60Z", false},
	{"2026-10-06T24:00:00Z", false}, {"2026-10-06T03:60:40Z", false}, {"2026-10-06T03:09:61Z", false},
	{"2026-10-06T+3:+9:+0Z", false}, {"2026-10-06T-3:09:40Z", false}, {"2026-10-06T::::::::Z", false},
	{"2026-10-06T0::09:40Z", false}, {"2026-10-06T03:09:40.Z", false}, {"2026-10-06T03:09:40.1", false},
	{"2026-10-06T03:09:40", false}, {"2026-10-06 03:09:40Z", false}, {"2026-10-06T03:09:40 Z", false},
	{"2026-13-06T03:09:40Z", false}, {"2026-02-30T03:09:40Z", false}, {"2026-02-29T00:00:00Z", false},
	{"2026-10-06T03:09:40+:1:00", false}, {"2026-10-06T03:09:40+1::00", false}, {"2026-10-06T03:09:40+01:+0", false},
	{"2026-10-06T03:09:40++1:00", false}, {"2026-10-06T03:09:40+-1:00", false}, {"2026-10-06T03:09:40.١Z", false},
	{"2026-10-06T03:09:40,5Z", false}, {"2026-10-06T03:09:40Zx", false}, {"2026-10-06T03:09:40Z\n", false},
	{"", false}, {"garbage", false}, {"2026-10-06", false}, {"2026-10-06T03:09:4", false},
}

// The schema's captured_at (format and pattern) is the snapshot's rule:
// both accept the table's good timestamps and refuse the others.
func TestCapturedAtSchemaIsTheSnapshotRule(t *testing.T) {
	sch := capturedAtSchema(t)
	for _, tc := range dateTimes {
		assert.Equal(t, tc.ok, snapshot.CheckTime(tc.ts) == nil, "snapshot: %q", tc.ts)
		assert.Equal(t, tc.ok, sch.Validate(tc.ts) == nil, "schema: %q", tc.ts)
	}
}

func FuzzCapturedAtSchema(f *testing.F) {
	sch := capturedAtSchema(f)
	for _, tc := range dateTimes {
		f.Add(tc.ts)
	}
	f.Fuzz(func(t *testing.T, s string) {
		require.Equal(t, sch.Validate(s) == nil, snapshot.CheckTime(s) == nil, "%q", s)
	})
}

var subjectParts = []string{
	"", "web-01", "web-01.example.com", "agent worker.service", "systemd.unit", "a:b", "=", "=2E", "==", "é",
	"a.b", ".", "*", ">", strings.Repeat("x", 128), strings.Repeat("x", 129), strings.Repeat(".", 42), strings.Repeat(".", 43),
	strings.Repeat("é", 40), "\x00", "\xff",
}

// checkSubjects holds the subject matchers to the functions that build
// the subjects, on a and b and on the subjects built from other parts.
func checkSubjects(t *testing.T, a, b, c string) {
	for _, tok := range []string{events.Token(a), events.Token(b), a, b, c, events.Token(a) + "x", strings.ToLower(events.Token(a))} {
		assert.Equal(t, events.Token(a) == tok, events.IsToken(tok, a), "Token(%q) vs %q", a, tok)
	}
	for _, subj := range []string{
		events.EvidenceSubject(a, b), events.EvidenceSubject(b, a), events.EvidenceSubject(a, c), events.EvidenceSubject(a+"."+b, c),
		events.VerdictSubject(a, events.Status(b)), "rt.evidence." + a + "." + b, "rt.evidence." + a, c,
	} {
		assert.Equal(t, events.EvidenceSubject(a, b) == subj, events.IsEvidenceSubject(subj, a, b), "EvidenceSubject(%q, %q) vs %q", a, b, subj)
	}
	target := events.Target{Kind: a, Identifier: b}
	for _, subj := range []string{target.String(), a + ":" + c, c, a + b, a + "::" + b, b + ":" + a} {
		assert.Equal(t, target.String() == subj, events.IsTargetSubject(subj, target), "%v vs %q", target, subj)
	}
}

func TestSubjectMatchers(t *testing.T) {
	for _, a := range subjectParts {
		for _, b := range subjectParts {
			checkSubjects(t, a, b, "rt.evidence.x.y")
		}
	}
}

func FuzzSubjectMatchers(f *testing.F) {
	for i, a := range subjectParts {
		f.Add(a, subjectParts[(i+1)%len(subjectParts)], "rt.evidence."+a)
	}
	f.Fuzz(checkSubjects)
}

func TestValidDigest(t *testing.T) {
	for d, want := range map[string]bool{
		"sha256:" + strings.Repeat("0a", 32): true,
		"sha256:" + strings.Repeat("0A", 32): false,
		"sha256:" + strings.Repeat("0a", 31): false,
		"sha512:" + strings.Repeat("0a", 32): false,
		strings.Repeat("0a", 32):             false,
		"sha256:" + strings.Repeat("zz", 32): false,
		"":                                   false,
	} {
		assert.Equal(t, want, events.ValidDigest(d), d)
	}
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]*events.Target{
		"git.repository:/srv/app":            {Kind: "git.repository", Identifier: "/srv/app"},
		"systemd.unit:agent worker.service":  {Kind: "systemd.unit", Identifier: "agent worker.service"},
		"codex.agent:/home/a:b":              {Kind: "codex.agent", Identifier: "/home/a:b"},
		"/srv/app:x":                         nil, // a path is no kind
		"no-colon":                           nil,
		":id":                                nil,
		"kind:":                              nil,
		"kind:bad\x1bescape":                 nil,
		"kind:" + strings.Repeat("x", 1<<12): nil,
	} {
		got, err := events.ParseTarget(in)
		if want == nil {
			assert.Error(t, err, "%q", in)
			continue
		}
		require.NoError(t, err, "%q", in)
		assert.Equal(t, *want, got)
		assert.Equal(t, in, got.String(), "String writes what ParseTarget reads")
	}
}

// The traceparent check (one, without the regular expression) against
// the expression, on values around the edges.
func TestTraceparentValues(t *testing.T) {
	values := []string{fixtureTraceparent, "", "00", strings.ToUpper(fixtureTraceparent),
		"01" + fixtureTraceparent[2:], fixtureTraceparent + "x", fixtureTraceparent[:54],
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
		"00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902bG-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
	}
	for _, v := range values {
		checkPatterns(t, v)
	}
}
