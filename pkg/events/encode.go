package events

import (
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// EncodeData is the one encoder of every payload: compact JSON, the
// struct's members in order, an empty slice as [] (a schema never takes
// null), U+2028 and U+2029 escaped as encoding/json escapes them, and no
// other escaping than JSON's own.
func EncodeData(p Payload) ([]byte, error) {
	data, err := json.Marshal(p, json.Deterministic(true), jsontext.EscapeForJS(true))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxDataSize {
		return nil, Invalid(ReasonTooLarge, "data", "%d bytes, over the %d-byte limit", len(data), MaxDataSize)
	}
	return data, nil
}

// ValidID accepts 1 to MaxIDLength printable ASCII characters without
// space, so that the id is also a valid Nats-Msg-Id header value as is.
func ValidID(id string) error {
	if id == "" {
		return fmt.Errorf("empty")
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("longer than %d bytes", MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7E {
			return fmt.Errorf("byte %d is not printable ASCII (space excluded)", i)
		}
	}
	return nil
}
