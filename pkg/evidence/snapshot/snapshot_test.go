package snapshot_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/internal/evidencetest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

func TestSerializationMatchesRuntimeTruth(t *testing.T) {
	// The golden files were written by Python's json.dumps, as RuntimeTruth
	// writes snapshots (ensure_ascii, sorted keys).
	s := evidencetest.Snapshot(t, "unicode.json")
	compact, err := s.Marshal(false)
	require.NoError(t, err)
	evidencetest.Golden(t, "snapshots/unicode.compact.golden", compact)
	pretty, err := s.Marshal(true)
	require.NoError(t, err)
	evidencetest.Golden(t, "snapshots/unicode.pretty.golden", pretty)
	canonical, err := s.Canonical()
	require.NoError(t, err)
	evidencetest.Golden(t, "snapshots/unicode.canonical.golden", canonical)
}

func TestDigestMatchesRuntimeTruth(t *testing.T) {
	// Expected values computed with Python: sha256 over RFC 8785 bytes.
	tests := []struct{ file, want string }{
		{"before.json", "sha256:63dfa8b0dca4c0f81d0050c8bd068d2b66405310569435209c2693185483c7a6"},
		{"before-reordered.json", "sha256:63dfa8b0dca4c0f81d0050c8bd068d2b66405310569435209c2693185483c7a6"},
		{"after.json", "sha256:ebac7a647b5a8d43e02eb19652e86d3239ee1946953b716c4ce745e8c89d702c"},
		{"unicode.json", "sha256:62cc8fe19255c6aa069e9f9f22bc58b0fc621fb9bb1ec7b1e8c6fd51902712cf"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			got, err := evidencetest.Snapshot(t, tc.file).Digest()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestDigestChangesWhenBaselineChanges(t *testing.T) {
	s := evidencetest.Snapshot(t, "before.json")
	d1, err := s.Digest()
	require.NoError(t, err)
	s.Evidence[2].Data["dirty"] = snapshot.Bool(true)
	d2, err := s.Digest()
	require.NoError(t, err)
	assert.NotEqual(t, d1, d2)
}

func TestRoundTripPreservesNullAndTypes(t *testing.T) {
	s := evidencetest.Snapshot(t, "unicode.json")
	b, err := s.Marshal(false)
	require.NoError(t, err)
	again, err := snapshot.Parse(b)
	require.NoError(t, err)
	assert.Equal(t, s.Evidence, again.Evidence)
	assert.Equal(t, s.CapturedAt, again.CapturedAt)
	cfg, ok := again.Record("codex.config")
	require.True(t, ok)
	assert.Equal(t, snapshot.Null(), cfg.Data["web_search"])
	assert.Equal(t, snapshot.Int(9007199254740991), cfg.Data["big"])
}

func TestParseRejects(t *testing.T) {
	valid := string(evidencetest.Read(t, "snapshots/before.json"))
	tests := []struct {
		name, doc, want string
	}{
		{"empty", ``, "unexpected end of JSON input"},
		{"truncated", valid[:len(valid)/2], "invalid snapshot: line 28 column 15: unexpected end of JSON input"},
		{"truncated after value", valid[:len(valid)-3], "unexpected end of JSON input"},
		{"binary junk", "\x00\xff\xfe{", "invalid character"},
		{"not an object", `[1]`, "snapshot: must be an object, got array"},
		{"duplicate top-level key", `{"schema_version":1,"schema_version":1}`, `duplicate object member name "schema_version"`},
		{"duplicate data key", strings.Replace(valid, `"cwd": "/srv/agent",`, `"cwd": "/srv/agent", "cwd": "/x",`, 1), `duplicate object member name "cwd"`},
		{"schema version 2", strings.Replace(valid, `"schema_version": 1`, `"schema_version": 2`, 1), "unsupported schema_version 2"},
		{"schema version string", strings.Replace(valid, `"schema_version": 1`, `"schema_version": "1"`, 1), "schema_version: must be an integer, got string"},
		{"schema version bool", strings.Replace(valid, `"schema_version": 1`, `"schema_version": true`, 1), "schema_version: must be an integer, got boolean"},
		{"naive timestamp", strings.Replace(valid, `2026-10-06T03:09:40Z`, `2026-10-06T03:09:40`, 1), "captured_at: \"2026-10-06T03:09:40\" must be timezone-aware"},
		{"garbage timestamp", strings.Replace(valid, `2026-10-06T03:09:40Z`, `yesterday`, 1), "is not an RFC 3339 timestamp"},
		{"unknown plane", strings.Replace(valid, `"plane": "live"`, `"plane": "imagined"`, 1), `evidence[0].plane: unknown plane "imagined"`},
		{"object data", strings.Replace(valid, `"main_pid": 3036`, `"main_pid": {"x": 1}`, 1), "evidence[0].data.main_pid: non-scalar value (object)"},
		{"list data", strings.Replace(valid, `"main_pid": 3036`, `"main_pid": [3036]`, 1), "evidence[0].data.main_pid: non-scalar value (array)"},
		{"float data", strings.Replace(valid, `"main_pid": 3036`, `"main_pid": 3036.5`, 1), "evidence[0].data.main_pid: non-integer number 3036.5"},
		{"huge integer", strings.Replace(valid, `"main_pid": 3036`, `"main_pid": 9007199254740992`, 1), "outside ±(2^53-1)"},
		{"unknown top-level key", strings.Replace(valid, `"schema_version": 1`, `"schema_version": 1, "extra": 1`, 1), `snapshot: unknown key "extra"`},
		{"unknown record key", strings.Replace(valid, `"plane": "live"`, `"plane": "live", "note": "x"`, 1), `evidence[0]: unknown key "note"`},
		{"missing source", strings.Replace(valid, `"source": {`, `"sourc": {`, 1), `evidence[0]: unknown key "sourc"`},
		{"empty kind", strings.Replace(valid, `"kind": "systemd.unit",`, `"kind": "",`, 1), "evidence[0].kind: must not be empty"},
		{"duplicate kind", strings.Replace(valid, `"kind": "linux.process"`, `"kind": "systemd.unit"`, 1), `evidence[1].kind: duplicate evidence kind "systemd.unit"`},
		{"trailing data", valid + "{}", "unexpected data after the top-level value"},
		{"NaN", strings.Replace(valid, `"main_pid": 3036`, `"main_pid": NaN`, 1), "invalid character 'N'"},
		{"lone surrogate", strings.Replace(valid, `"/srv/agent"`, `"\ud800"`, 1), "invalid surrogate pair"},
		{"invalid utf-8", strings.Replace(valid, `"/srv/agent"`, "\"\xc3\x28\"", 1), "invalid UTF-8"},
		{"control char", strings.Replace(valid, `"/srv/agent"`, "\"a\x01\"", 1), "control character"},
		{"deep nesting", strings.Repeat("[", 200) + strings.Repeat("]", 200), "nesting deeper than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := snapshot.Parse([]byte(tc.doc))
			require.Error(t, err)
			assert.True(t, errors.Is(err, snapshot.ErrFormat), "error %v should wrap ErrFormat", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestParseRejectsOversizedDocument(t *testing.T) {
	_, err := snapshot.Parse(make([]byte, snapshot.MaxSize+1))
	require.ErrorIs(t, err, snapshot.ErrTooLarge)
}

func TestSyntaxErrorNamesLineAndColumn(t *testing.T) {
	_, err := snapshot.Parse([]byte("{\n  \"schema_version\": 1,\n  \"captured_at\": tru\n}"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 3 column 21")
}

func TestFormatTimeMatchesPythonIsoformat(t *testing.T) {
	tests := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 10, 6, 3, 9, 40, 0, time.UTC), "2026-10-06T03:09:40Z"},
		{time.Date(2026, 10, 6, 3, 9, 40, 123456789, time.UTC), "2026-10-06T03:09:40.123456Z"},
		{time.Date(2026, 10, 6, 3, 9, 40, 1000, time.UTC), "2026-10-06T03:09:40.000001Z"},
		{time.Date(2026, 10, 6, 3, 9, 40, 0, time.FixedZone("", 2*3600)), "2026-10-06T03:09:40+02:00"},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, snapshot.FormatTime(tc.in))
	}
}

// withCapturedAt is before.json with captured_at written as ts.
func withCapturedAt(t *testing.T, ts string) string {
	t.Helper()
	valid := string(evidencetest.Read(t, "snapshots/before.json"))
	require.Equal(t, 1, strings.Count(valid, `"2026-10-06T03:09:40Z"`))
	return strings.Replace(valid, `"2026-10-06T03:09:40Z"`, strconv.Quote(ts), 1)
}

// captured_at is kept as written: read, written (compact and pretty) and
// digested verbatim, as RuntimeTruth does, whatever RFC 3339 form it has.
func TestCapturedAtIsKeptVerbatim(t *testing.T) {
	// The digests were computed with Python, independently of this code
	// (before.json is ASCII with integers only, so RFC 8785 is
	// json.dumps with sorted keys and no white space), in
	// pkg/evidence/testdata/snapshots:
	//
	//	python3 -c 'import hashlib,json,sys; d=json.load(open("before.json")); d["captured_at"]=sys.argv[1]; print("sha256:"+hashlib.sha256(json.dumps(d,sort_keys=True,separators=(",",":"),ensure_ascii=False).encode()).hexdigest())' TIMESTAMP
	tests := []struct{ ts, digest string }{
		{"2026-10-06T03:09:40Z", "sha256:63dfa8b0dca4c0f81d0050c8bd068d2b66405310569435209c2693185483c7a6"},
		{"2026-10-06T03:09:40.5Z", "sha256:4e9e73a781d1f1c2fa12be228bdab887051e8487762c6148aa53f911f154bf0e"},
		{"2026-10-06T03:09:40.120Z", "sha256:6023e48b93d40aea4ed3e982b86b9446c2997a58f94ad4fb3a59cda52f62c376"},
		{"2026-10-06T03:09:40.0Z", "sha256:a31dc87e2bf428e8d57037ab78240bc8e081190e1114c2f41bae553141660a7a"},
		{"2026-10-06T03:09:40+00:00", "sha256:4183adb3b84506977dd5fa9651efdb7688e4c82ba7c6090b806ca4ee4824a826"},
		{"2026-10-06T03:09:40-00:00", "sha256:01c97b077bfc963ae60431984c569ea1f55cfa3bf013290910cc4b2d869edbdd"},
		{"2026-10-06T05:09:40+02:00", "sha256:563aa26a0c3195f8d73277457e51c85c8f9d902a681b37a80a989fddfbd8942b"},
		{"2026-10-06T03:09:40.123456789Z", "sha256:9afd0e6eae3c27e88fb8d18e2d19222ffbcc13e184c419ee15888779cf003714"},
		{"0001-01-01T00:00:00Z", "sha256:1bf1461d70e0b15b4e7e96fb240b21e4e3a32feac27beb128c4ce51d99eb3fba"},
		{"2026-10-06t03:09:40z", "sha256:caff8fc47687e38a6f6b771295cc2cccb456bf8ec8fe9c81d86af0e5c3819bfc"},
		{"2026-10-06t03:09:40Z", "sha256:ea181b3c38ec502317b1db7dfd9642e74f3c28c11b5aea68f6ccceee86123fc9"},
		{"2026-10-06T03:09:40z", "sha256:76384d1b36db68368281abac2c869d8519312a80369b4f49001d2fb9d668218a"},
	}
	for _, tc := range tests {
		t.Run(tc.ts, func(t *testing.T) {
			doc := withCapturedAt(t, tc.ts)
			s, err := snapshot.Parse([]byte(doc))
			require.NoError(t, err)
			assert.Equal(t, tc.ts, s.CapturedAt)
			digest, err := s.Digest()
			require.NoError(t, err)
			assert.Equal(t, tc.digest, digest)
			canonical, err := s.Canonical()
			require.NoError(t, err)
			assert.Contains(t, string(canonical), `{"captured_at":"`+tc.ts+`",`)
			pretty, err := s.Marshal(true)
			require.NoError(t, err)
			assert.Equal(t, strings.TrimSuffix(doc, "\n"), string(pretty), "the file as Python writes it")
			compact, err := s.Marshal(false)
			require.NoError(t, err)
			assert.Contains(t, string(compact), `{"captured_at":"`+tc.ts+`",`)
			again, err := snapshot.Parse(compact)
			require.NoError(t, err)
			assert.Equal(t, s, again)
		})
	}
}

// Every captured_at but an RFC 3339 date-time is refused, by Parse and by
// Validate alike.
func TestCapturedAtRejects(t *testing.T) {
	tests := []struct{ ts, want string }{
		{"2026-10-06T03:09:40", `"2026-10-06T03:09:40" must be timezone-aware (end in Z or an offset)`},
		{"2026-10-06T03:09:40.5", `"2026-10-06T03:09:40.5" must be timezone-aware (end in Z or an offset)`},
		{"2026-10-06", `"2026-10-06" is not an RFC 3339 timestamp`},
		{"", `"" is not an RFC 3339 timestamp`},
		{"garbage", `"garbage" is not an RFC 3339 timestamp`},
		{"2026-13-01T00:00:00Z", `"2026-13-01T00:00:00Z" is not an RFC 3339 timestamp (month out of range)`},
		{"2026-02-29T00:00:00Z", `"2026-02-29T00:00:00Z" is not an RFC 3339 timestamp (day out of range)`},
		{"2026-10-06T24:00:00Z", `"2026-10-06T24:00:00Z" is not an RFC 3339 timestamp (hour out of range)`},
		{"2026-10-06T23:59:60Z", `"2026-10-06T23:59:60Z" is not an RFC 3339 timestamp (second out of range)`},
		{"2026-10-06T03:09:40+24:00", `"2026-10-06T03:09:40+24:00" is not an RFC 3339 timestamp (offset hour out of range)`},
		{"2026-10-06T03:09:40+01:60", `"2026-10-06T03:09:40+01:60" is not an RFC 3339 timestamp (offset minute out of range)`},
		{"2026-10-06 03:09:40Z", `"2026-10-06 03:09:40Z" is not an RFC 3339 timestamp`},
		{"2026-10-06T03:09:40.Z", `"2026-10-06T03:09:40.Z" is not an RFC 3339 timestamp`},
		{"2026-10-06T03:09:40,5Z", `"2026-10-06T03:09:40,5Z" is not an RFC 3339 timestamp`},
		{"2026-10-06T03:09:40+0100", `"2026-10-06T03:09:40+0100" is not an RFC 3339 timestamp`},
		{"2026-10-06T03:09:40+01", `"2026-10-06T03:09:40+01" is not an RFC 3339 timestamp`},
		{"2026-10-06T03:09:40ZZ", `"2026-10-06T03:09:40ZZ" is not an RFC 3339 timestamp`},
		{"2026-10-06T03:09:40Z\n", `"2026-10-06T03:09:40Z\n" is not an RFC 3339 timestamp`},
		{"2026-10-06T3:09:40Z", `"2026-10-06T3:09:40Z" is not an RFC 3339 timestamp`},
		{"+2026-10-06T03:09:40Z", `"+2026-10-06T03:09:40Z" is not an RFC 3339 timestamp`},
		{"2026-10-06T03:09:40.١Z", `"2026-10-06T03:09:40.١Z" is not an RFC 3339 timestamp`},
	}
	for _, tc := range tests {
		t.Run(tc.ts, func(t *testing.T) {
			_, err := snapshot.Parse([]byte(withCapturedAt(t, tc.ts)))
			require.ErrorIs(t, err, snapshot.ErrFormat)
			assert.Equal(t, "invalid snapshot: captured_at: "+tc.want, err.Error())
			s := evidencetest.Snapshot(t, "before.json")
			s.CapturedAt = tc.ts
			err = s.Validate()
			require.ErrorIs(t, err, snapshot.ErrFormat)
			assert.Equal(t, "invalid snapshot: captured_at: "+tc.want, err.Error())
			_, err = s.Digest()
			require.ErrorIs(t, err, snapshot.ErrFormat)
		})
	}
	_, err := snapshot.Parse([]byte(strings.Replace(withCapturedAt(t, "x"), `"x"`, "1", 1)))
	require.EqualError(t, err, "invalid snapshot: captured_at: must be a string, got number")
}

// A snapshot built in code keeps the time given, and New writes the time
// as RuntimeTruth's collectors do.
func TestCapturedAtInCode(t *testing.T) {
	s := evidencetest.Snapshot(t, "before.json")
	s.CapturedAt = "0001-01-01T00:00:00Z" // the zero time.Time: a time like any other
	require.NoError(t, s.Validate())
	s.CapturedAt = "2026-10-06T03:09:40.120+02:00"
	b, err := s.Marshal(false)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"captured_at":"2026-10-06T03:09:40.120+02:00"`)
	before := time.Now().UTC()
	n := snapshot.New(snapshot.Target{Kind: "git.repository", Identifier: "/r"})
	require.NoError(t, n.Validate())
	at, err := time.Parse(time.RFC3339Nano, n.CapturedAt)
	require.NoError(t, err)
	assert.Equal(t, snapshot.FormatTime(at), n.CapturedAt)
	assert.False(t, at.Before(before.Truncate(time.Microsecond)))
	assert.True(t, strings.HasSuffix(n.CapturedAt, "Z"))
}

func TestValueTypesAreDistinct(t *testing.T) {
	assert.NotEqual(t, snapshot.Bool(true), snapshot.Int(1))
	assert.NotEqual(t, snapshot.Bool(false), snapshot.Int(0))
	assert.NotEqual(t, snapshot.Null(), snapshot.String(""))
	assert.NotEqual(t, snapshot.String("1"), snapshot.Int(1))
	assert.Equal(t, snapshot.Int(7), snapshot.Int(7))
}

func TestNewSnapshotMarshals(t *testing.T) {
	s := snapshot.New(snapshot.Target{Kind: "git.repository", Identifier: "/r"}, snapshot.Record{
		Plane: snapshot.Live, Kind: "git.repository",
		Source: snapshot.Source{Collector: "git", Method: "git rev-parse/status"},
		Data:   snapshot.Data{"branch": snapshot.Null(), "dirty": snapshot.Bool(false)},
	})
	b, err := s.Marshal(false)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"data":{"branch":null,"dirty":false}`)
	assert.True(t, strings.HasSuffix(string(b), `"target":{"identifier":"/r","kind":"git.repository"}}`))
}

func TestValidateRejectsBadRecords(t *testing.T) {
	s := snapshot.New(snapshot.Target{Kind: "git.repository", Identifier: "/r"}, snapshot.Record{
		Plane: "maybe", Kind: "git.repository", Source: snapshot.Source{Collector: "git", Method: "m"},
	})
	_, err := s.Marshal(false)
	require.ErrorIs(t, err, snapshot.ErrFormat)
	s.Evidence[0].Plane = snapshot.Live
	s.Evidence[0].Data = snapshot.Data{"n": snapshot.Int(1 << 60)}
	_, err = s.Digest()
	require.ErrorContains(t, err, "outside")
}

// Quote is Python's repr(): the outputs are what repr gives for the same
// strings, and no control character reaches a message.
func TestQuoteIsPythonRepr(t *testing.T) {
	for in, want := range map[string]string{
		"agent.service":           `'agent.service'`,
		"it's":                    `"it's"`,
		`say "it's"`:              `'say "it\'s"'`,
		`a\b`:                     `'a\\b'`,
		"tab\tnl\ncr\r":           `'tab\tnl\ncr\r'`,
		"bell\x07del\x7f":         `'bell\x07del\x7f'`,
		"c1\u0085nbsp\u00a0é":     `'c1\x85nbsp\xa0é'`,
		"ls\u2028bom\ufeff":       `'ls\u2028bom\ufeff'`,
		"emoji☕\U0001F600":        "'emoji☕\U0001F600'",
		"private\U000F0000":       `'private\U000f0000'`,
		"bad\xffbyte":             `'bad\xffbyte'`,
		"git.repository.head\x01": `'git.repository.head\x01'`,
	} {
		assert.Equal(t, want, snapshot.Quote(in), "%q", in)
	}
}
