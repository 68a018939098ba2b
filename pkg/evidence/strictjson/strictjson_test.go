package strictjson_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

type record struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     record
		err      string
	}{
		{name: "one value", in: `{"name":"a","n":1}`, want: record{Name: "a", N: 1}},
		{name: "white space around it", in: " \n{\"name\":\"a\"}\n\t ", want: record{Name: "a"}},
		{name: "an unknown member", in: `{"name":"a","extra":1}`, err: `unknown field "extra"`},
		{name: "a second value", in: `{"name":"a"}{"name":"b"}`, err: "data after the JSON value"},
		{name: "trailing garbage", in: `{"name":"a"} x`, err: "data after the JSON value"},
		{name: "a trailing bracket", in: `{"name":"a"}]`, err: "data after the JSON value"},
		{name: "empty", in: ``, err: "EOF"},
		{name: "malformed", in: `{"name":`, err: "unexpected EOF"},
		{name: "a wrong type", in: `{"n":"1"}`, err: "cannot unmarshal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got record
			err := strictjson.Decode([]byte(tc.in), &got)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// FuzzDecode holds Decode to its contract on any input: it accepts exactly
// when the bytes hold one object of the type's members and nothing after.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"name":"a","n":1}`, `{} {}`, `{"x":1}`, `[]`, ` {"n":2} `, `{"name":"a"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r record
		if err := strictjson.Decode(data, &r); err != nil {
			return
		}
		// Accepted: re-decoding the same bytes gives the same value, and
		// appending anything but white space is refused.
		var again record
		require.NoError(t, strictjson.Decode(data, &again))
		assert.Equal(t, r, again)
		assert.Error(t, strictjson.Decode(append(append([]byte{}, data...), '0'), &again))
	})
}
