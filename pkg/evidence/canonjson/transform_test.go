package canonjson_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// TestTransform: Transform (jsontree.Parse, then Append) on documents in
// any layout, and what it refuses.
func TestTransform(t *testing.T) {
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
		{"duplicate key", `{"a":1,"b":2,"a":3}`, "", `line 1 column 14: duplicate object member name "a"`},
		{"duplicate escaped key", `{"a":1,"\u0061":2}`, "", `duplicate object member name "a"`},
		{"lone surrogate", `"\udc00"`, "", "invalid surrogate pair"},
		{"bad surrogate pair", `"\ud800\u0041"`, "", "invalid surrogate pair"},
		{"invalid UTF-8", "\"\xff\"", "", "invalid UTF-8"},
		{"encoded surrogate", "\"\xed\xa0\x80\"", "", "invalid UTF-8"},
		{"control character", "\"\t\"", "", "invalid character '\\t' in string"},
		{"trailing data", `{"a":1} 2`, "", "unexpected data after the top-level value"},
		{"trailing comma", `[1,]`, "", "invalid character ',' at start of value"},
		{"unexpected data after the top-level value", `01`, "", "unexpected data after the top-level value"},
		{"empty", ``, "", "unexpected end of JSON input"},
		{"too deep", strings.Repeat("[", jsontree.MaxDepth+1) + strings.Repeat("]", jsontree.MaxDepth+1), "", "nesting deeper than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := canonjson.Transform([]byte(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}
