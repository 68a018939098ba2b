package appserver

import (
	"bufio"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var decodeCases = []struct {
	name, line string
	kind       Kind
	err        string
}{
	{name: "response", line: `{"id":1,"result":{"userAgent":"runtimetruth/0.171.0","codexHome":"/h"}}`, kind: Response},
	{name: "response with jsonrpc member", line: `{"jsonrpc":"2.0","id":2,"result":{}}`, kind: Response},
	{name: "error response", line: `{"error":{"code":-32600,"message":"Not initialized"},"id":1}`, kind: Response},
	{name: "error response with null id", line: `{"error":{"code":-32700,"message":"Parse error"},"id":null}`, kind: Response},
	{name: "notification", line: `{"method":"configWarning","params":{"summary":"x","details":null},"emittedAtMs":1796052426256}`, kind: Notification},
	{name: "notification without params", line: `{"method":"initialized"}`, kind: Notification},
	{name: "server request string id", line: `{"id":"a-1","method":"item/commandExecution/requestApproval","params":{}}`, kind: Request},
	{name: "server request int id", line: `{"id":0,"method":"x"}`, kind: Request},
	{name: "result may be any JSON", line: `{"id":3,"result":[1]}`, kind: Response},
	{name: "not JSON", line: `{"id":1,`, err: "malformed message from codex app-server: line 1 column 9: unexpected end of JSON input"},
	{name: "not an object", line: `[1,2]`, err: "top-level array, want an object"},
	{name: "duplicate key", line: `{"id":1,"id":2,"result":{}}`, err: `duplicate object member name "id"`},
	{name: "trailing data", line: `{"id":1,"result":{}} {}`, err: "unexpected data after the top-level value"},
	{name: "neither id nor method", line: `{"result":{}}`, err: "message has neither id nor method"},
	{name: "empty method", line: `{"method":""}`, err: "method is an empty string"},
	{name: "numeric method", line: `{"method":5}`, err: "method is number"},
	{name: "object id", line: `{"id":{},"result":{}}`, err: "id is object"},
	{name: "fractional id", line: `{"id":1.5,"result":{}}`, err: "id 1.5 is not an integer"},
	{name: "huge id", line: `{"id":123456789012345678901234567890,"result":{}}`, err: "is not an integer"},
	{name: "request with null id", line: `{"id":null,"method":"x"}`, err: `request "x" has a null id`},
	{name: "response without result", line: `{"id":4}`, err: "response 4 has neither result nor error"},
	{name: "null id without error", line: `{"id":null,"result":{}}`, err: "response with a null id and no error"},
	{name: "error not an object", line: `{"id":1,"error":"boom"}`, err: "error is string"},
	{name: "error without code", line: `{"id":1,"error":{"message":"x"}}`, err: "error code is missing"},
	{name: "error with float code", line: `{"id":1,"error":{"code":1.5}}`, err: "error code is a non-integer number"},
	{name: "error with numeric message", line: `{"id":1,"error":{"code":1,"message":2}}`, err: "error message is number"},
	{name: "lone surrogate", line: `{"method":"\ud800"}`, err: "invalid surrogate pair"},
	{name: "invalid UTF-8", line: "{\"method\":\"\xff\"}", err: "invalid UTF-8"},
}

func TestDecode(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Decode([]byte(tc.line))
			if tc.err != "" {
				require.ErrorIs(t, err, ErrMalformed)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.kind, m.Kind)
		})
	}
}

func TestDecodeFields(t *testing.T) {
	m, err := Decode([]byte(`{"error":{"code":-32603,"message":"failed","data":{"x":1}},"id":7}`))
	require.NoError(t, err)
	assert.Equal(t, &RPCError{Code: -32603, Message: "failed"}, m.Err)
	assert.Equal(t, ID{Set: true, Num: 7}, m.ID)
	assert.EqualError(t, m.Err, `error -32603: "failed"`)

	m, err = Decode([]byte(`{"id":"x\"y","method":"m","params":{"a":1}}`))
	require.NoError(t, err)
	assert.Equal(t, ID{Set: true, IsStr: true, Str: `x"y`}, m.ID)
	assert.Equal(t, `"x\"y"`, string(m.ID.appendJSON(nil)))
	a, ok := m.Params.Get("a")
	assert.True(t, ok)
	assert.Equal(t, "1", a.Text)

	long := &RPCError{Code: 1, Message: strings.Repeat("x", 2*maxErrorText)}
	assert.Less(t, len(long.Error()), maxErrorText+32, "server error text is bounded")
}

func TestReadLineBound(t *testing.T) {
	in := strings.Repeat("a", MaxLine) + "\n" + strings.Repeat("b", MaxLine+1) + "\nc"
	r := bufio.NewReaderSize(strings.NewReader(in), 64<<10)
	line, err := readLine(r)
	require.NoError(t, err)
	assert.Len(t, line, MaxLine)
	_, err = readLine(r)
	require.ErrorIs(t, err, ErrLineTooLong)
}

func TestErrorLine(t *testing.T) {
	for _, tc := range []struct{ name, stderr, want string }{
		{
			name:   "codex startup error after colored tracing",
			stderr: "WARNING: proceeding, even though we could not create PATH aliases\n\x1b[2m2026-11-30T16:10:05Z\x1b[0m \x1b[31mERROR\x1b[0m codex_app_server: bubblewrap\nError: approval_policy = \"untrusted\" is no longer supported; remove this setting\n",
			want:   `Error: approval_policy = "untrusted" is no longer supported; remove this setting`,
		},
		{name: "last line without Error:", stderr: "one\n\x1b[31mtwo\x1b[0m\n\n", want: "two"},
		{name: "nothing", stderr: "", want: ""},
		{name: "control characters and bad UTF-8", stderr: "Error: a\x00b\xffc\r\n", want: "Error: ab\uFFFDc"},
		{name: "long", stderr: "Error: " + strings.Repeat("é", 600), want: "Error: " + strings.Repeat("é", 252) + "..."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, errorLine([]byte(tc.stderr)))
		})
	}
}

// FuzzDecode feeds arbitrary server output to Decode: it must never
// panic, and every message it accepts must be self-consistent; the reply
// to a server request must decode as an error response with the same id.
func FuzzDecode(f *testing.F) {
	for _, tc := range decodeCases {
		f.Add([]byte(tc.line))
	}
	f.Add([]byte(`{"id":4,"result":{"data":[{"name":"mini","tools":{"echo":{"name":"echo","inputSchema":{"type":"object"}}},"authStatus":"unsupported"}],"nextCursor":null}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := Decode(line)
		if err != nil {
			return
		}
		switch m.Kind {
		case Response:
			if m.Err == nil && m.ID.Null {
				t.Fatalf("successful response with null id: %s", line)
			}
		case Notification:
			if m.Method == "" || m.ID.Set {
				t.Fatalf("bad notification %+v", m)
			}
		case Request:
			if m.Method == "" || !m.ID.Set || m.ID.Null {
				t.Fatalf("bad request %+v", m)
			}
			reply := append(append([]byte(`{"id":`), m.ID.appendJSON(nil)...), `,"error":{"code":-32601,"message":"x"}}`...)
			r, err := Decode(reply)
			if err != nil || r.Kind != Response || r.ID != m.ID || r.Err == nil || r.Err.Code != -32601 {
				t.Fatalf("reply %s to %s: %+v %v", reply, line, r, err)
			}
		default:
			t.Fatalf("unknown kind %d", m.Kind)
		}
	})
}
