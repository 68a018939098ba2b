package events_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

var jsonStrings = []string{
	"", "plain", `"quoted"`, `back\slash`, "<&>", "tab\tnew\nline\rfeed\fback\b", "\x00\x01\x1f\x7f",
	"café ☕", "\u2028\u2029", "\xe2\x80", "\xe2\x80\xa8x", "\xff", "a\xffb", "\xed\xa0\x80", "\xf4\x90\x80\x80",
	"😀", "\ufffd", "\u0085", strings.Repeat("é<", 100),
}

// checkJSONString holds AppendJSONString to encoding/json on s: with HTML
// escaping off, and, through json.HTMLEscape, json.Marshal.
func checkJSONString(t *testing.T, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(s))
	got := events.AppendJSONString([]byte("x"), s)
	require.Equal(t, "x"+strings.TrimSuffix(buf.String(), "\n"), string(got), "%q", s)

	want, err := json.Marshal(s)
	require.NoError(t, err)
	var escaped bytes.Buffer
	json.HTMLEscape(&escaped, got[1:])
	require.Equal(t, string(want), escaped.String(), "%q", s)
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range jsonStrings {
		checkJSONString(t, s)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStrings {
		f.Add(s)
	}
	f.Fuzz(checkJSONString)
}
