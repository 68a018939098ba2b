package statement_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/internal/evidencetest"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/statement/statementtest"
)

func digest(t testing.TB, s *snapshot.Snapshot) string {
	t.Helper()
	d, err := s.Digest()
	require.NoError(t, err)
	return d
}

func build(t testing.TB, s *snapshot.Snapshot) []byte {
	t.Helper()
	b, err := statement.Build(s)
	require.NoError(t, err)
	return b
}

// test_statement_is_minimal_and_canonical
func TestStatementIsMinimalAndCanonical(t *testing.T) {
	before := evidencetest.Snapshot(t, "before.json")
	got := build(t, before)
	hex := strings.TrimPrefix(digest(t, before), "sha256:")
	want := `{"_type":"https://in-toto.io/Statement/v1",` +
		`"predicate":{"attestation_schema_version":1,"canonicalization":"RFC8785","snapshot_schema_version":1},` +
		`"predicateType":"https://sidelobe.dev/runtimetruth/attestation/v1",` +
		`"subject":[{"digest":{"sha256":"` + hex + `"},"name":"runtimetruth-baseline"}]}`
	assert.Equal(t, want, string(got))
	canon, err := canonjson.Transform(got)
	require.NoError(t, err)
	assert.Equal(t, string(canon), string(got), "the statement is its own RFC 8785 form")
	assert.False(t, strings.HasSuffix(string(got), "\n"))

	fromDigest, err := statement.BuildDigest(digest(t, before), 1)
	require.NoError(t, err)
	assert.Equal(t, got, fromDigest)
}

// test_canonical_digest_is_independent_of_json_whitespace_and_object_key_order
// and test_canonical_digest_changes_when_baseline_changes, at the statement.
func TestStatementFollowsTheCanonicalDigest(t *testing.T) {
	assert.Equal(t, build(t, evidencetest.Snapshot(t, "before.json")), build(t, evidencetest.Snapshot(t, "before-reordered.json")))
	assert.NotEqual(t, build(t, evidencetest.Snapshot(t, "before.json")), build(t, evidencetest.Snapshot(t, "after.json")))
}

func TestBuildDigestRejectsABadDigest(t *testing.T) {
	for _, d := range []string{"", "sha256:", "sha256:ABCDEF", strings.Repeat("A", 64), strings.Repeat("0", 63)} {
		_, err := statement.BuildDigest(d, 1)
		assert.ErrorIs(t, err, statement.ErrInvalid, d)
	}
}

// test_write_and_load_statement_round_trip
func TestWriteAndParseRoundTrip(t *testing.T) {
	before := evidencetest.Snapshot(t, "before.json")
	path := filepath.Join(t.TempDir(), "baseline.intoto.json")
	require.NoError(t, statement.WriteFile(path, build(t, before), 0o644))
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, build(t, before), data)
	v, err := statement.Parse(data)
	require.NoError(t, err)
	require.NoError(t, statement.ValidateSnapshot(v, before))
	got, err := canonjson.Marshal(v)
	require.NoError(t, err)
	assert.Equal(t, data, got)
}

// test_write_statement_refuses_overwrite
func TestWriteFileRefusesOverwrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "baseline.intoto.json")
	require.NoError(t, os.WriteFile(path, []byte("keep"), 0o600))
	err := statement.WriteFile(path, []byte("new"), 0o644)
	require.ErrorIs(t, err, statement.ErrExists)
	assert.Contains(t, err.Error(), "refusing to overwrite existing file")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(data))

	// A dangling symbolic link is an existing name too: nothing is
	// created through it.
	link := filepath.Join(dir, "link.json")
	require.NoError(t, os.Symlink(filepath.Join(dir, "elsewhere.json"), link))
	require.ErrorIs(t, statement.WriteFile(link, []byte("new"), 0o644), statement.ErrExists)
	assert.NoFileExists(t, filepath.Join(dir, "elsewhere.json"))
}

// test_load_statement_rejects_noncanonical_json
func TestParseRejectsNonCanonicalJSON(t *testing.T) {
	good := build(t, evidencetest.Snapshot(t, "before.json"))
	var doc any
	require.NoError(t, json.Unmarshal(good, &doc))
	indented, err := json.MarshalIndent(doc, "", "  ")
	require.NoError(t, err)
	const typeMember = `"_type":"https://in-toto.io/Statement/v1"`
	for name, data := range map[string][]byte{
		"indented":         indented,
		"trailing newline": append(append([]byte(nil), good...), '\n'),
		"leading space":    append([]byte(" "), good...),
		"keys reordered":   []byte("{" + strings.TrimSuffix(strings.TrimPrefix(string(good), `{`+typeMember+`,`), "}") + "," + typeMember + "}"),
		"escaped solidus":  []byte(strings.Replace(string(good), "https://in-toto.io/", `https:\/\/in-toto.io\/`, 1)),
		"number as 1.0":    []byte(strings.Replace(string(good), `"attestation_schema_version":1`, `"attestation_schema_version":1.0`, 1)),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := statement.Parse(data)
			require.ErrorIs(t, err, statement.ErrNotCanonical)
			assert.Contains(t, err.Error(), "not RFC 8785 canonical JSON")
		})
	}
}

// test_load_statement_rejects_duplicate_json_keys
func TestParseRejectsDuplicateKeys(t *testing.T) {
	good := string(build(t, evidencetest.Snapshot(t, "before.json")))
	dup := strings.Replace(good, `"_type":"https://in-toto.io/Statement/v1",`, `"_type":"https://in-toto.io/Statement/v1","_type":"https://in-toto.io/Statement/v1",`, 1)
	_, err := statement.Parse([]byte(dup))
	require.ErrorIs(t, err, statement.ErrInvalid)
	assert.Contains(t, err.Error(), "duplicate")

	_, err = statement.Parse([]byte("not json"))
	require.ErrorIs(t, err, statement.ErrInvalid)
	_, err = statement.Parse([]byte(strings.Repeat(" ", statement.MaxSize+1)))
	require.ErrorIs(t, err, statement.ErrInvalid)
}

