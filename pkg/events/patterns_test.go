package events_test

import (
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
