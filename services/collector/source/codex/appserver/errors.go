package appserver

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrMalformed is wrapped by every error about a message that is not valid
// JSON-RPC from the server.
var ErrMalformed = errors.New("malformed message from codex app-server")

// ErrExited is matched by the error returned when the server closes its
// output (usually because it exited) before answering.
var ErrExited = errors.New("codex app-server exited")

// ErrLineTooLong is wrapped when the server writes a line over MaxLine.
var ErrLineTooLong = fmt.Errorf("%w: line longer than %d bytes", ErrMalformed, MaxLine)

// ExitError reports a server that stopped talking before it answered.
type ExitError struct {
	// Reason is the server's "Error: ..." stderr line, or its last stderr
	// line, or empty.
	Reason string
}

func (e *ExitError) Error() string {
	if e.Reason == "" {
		return ErrExited.Error() + " (nothing on stderr)"
	}
	return ErrExited.Error() + ": " + e.Reason
}

// Is makes errors.Is(err, ErrExited) match.
func (e *ExitError) Is(target error) bool { return target == ErrExited }

// RPCError is a JSON-RPC error object returned by the server.
type RPCError struct {
	Code    int64
	Message string
}

// maxErrorText bounds how much of a server's error message is kept.
const maxErrorText = 512

func (e *RPCError) Error() string {
	msg := e.Message
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "..."
	}
	return fmt.Sprintf("error %d: %s", e.Code, strconv.Quote(msg))
}
