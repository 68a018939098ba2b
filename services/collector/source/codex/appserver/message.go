package appserver

import (
	"fmt"
	"strconv"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// Kind classifies a decoded message.
type Kind uint8

// The message kinds.
const (
	// Response answers one of the client's requests.
	Response Kind = iota + 1
	// Notification is a server message without an id.
	Notification
	// Request is a server-to-client request (it has both id and method).
	Request
)

// ID is a JSON-RPC id: an integer, a string, or null.
type ID struct {
	// Set reports whether the message had an "id" member at all.
	Set bool
	// Null reports "id": null (allowed only on error responses).
	Null bool
	// Str holds a string id.
	Str string
	// IsStr distinguishes a string id from an integer one.
	IsStr bool
	// Num holds an integer id.
	Num int64
}

// appendJSON appends the id as it appeared on the wire.
func (id ID) appendJSON(dst []byte) []byte {
	switch {
	case !id.Set || id.Null:
		return append(dst, "null"...)
	case id.IsStr:
		return canonjson.AppendString(dst, id.Str)
	}
	return strconv.AppendInt(dst, id.Num, 10)
}

// Message is one decoded line from the server.
type Message struct {
	Kind   Kind
	ID     ID
	Method string
	// Params holds a request's or notification's params (Null when absent).
	Params jsontree.Value
	// Result holds a successful response's result.
	Result jsontree.Value
	// Err holds an error response's error.
	Err *RPCError
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Decode parses one line written by the server. Unknown members (such as
// "emittedAtMs" or "jsonrpc") are ignored; everything the protocol defines
// is type-checked.
func Decode(line []byte) (Message, error) {
	root, err := jsontree.Parse(line)
	if err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if root.Kind != jsontree.Object {
		return Message{}, malformed("top-level %s, want an object", root.Kind)
	}
	var (
		m                          Message
		hasMethod, hasResult, hasE bool
		errVal                     jsontree.Value
	)
	for _, mem := range root.Members {
		v := mem.Value
		switch mem.Key {
		case "id":
			if m.ID, err = decodeID(v); err != nil {
				return Message{}, err
			}
		case "method":
			if v.Kind != jsontree.String || v.Text == "" {
				return Message{}, malformed("method is %s, want a non-empty string", describe(v))
			}
			m.Method, hasMethod = v.Text, true
		case "params":
			m.Params = v
		case "result":
			m.Result, hasResult = v, true
		case "error":
			errVal, hasE = v, v.Kind != jsontree.Null
		}
	}
	switch {
	case hasMethod && m.ID.Set:
		if m.ID.Null {
			return Message{}, malformed("request %q has a null id", m.Method)
		}
		m.Kind = Request
	case hasMethod:
		m.Kind = Notification
	case m.ID.Set:
		m.Kind = Response
		if hasE {
			if m.Err, err = decodeError(errVal); err != nil {
				return Message{}, err
			}
			return m, nil
		}
		if m.ID.Null {
			return Message{}, malformed("response with a null id and no error")
		}
		if !hasResult {
			return Message{}, malformed("response %s has neither result nor error", m.ID.appendJSON(nil))
		}
	default:
		return Message{}, malformed("message has neither id nor method")
	}
	return m, nil
}

func decodeID(v jsontree.Value) (ID, error) {
	switch v.Kind {
	case jsontree.Null:
		return ID{Set: true, Null: true}, nil
	case jsontree.String:
		return ID{Set: true, IsStr: true, Str: v.Text}, nil
	case jsontree.Number:
		n, err := v.Int64()
		if err != nil {
			return ID{}, malformed("id %s is not an integer", v.Text)
		}
		return ID{Set: true, Num: n}, nil
	}
	return ID{}, malformed("id is %s, want an integer or a string", v.Kind)
}

func decodeError(v jsontree.Value) (*RPCError, error) {
	if v.Kind != jsontree.Object {
		return nil, malformed("error is %s, want an object", describe(v))
	}
	e := &RPCError{}
	code, ok := v.Get("code")
	if !ok || !code.IsInteger() {
		return nil, malformed("error code is %s, want an integer", describeOpt(code, ok))
	}
	n, err := code.Int64()
	if err != nil {
		return nil, malformed("error code %s out of range", code.Text)
	}
	e.Code = n
	if msg, ok := v.Get("message"); ok {
		if msg.Kind != jsontree.String {
			return nil, malformed("error message is %s, want a string", describe(msg))
		}
		e.Message = msg.Text
	}
	return e, nil
}

func describe(v jsontree.Value) string {
	if v.Kind == jsontree.String && v.Text == "" {
		return "an empty string"
	}
	return v.Kind.String()
}

func describeOpt(v jsontree.Value, ok bool) string {
	if !ok {
		return "missing"
	}
	if v.Kind == jsontree.Number {
		return "a non-integer number"
	}
	return describe(v)
}
