package binding

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// decodeValueReference is decodeValue byte by byte, as the header
// grammar reads: the specification decodeValue is held to
// (FuzzDecodeValue), errors in the order the bytes give them.
func decodeValueReference(v string) (string, error) {
	v, err := headerText(v)
	if err != nil {
		return "", err
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '%':
			if i+2 >= len(v) || !isHex(v[i+1]) || !isHex(v[i+2]) {
				return "", errPercent
			}
			b = append(b, hexVal(v[i+1])<<4|hexVal(v[i+2]))
			i += 2
		case c < 0x20 || c > 0x7E:
			return "", errRawByte
		default:
			b = append(b, c)
		}
	}
	if !utf8.Valid(b) {
		return "", errUTF8
	}
	return string(b), nil
}

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

func FuzzDecodeValue(f *testing.F) {
	for _, s := range []string{"plain", "%7B%22a%22%7D", `"q\"%41"`, "%", "a%zz\x01", "\x01%zz", "%C0%AF", " x "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := decodeValue(v)
		want, wantErr := decodeValueReference(v)
		if got != want || !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
			t.Fatalf("decodeValue(%q) = %q, %v; the reference gives %q, %v", v, got, err, want, wantErr)
		}
	})
}
