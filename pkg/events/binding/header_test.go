package binding

import (
	"errors"
	"testing"
	"unicode/utf8"
)

func TestDecodeValue(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      error
	}{
		{in: "plain", want: "plain"},
		{in: " \tpadded\t ", want: "padded"},
		{in: `"quoted \"x\""`, want: `quoted "x"`},
		{in: "%7B%22a%22%3A1%7D", want: `{"a":1}`},
		{in: "a%2fb%2Fc", want: "a/b/c"},
		{in: "%C3%A9t%C3%A9", want: "été"},
		{in: "%25", want: "%"},
		{in: "", want: ""},
		{in: "%", err: errPercent},
		{in: "ab%4", err: errPercent},
		{in: "%zz", err: errPercent},
		{in: "raw\x01%zz", err: errRawByte},
		{in: "%zz\x01", err: errPercent},
		{in: "caf\xc3\xa9", err: errRawByte},
		{in: "%C0%AF", err: errUTF8}, // overlong '/'
		{in: "%FF", err: errUTF8},
	} {
		got, err := decodeValue(tc.in)
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("decodeValue(%q) = %q, %v; want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// FuzzDecodeValue holds decodeValue to encodeValue on any value: what it
// accepts is valid UTF-8 that encodes to a value decoding to the same, and
// any valid UTF-8 string encodes to a value that decodes back to it.
func FuzzDecodeValue(f *testing.F) {
	for _, s := range []string{"plain", "%7B%22a%22%7D", `"q\"%41"`, "%", "a%zz\x01", "\x01%zz", "%C0%AF", " x ", "été"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if got, err := decodeValue(v); err == nil {
			if !utf8.ValidString(got) {
				t.Fatalf("decodeValue(%q) = %q, not UTF-8", v, got)
			}
			if again, err := decodeValue(encodeValue(got)); err != nil || again != got {
				t.Fatalf("decodeValue(encodeValue(%q)) = %q, %v", got, again, err)
			}
		} else if !errors.Is(err, errPercent) && !errors.Is(err, errRawByte) && !errors.Is(err, errUTF8) && !errors.Is(err, errQuoted) {
			t.Fatalf("decodeValue(%q): unexpected error %v", v, err)
		}
		if utf8.ValidString(v) {
			if got, err := decodeValue(encodeValue(v)); err != nil || got != v {
				t.Fatalf("decodeValue(encodeValue(%q)) = %q, %v", v, got, err)
			}
		}
	})
}