// test_validate_statement_accepts_exact_baseline_binding
func TestValidateAcceptsExactBaselineBinding(t *testing.T) {
	before := evidencetest.Snapshot(t, "before.json")
	require.NoError(t, statement.Verify(build(t, before), digest(t, before), 1))
	require.NoError(t, statement.Verify(build(t, before), strings.TrimPrefix(digest(t, before), "sha256:"), 1))
}

// test_validate_statement_rejects_different_baseline_digest
func TestValidateRejectsDifferentBaselineDigest(t *testing.T) {
	err := statement.Verify(build(t, evidencetest.Snapshot(t, "before.json")), digest(t, evidencetest.Snapshot(t, "after.json")), 1)
	require.ErrorIs(t, err, statement.ErrDigestMismatch)
	assert.NotErrorIs(t, err, statement.ErrInvalid)
}

// test_validate_statement_rejects_schema_or_trust_mutations, and more.
func TestValidateRejectsSchemaOrTrustMutations(t *testing.T) {
	before := evidencetest.Snapshot(t, "before.json")
	good := build(t, before)
	pred := func(m map[string]any) map[string]any { return m["predicate"].(map[string]any) }
	subj := func(m map[string]any) map[string]any { return m["subject"].([]any)[0].(map[string]any) }
	dig := func(m map[string]any) map[string]any { return subj(m)["digest"].(map[string]any) }
	cases := []struct {
		name   string
		mutate func(m map[string]any)
		place  string
	}{
		{"extra root key", func(m map[string]any) { m["extra"] = true }, `statement: unexpected key(s) "extra"`},
		{"missing root key", func(m map[string]any) { delete(m, "predicate") }, `statement: missing key(s) "predicate"`},
		{"extra predicate key", func(m map[string]any) { pred(m)["baseline"] = "x" }, `predicate: unexpected key(s) "baseline"`},
		{"missing predicate key", func(m map[string]any) { delete(pred(m), "canonicalization") }, `predicate: missing key(s)`},
		{"wrong _type", func(m map[string]any) { m["_type"] = "https://in-toto.io/Statement/v0.1" }, "_type"},
		{"wrong predicateType", func(m map[string]any) { m["predicateType"] = "https://slsa.dev/provenance/v1" }, "predicateType"},
		{"wrong subject name", func(m map[string]any) { subj(m)["name"] = "baseline.json" }, "subject[0].name"},
		{"extra subject key", func(m map[string]any) { subj(m)["uri"] = "file:///x" }, "subject[0]"},
		{"two subjects", func(m map[string]any) { m["subject"] = append(m["subject"].([]any), subj(m)) }, "subject"},
		{"no subject", func(m map[string]any) { m["subject"] = []any{} }, "subject"},
		{"subject not an array", func(m map[string]any) { m["subject"] = subj(m) }, "subject"},
		{"extra digest algorithm", func(m map[string]any) { dig(m)["sha512"] = strings.Repeat("0", 128) }, "subject[0].digest"},
		{"other digest algorithm", func(m map[string]any) { dig(m)["sha1"] = dig(m)["sha256"]; delete(dig(m), "sha256") }, "subject[0].digest"},
		{"upper-case digest", func(m map[string]any) { dig(m)["sha256"] = strings.ToUpper(dig(m)["sha256"].(string)) }, "subject[0].digest.sha256"},
		{"short digest", func(m map[string]any) { dig(m)["sha256"] = "abc" }, "subject[0].digest.sha256"},
		{"wrong canonicalization", func(m map[string]any) { pred(m)["canonicalization"] = "JCS" }, "predicate.canonicalization"},
		{"attestation schema 2", func(m map[string]any) { pred(m)["attestation_schema_version"] = 2 }, "predicate.attestation_schema_version"},
		{"attestation schema true", func(m map[string]any) { pred(m)["attestation_schema_version"] = true }, "predicate.attestation_schema_version"},
		{"snapshot schema as string", func(m map[string]any) { pred(m)["snapshot_schema_version"] = "1" }, "predicate.snapshot_schema_version"},
		{"snapshot schema 2", func(m map[string]any) { pred(m)["snapshot_schema_version"] = 2 }, "predicate.snapshot_schema_version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := statementtest.Mutate(t, good, tc.mutate)
			err := statement.Verify(data, digest(t, before), before.SchemaVersion)
			require.ErrorIs(t, err, statement.ErrInvalid)
			assert.NotErrorIs(t, err, statement.ErrDigestMismatch)
			assert.Contains(t, err.Error(), tc.place)
		})
	}
	t.Run("root not an object", func(t *testing.T) {
		require.ErrorIs(t, statement.Verify([]byte(`[]`), digest(t, before), 1), statement.ErrInvalid)
	})
}

func TestDigestIsOverTheBytes(t *testing.T) {
	assert.Equal(t, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", statement.Digest(nil))
}

func FuzzParse(f *testing.F) {
	good, err := statement.BuildDigest(strings.Repeat("ab", 32), 1)
	require.NoError(f, err)
	f.Add(good)
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"b":1,"a":2}`))
	f.Add([]byte(`[1.0]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := statement.Parse(data)
		if err != nil {
			return
		}
		// Accepted bytes are exactly their canonical form.
		canon, err := canonjson.Marshal(v)
		require.NoError(t, err)
		require.Equal(t, data, canon)
		_ = statement.Validate(v, strings.Repeat("ab", 32), 1)
	})
}
