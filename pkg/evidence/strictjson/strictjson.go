// Package strictjson decodes JSON the one strict way runtimetruth reads a
// record or request someone else wrote: exactly one JSON value, with no
// member the Go type does not know, and nothing after it (white space
// aside). Data after the value is refused rather than ignored, so two
// readers of the same bytes can never disagree on what they hold.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// ErrTrailingData is returned for data after the JSON value.
var ErrTrailingData = errors.New("data after the JSON value")

// Decode decodes data into v (a pointer), as encoding/json does with
// unknown fields disallowed, and refuses data after the value.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ErrTrailingData
	}
	return nil
}
