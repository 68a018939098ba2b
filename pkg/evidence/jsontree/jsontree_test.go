package jsontree_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

func TestParseKeepsOrderAndLiterals(t *testing.T) {
	v, err := jsontree.Parse([]byte(` {"z": 1.50, "a": [true, null, "\u00e9\n"], "m": -0, "e": 1E+2} `))
	require.NoError(t, err)
	require.Equal(t, jsontree.Object, v.Kind)
	keys := []string{}
	for _, m := range v.Members {
		keys = append(keys, m.Key)
	}
	assert.Equal(t, []string{"z", "a", "m", "e"}, keys)
	z, _ := v.Get("z")
	assert.Equal(t, "1.50", z.Text)
	assert.False(t, z.IsInteger())
	m, _ := v.Get("m")
	assert.True(t, m.IsInteger())
	a, _ := v.Get("a")
	assert.Equal(t, "é\n", a.Items[2].Text)
	e, _ := v.Get("e")
	f, err := e.Float64()
	require.NoError(t, err)
	assert.Equal(t, 100.0, f)
}

func TestParseRejects(t *testing.T) {
	tests := map[string]string{
		`{"a":1,"a":2}`:  `line 1 column 8: duplicate object member name "a"`,
		`{"a":1,}`:       "line 1 column 7: invalid character ','",
		`[1,]`:           "line 1 column 3: invalid character ','",
		`01`:             "line 1 column 3: unexpected data after the top-level value",
		`1.`:             "unexpected end of JSON input",
		`1e`:             "unexpected end of JSON input",
		`-`:              "unexpected end of JSON input",
		`"\x"`:           "line 1 column 2: invalid escape sequence `\\x`",
		`"\u12"`:         "invalid escape sequence `\\u12",
		`"\udc00"`:       "invalid surrogate pair",
		`"\ud800\u0041"`: "invalid surrogate pair",
		`tru`:            "unexpected end of JSON input",
		`Infinity`:       "line 1 column 1: invalid character 'I' at start of value",
		`{"a" 1}`:        "invalid character '1' after object name (expecting ':')",
		`"abc`:           "line 1 column 5: unexpected end of JSON input",
		`1 2`:            "unexpected data after",
		"\"\xff\"":       "invalid UTF-8",
		"[1]\n]":         "line 2 column 1: invalid character ']'",
		// A name that is not a string is refused where it starts, even
		// when a valid (or broken) value follows.
		`{[1]:2}`:             "line 1 column 2: object member name must be a string",
		`{"a":1,{"b" "c"}:2}`: "line 1 column 8: object member name must be a string",
	}
	for in, want := range tests {
		// Twice: the second Parse reuses the first one's parser.
		for range 2 {
			_, err := jsontree.Parse([]byte(in))
			require.ErrorIs(t, err, jsontree.ErrSyntax, in)
			assert.Contains(t, err.Error(), want, in)
		}
	}
}

func TestDuplicateDetectionInLargeObjects(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("{")
	for i := range 100 {
		sb.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
	}
	sb.WriteString(`"kxxxxx":2}`)
	_, err := jsontree.Parse([]byte(sb.String()))
	require.ErrorContains(t, err, `duplicate object member name "kxxxxx"`)
}

func TestDepthLimit(t *testing.T) {
	ok := strings.Repeat("[", jsontree.MaxDepth) + strings.Repeat("]", jsontree.MaxDepth)
	_, err := jsontree.Parse([]byte(ok))
	require.NoError(t, err)
	deep := "[" + ok + "]"
	_, err = jsontree.Parse([]byte(deep))
	require.ErrorContains(t, err, "nesting deeper than")
}

// TestAppendEscape holds the escape of every byte a writer escapes ('"',
// '\\', the control characters, DEL) to what encoding/json writes and to
// Parse, which must read it back.
func TestAppendEscape(t *testing.T) {
	for c := range 0x80 {
		b := byte(c)
		if b >= 0x20 && b != '"' && b != '\\' && b != 0x7F {
			continue
		}
		got := jsontree.AppendEscape(nil, b)
		if b != 0x7F { // encoding/json writes DEL as itself
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			require.NoError(t, enc.Encode(string(b)))
			assert.Equal(t, strings.TrimSuffix(want.String(), "\n"), `"`+string(got)+`"`, "byte %#x", b)
		} else {
			assert.Equal(t, `\u007f`, string(got))
		}
		v, err := jsontree.Parse([]byte(`"` + string(got) + `"`))
		require.NoError(t, err)
		assert.Equal(t, string(rune(b)), v.Text, "byte %#x", b)
	}
}
