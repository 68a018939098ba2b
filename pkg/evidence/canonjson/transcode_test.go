package canonjson_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// viaTree is what AppendJSON must equal: parse, then Append.
func viaTree(src []byte) ([]byte, error) {
	v, err := jsontree.Parse(src)
	if err != nil {
		return nil, err
	}
	return canonjson.Append(nil, v)
}

// documents are the repository's JSON fixtures: snapshots, reports and
// the event payload goldens.
func documents(tb testing.TB) map[string][]byte {
	tb.Helper()
	docs := map[string][]byte{}
	for _, pattern := range []string{
		"../testdata/*/*.json", "../testdata/*/*.golden", "../../events/testdata/*.golden.json",
	} {
		paths, err := filepath.Glob(pattern)
		require.NoError(tb, err)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			require.NoError(tb, err)
			docs[p] = b
		}
	}
	require.NotEmpty(tb, docs)
	return docs
}

// tricky are inputs at the edges of what Parse and Append accept.
var tricky = []string{
	// whitespace and literals
	" \t\r\n null \n", "true", "false", `[true,false,null]`, "nul", "truex", "[true false]", "",
	" ", "\v1", "1\v", "\xef\xbb\xbf{}",
	// strings and escapes
	`""`, `"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f\u001F\u007f\u0080\u00e9\u2028\uFFFF"`,
	`"\ud83d\ude00"`, `"\uD83D\uDE00"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800x"`,
	`"\ud800\"`, `"\ud800\u12"`, `"\ud800\udbff"`, `"\udbff\udfff"`, `"\u12"`, `"\u12g4"`,
	`"\x"`, `"\`, `"abc`, "\"a\x01\"", "\"a\x7f\"", "\"\xff\"", "\"\xc3\xa9\"", "\"\xc3\"",
	"\"\xc3\\u00a9\"", "\"\\u00e9\xa9\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"",
	"\"\xef\xbf\xbd\"", "\"\xe2\x82\xac\xe2\x82\"", "\"\xf0\x9f\x98\x80\"", "\"a\"b\"",
	// numbers
	"0", "-0", "-0.0", "0.0", "1", "-1", "01", "-01", "1.", ".5", "-", "+1", "1e", "1e+", "1E-2",
	"1.5e300", "1e400", "-1e400", "1e-400", "4.50", "2e-3", "0.000001", "0.0000001", "1e21", "1e20",
	"123456789012345678901234567890.0", "9007199254740991", "-9007199254740991", "9007199254740992",
	"-9007199254740992", "10000000000000000", "99999999999999999999", "1E30", "333333333.33333329",
	"1e-7", "5e-324", "1.7976931348623157e308", "1.7976931348623159e308", "[1 2]", "[-]",
	"0x10", "1_000", "NaN", "Infinity", "-Infinity",
	// objects: order, duplicates, escapes in keys
	`{}`, `{ }`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"a":{"x":1,"x":2}}`,
	`{"\n":1,"a":2,"\"":3,"\\":4}`, `{"\ufb33":1,"\ud83d\ude00":2,"\u20ac":3}`, `{"a":1,}`,
	`{"a" 1}`, `{"a":1 "b":2}`, `{a:1}`, `{"a":}`, `{"a":1`, `{"a"`, `{"a":1}}`, `{"a":1} x`,
	`{"a":1}{"b":2}`, `{"a":1}` + "\n\t ", `{"a":{"b":{"c":[{"d":1,"c":2}]}},"A":[{"z":[],"y":{}}]}`,
	`[{"b":1,"a":2},{"d":{"f":1,"e":2},"c":3}]`, `{"b":[{"y":1,"x":2}],"a":[{"d":1,"c":2}]}`,
	`{"host":"h","target":{"kind":"k","identifier":"i"},"status":"drift"}`,
	// arrays
	`[]`, `[ ]`, `[1,]`, `[,1]`, `[1`, `[[]]`, `[[],[[]]]`, `]`, `}`, `[}`, `{]`,
}

// deep returns n nested arrays, objects, and objects and arrays in turn.
func deep(n int) (arrays, objects, mixed string) {
	arrays = strings.Repeat("[", n) + "1" + strings.Repeat("]", n)
	objects = strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
	mixed = strings.Repeat(`{"k":[`, n/2) + strings.Repeat("[", n%2) + "0" + strings.Repeat("]", n%2) + strings.Repeat("]}", n/2)
	return arrays, objects, mixed
}

func inputs(tb testing.TB) [][]byte {
	tb.Helper()
	var in [][]byte
	for _, s := range tricky {
		in = append(in, []byte(s))
	}
	for _, n := range []int{jsontree.MaxDepth - 1, jsontree.MaxDepth, jsontree.MaxDepth + 1} {
		a, o, m := deep(n)
		in = append(in, []byte(a), []byte(o), []byte(m))
	}
	var big strings.Builder
	big.WriteString("{")
	for i := range 100 {
		big.WriteString(`"k` + strings.Repeat("x", 99-i) + `":[` + strings.Repeat("1,", i) + `0],`)
	}
	in = append(in, []byte(big.String()+`"a":0}`), []byte(big.String()+`"kxxxxx":0}`))
	for _, d := range documents(tb) {
		in = append(in, d)
	}
	return in
}

// check compares AppendJSON and AppendJSONFunc with Parse and Append.
func check(t *testing.T, src []byte) {
	t.Helper()
	want, wantErr := viaTree(src)
	prefix := []byte("prefix ")
	got, err := canonjson.AppendJSON(bytes.Clone(prefix), src)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%q: AppendJSON error %v, Parse+Append error %v", src, err, wantErr)
	}
	if err != nil {
		if !errors.Is(err, jsontree.ErrSyntax) && !errors.Is(err, canonjson.ErrIntegerDomain) &&
			!strings.HasPrefix(err.Error(), "canonjson: number") {
			t.Fatalf("%q: unexpected error %v", src, err)
		}
		return
	}
	if string(got) != string(prefix)+string(want) {
		t.Fatalf("%q:\n got %s\nwant %s%s", src, got, prefix, want)
	}
	// The members AppendJSONFunc reports are the output's, in order.
	var keys []string
	var values []string
	got, err = canonjson.AppendJSONFunc(nil, src, func(key, value []byte) {
		keys = append(keys, string(key))
		values = append(values, string(value))
	})
	if err != nil || string(got) != string(want) {
		t.Fatalf("%q: AppendJSONFunc gave %s, %v; want %s", src, got, err, want)
	}
	v, err := jsontree.Parse(want)
	if err != nil {
		t.Fatalf("%q: canonical form does not parse: %v", src, err)
	}
	if v.Kind != jsontree.Object {
		if keys != nil {
			t.Fatalf("%q: members reported for a %s", src, v.Kind)
		}
		return
	}
	if len(keys) != len(v.Members) {
		t.Fatalf("%q: %d members reported, want %d", src, len(keys), len(v.Members))
	}
	for i, m := range v.Members {
		mv, err := canonjson.Marshal(m.Value)
		if err != nil || keys[i] != m.Key || values[i] != string(mv) {
			t.Fatalf("%q: member %d reported as %q: %s, want %q: %s", src, i, keys[i], values[i], m.Key, mv)
		}
	}
}

func TestAppendJSONMatchesTheTree(t *testing.T) {
	for _, src := range inputs(t) {
		check(t, src)
	}
}

func TestAppendJSON(t *testing.T) {
	tests := []struct {
		name, in, want, err string
	}{
		{"whitespace", " {\n\t\"b\" : [ 1 , 2 ] ,\r\"a\":null } ", `{"a":null,"b":[1,2]}`, ""},
		{"key order by UTF-16", `{"\ufb33":1,"\ud83d\ude00":2,"\u00f6":3,"\r":4,"1":5}`,
			"{\"\\r\":4,\"1\":5,\"\u00f6\":3,\"\U0001F600\":2,\"\ufb33\":1}", ""},
		{"escaped keys sort decoded", `{"\u0061b":1,"\n":2,"a":3}`, `{"\n":2,"a":3,"ab":1}`, ""},
		{"minimal escapes", `"\u0041\/\u001F\u007f\u00e9\ud83d\ude00\""`, "\"A/\\u001f\u007f\u00e9\U0001F600\\\"\"", ""},
		{"nested objects sorted in place", `{"z":{"b":[{"d":1,"c":2}],"a":0},"y":[{"f":{"h":1,"g":2},"e":3}]}`,
			`{"y":[{"e":3,"f":{"g":2,"h":1}}],"z":{"a":0,"b":[{"c":2,"d":1}]}}`, ""},
		{"numbers", `[-0,-0.0,1.50,1E+2,1e21,1e-7,0.000001,9007199254740991,-9007199254740991]`,
			`[0,0,1.5,100,1e+21,1e-7,0.000001,9007199254740991,-9007199254740991]`, ""},
		{"float that prints as an integer", `1e17`, `100000000000000000`, ""},
		{"unsafe integer", `{"n":9007199254740992}`, "", "integer outside"},
		{"long integer", `[123456789012345678901234567890]`, "", "integer outside"},
		{"float overflow", `1e400`, "", "value out of range"},
		{"duplicate key", `{"a":1,"b":2,"a":3}`, "", `line 1 column 14: duplicate object key "a"`},
		{"duplicate escaped key", `{"a":1,"\u0061":2}`, "", `duplicate object key "a"`},
		{"lone surrogate", `"\udc00"`, "", "lone UTF-16 surrogate"},
		{"bad surrogate pair", `"\ud800\u0041"`, "", "invalid UTF-16 surrogate pair"},
		{"invalid UTF-8", "\"\xff\"", "", "invalid UTF-8"},
		{"encoded surrogate", "\"\xed\xa0\x80\"", "", "invalid UTF-8"},
		{"control character", "\"\t\"", "", "control character"},
		{"trailing data", `{"a":1} 2`, "", "unexpected data after the top-level value"},
		{"trailing comma", `[1,]`, "", "unexpected character ']'"},
		{"leading zero", `01`, "", "leading zero"},
		{"empty", ``, "", "unexpected end of input"},
		{"too deep", strings.Repeat("[", jsontree.MaxDepth+1) + strings.Repeat("]", jsontree.MaxDepth+1), "", "nesting deeper than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := canonjson.AppendJSON(nil, []byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				_, treeErr := viaTree([]byte(tc.in))
				require.Error(t, treeErr, "Parse+Append accept it")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
			check(t, []byte(tc.in))
		})
	}
}

func TestAppendJSONFuncSkipsAFailedText(t *testing.T) {
	called := false
	_, err := canonjson.AppendJSONFunc(nil, []byte(`{"a":1} {}`), func(_, _ []byte) { called = true })
	require.Error(t, err)
	assert.False(t, called, "member called for a text that fails")
}

// FuzzAppendJSON checks that AppendJSON accepts what Parse and Append
// accept, and writes what they write, on any input.
func FuzzAppendJSON(f *testing.F) {
	for _, src := range inputs(f) {
		f.Add(src)
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		check(t, src)
	})
}

// BenchmarkAppendJSON compares transcoding a snapshot, as written on
// disk (indented) and as sent (compact), with parsing it and appending the
// tree.
func BenchmarkAppendJSON(b *testing.B) {
	indented, err := os.ReadFile("../testdata/snapshots/before.json")
	require.NoError(b, err)
	var compact bytes.Buffer
	require.NoError(b, json.Compact(&compact, indented))
	for _, doc := range []struct {
		name string
		src  []byte
	}{{"indented", indented}, {"compact", compact.Bytes()}} {
		src := doc.src
		b.Run(doc.name+"/transcode", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				if out, err = canonjson.AppendJSON(out[:0], src); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(doc.name+"/tree", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			var out []byte
			for b.Loop() {
				v, err := jsontree.Parse(src)
				if err != nil {
					b.Fatal(err)
				}
				if out, err = canonjson.Append(out[:0], v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
