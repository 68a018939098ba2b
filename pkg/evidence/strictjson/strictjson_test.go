package strictjson_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

type record struct {
	Name string   `json:"name"`
	N    int      `json:"n"`
	Tags []string `json:"tags,omitempty"`
	Sub  *record  `json:"sub,omitempty"`
}

func TestDecode(t *testing.T) {
	upper := strictjson.Intercept(func(dec *jsontext.Decoder, v any) (bool, error) {
		p, ok := v.(*int)
		if !ok {
			return false, nil
		}
		*p = 42
		return true, dec.SkipValue()
	})
	for _, tc := range []struct {
		name, in string
		opts     []strictjson.Option
		want     record
		err      string
	}{
		{name: "one value", in: `{"name":"a","n":1}`, want: record{Name: "a", N: 1}},
		{name: "white space around it", in: " \n{\"name\":\"a\"}\n\t ", want: record{Name: "a"}},
		{name: "an unknown member", in: `{"name":"a","extra":1}`, err: `json: cannot decode JSON string into Go strictjson_test.record at "/extra": unknown object member name`},
		{name: "a name in other case", in: `{"NAME":"a"}`, err: `at "/NAME": unknown object member name`},
		{name: "a name given twice", in: `{"name":"a","name":"b"}`, err: `duplicate object member name "name"`},
		{name: "invalid UTF-8", in: "{\"name\":\"\xff\"}", err: "invalid UTF-8"},
		{name: "a second value", in: `{"name":"a"}{"name":"b"}`, err: "after top-level value"},
		{name: "trailing garbage", in: `{"name":"a"} x`, err: "after top-level value"},
		{name: "a trailing bracket", in: `{"name":"a"}]`, err: "after top-level value"},
		{name: "empty", in: ``, err: "EOF"},
		{name: "malformed", in: `{"name":`, err: "EOF"},
		{name: "malformed after a value of another type", in: `{"n":"1","name":`, err: "EOF"},
		{name: "a wrong type", in: `{"n":"1"}`, err: `json: cannot decode JSON string into Go int at "/n"`},
		{name: "null is the zero value", in: `{"name":null,"tags":null}`, want: record{}},
		{name: "no null", in: `{"name":"a","tags":null}`, opts: []strictjson.Option{strictjson.NoNull()}, err: strictjson.ErrNull.Error()},
		{name: "an empty string", in: `{"name":""}`, want: record{}},
		{name: "no empty string", in: `{"sub":{"name":""}}`, opts: []strictjson.Option{strictjson.NoEmptyStrings()}, err: strictjson.ErrEmpty.Error()},
		{name: "no empty string, a string", in: `{"name":"a"}`, opts: []strictjson.Option{strictjson.NoEmptyStrings()}, want: record{Name: "a"}},
		{name: "required, present", in: `{"n":0,"name":"a"}`, opts: []strictjson.Option{strictjson.Required("n")}, want: record{Name: "a"}},
		{name: "required, missing", in: `{"name":"a","sub":{"n":1}}`, opts: []strictjson.Option{strictjson.Required("n")}, err: `a required member is missing: "n"`},
		{name: "intercepted", in: `{"n":1,"sub":{"n":"x"}}`, opts: []strictjson.Option{upper}, want: record{N: 42, Sub: &record{N: 42}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got record
			err := strictjson.Decode([]byte(tc.in), &got, tc.opts...)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// The options of one call do not carry over to the next.
func TestOptionsDoNotCarryOver(t *testing.T) {
	var r record
	require.ErrorIs(t, strictjson.Decode([]byte(`{"name":null}`), &r, strictjson.NoNull()), strictjson.ErrNull)
	require.NoError(t, strictjson.Decode([]byte(`{"name":null}`), &r))
	require.ErrorIs(t, strictjson.Decode([]byte(`{}`), &r, strictjson.Required("n")), strictjson.ErrMissing)
	require.NoError(t, strictjson.Decode([]byte(`{}`), &r))
}

// FuzzDecode holds Decode to its contract on any input: what it accepts,
// encoding/json (the lenient reading) reads the same, and appending
// anything but white space is refused.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"name":"a","n":1}`, `{} {}`, `{"x":1}`, `[]`, ` {"n":2} `, `{"name":"a"}]`, `{"sub":{"tags":["a"]}}`, `{"name":"\u00e9"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r record
		if err := strictjson.Decode(data, &r); err != nil {
			if _, syntax := errors.AsType[*jsontext.SyntacticError](err); syntax {
				assert.False(t, jsontext.Value(data).IsValid(), "a syntax error in valid JSON: %q", data)
			}
			return
		}
		var lenient record
		require.NoError(t, json.Unmarshal(data, &lenient), "accepted what encoding/json refuses: %q", data)
		assert.Equal(t, lenient, r)
		assert.Error(t, strictjson.Decode(append(append([]byte{}, data...), '0'), &r))
	})
}
