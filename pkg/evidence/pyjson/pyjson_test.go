package pyjson_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/pyjson"
)

// Expected outputs were produced by CPython 3.11: json.dumps(json.loads(in)).
func TestNumbersMatchPython(t *testing.T) {
	tests := map[string]string{
		"0.1": "0.1", "1.5": "1.5", "-2.25": "-2.25", "1e16": "1e+16",
		"1e15": "1000000000000000.0", "123456789012345678": "123456789012345678",
		"0.0001": "0.0001", "0.00001": "1e-05", "1e-7": "1e-07", "-0.0": "-0.0",
		"100.0": "100.0", "1.7976931348623157e308": "1.7976931348623157e+308",
		"5e-324": "5e-324", "3.14159": "3.14159", "2.5e-5": "2.5e-05",
		"12345.678e3": "12345678.0", "1e22": "1e+22",
		"9007199254740993.0": "9007199254740992.0", "0.5e1": "5.0", "-0": "0",
	}
	for in, want := range tests {
		got, err := pyjson.AppendNumber(nil, in)
		require.NoError(t, err, in)
		assert.Equal(t, want, string(got), in)
	}
	_, err := pyjson.AppendNumber(nil, "1E400")
	require.ErrorIs(t, err, pyjson.ErrNotFinite)
}

// Expected outputs were produced by CPython 3.11 json.dumps.
func TestDumpsMatchesPython(t *testing.T) {
	doc := `{"b":[1,{"z":null,"a":true}],"a":"é\u2028\u0000\"\\😀\u007f","c":{},"d":[]}`
	v, err := jsontree.Parse([]byte(doc))
	require.NoError(t, err)
	compact, err := pyjson.Marshal(v, pyjson.Compact)
	require.NoError(t, err)
	assert.Equal(t, `{"a":"\u00e9\u2028\u0000\"\\\ud83d\ude00\u007f","b":[1,{"a":true,"z":null}],"c":{},"d":[]}`, string(compact))
	pretty, err := pyjson.Marshal(v, pyjson.Pretty)
	require.NoError(t, err)
	assert.Equal(t, "{\n  \"a\": \"\\u00e9\\u2028\\u0000\\\"\\\\\\ud83d\\ude00\\u007f\",\n  \"b\": [\n    1,\n    {\n      \"a\": true,\n      \"z\": null\n    }\n  ],\n  \"c\": {},\n  \"d\": []\n}", string(pretty))
	unsorted, err := pyjson.Marshal(v, pyjson.Options{})
	require.NoError(t, err)
	assert.Equal(t, `{"b":[1,{"z":null,"a":true}],"a":"\u00e9\u2028\u0000\"\\\ud83d\ude00\u007f","c":{},"d":[]}`, string(unsorted))
	// json.dumps("\b\f\n\r\t\x01\x1f\x7f\"\\")
	assert.Equal(t, `"\b\f\n\r\t\u0001\u001f\u007f\"\\"`, string(pyjson.AppendString(nil, "\b\f\n\r\t\x01\x1f\x7f\"\\")))
}
