package events

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Hooks for the external tests.

// CheckSchema runs the JSON Schema of type typ on data.
func CheckSchema(typ string, data []byte) error { return validateData(byType[typ], data) }

// Compiler returns a JSON Schema compiler that knows every payload schema
// and the report schema by their $id, and asserts formats.
func Compiler() (*jsonschema.Compiler, error) {
	c, _, err := newCompiler()
	return c, err
}

// Hooks for the tests holding the hand-written pattern checks to the
// regular expressions they replace.
var (
	IsHex64       = isHex64
	IsReasonToken = isReasonToken
)
