package canonjson_test

import (
	"github.com/gowebpki/jcs"
	"math"
	"slices"
	"strconv"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

func canon(t *testing.T, doc string) string {
	t.Helper()
	v, err := jsontree.Parse([]byte(doc))
	require.NoError(t, err)
	out, err := canonjson.Marshal(v)
	require.NoError(t, err)
	ref, err := canonjson.Transform([]byte(doc))
	require.NoError(t, err)
	require.Equal(t, string(ref), string(out), "own encoder and gowebpki/jcs disagree")
	return string(out)
}

// RFC 8785 section 3.2.2 (the sample in "Serialization of Primitive Data
// Types" and its canonical form).
func TestRFC8785Primitives(t *testing.T) {
	in := `{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	assert.Equal(t, want, canon(t, in))
}

// RFC 8785 section 3.2.3: property names are sorted by UTF-16 code units.
func TestRFC8785Sorting(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	assert.Equal(t, want, canon(t, in))
}

// RFC 8785 appendix B: IEEE 754 bit patterns and their canonical numbers.
func TestRFC8785Numbers(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tc := range tests {
		f := math.Float64frombits(tc.bits)
		lit := strconv.FormatFloat(f, 'e', -1, 64) // always a non-integer literal
		got, err := canonjson.Marshal(jsontree.Value{Kind: jsontree.Number, Text: lit})
		require.NoError(t, err, "%#x", tc.bits)
		assert.Equal(t, tc.want, string(got), "%#x", tc.bits)
	}
}

func TestIntegersOutsideSafeRangeAreRefused(t *testing.T) {
	for _, lit := range []string{"9007199254740992", "-9007199254740992", "123456789012345678901234567890"} {
		_, err := canonjson.Marshal(jsontree.Value{Kind: jsontree.Number, Text: lit})
		require.ErrorIs(t, err, canonjson.ErrIntegerDomain, lit)
	}
	out, err := canonjson.Marshal(jsontree.Value{Kind: jsontree.Number, Text: "-9007199254740991"})
	require.NoError(t, err)
	assert.Equal(t, "-9007199254740991", string(out))
}

func TestEscapes(t *testing.T) {
	assert.Equal(t, `"\u0000\u001f\b\t\n\f\r\"\\/`+"\u007f\u2028é😀"+`"`,
		canon(t, `"\u0000\u001f\b\t\n\f\r\"\\\/\u007f\u2028\u00e9\ud83d\ude00"`))
}

func TestDigestIgnoresWhitespaceAndOrder(t *testing.T) {
	a, err := jsontree.Parse([]byte(`{"b": 1, "a": [true, null, "x"]}`))
	require.NoError(t, err)
	b, err := jsontree.Parse([]byte("{\n\t\"a\":[true,null,\"x\"],\"b\":1}"))
	require.NoError(t, err)
	da, err := canonjson.Digest(a)
	require.NoError(t, err)
	db, err := canonjson.Digest(b)
	require.NoError(t, err)
	assert.Equal(t, da, db)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, da)
}

// FuzzCanonicalize checks that the own encoder agrees with gowebpki/jcs on
// every document both accept, and that canonicalization is idempotent.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,null,"x"]}`, `"\u20ac\ud83d\ude00"`, `[1.5e300,-0.0,1e-7]`,
		`{"\ufb33":1,"\ud83d\ude00":2}`, `{"a":{"b":{"c":[]}}}`, `9007199254740991`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := jsontree.Parse(data)
		if err != nil {
			return
		}
		out, err := canonjson.Marshal(v)
		if err != nil {
			return // integer outside the safe range
		}
		ref, err := jcs.Transform(data)
		if err != nil {
			t.Fatalf("jcs rejected %q that we accepted: %v", data, err)
		}
		if string(ref) != string(out) {
			t.Fatalf("mismatch for %q:\n own %s\n jcs %s", data, out, ref)
		}
		if _, err := jsontree.Parse(out); err != nil {
			t.Fatalf("canonical output does not parse: %v", err)
		}
		// Re-canonicalize with the RFC rules only: a float such as 1e17
		// prints as an integer our safe-range rule would refuse on re-read.
		out2, err := jcs.Transform(out)
		if err != nil || string(out2) != string(out) {
			t.Fatalf("not idempotent: %q -> %q (%v)", out, out2, err)
		}
	})
}

// FuzzCompareKeys checks the byte-level key order against a reference that
// compares UTF-16 code units directly.
func FuzzCompareKeys(f *testing.F) {
	f.Add("\ufb33", "\U0001F600")
	f.Add("a", "ab")
	f.Add("\u00e9", "\u20ac")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
		want := slices.Compare(ua, ub)
		got := canonjson.CompareKeys(a, b)
		if (got < 0) != (want < 0) || (got == 0) != (want == 0) {
			t.Fatalf("CompareKeys(%q, %q) = %d, want sign of %d", a, b, got, want)
		}
	})
}
