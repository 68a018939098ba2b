package chain

import (
	"bytes"
	"strconv"
)

// EventID reads the CloudEvent id from a link's canonical event bytes
// without parsing them: the "id" member of "attributes", the event's first
// member (whose members before "id", datacontenttype and dataschema, are
// strings, so the first `,"id":"` is the attribute). raw is the id as
// written, a JSON string's content with its canonical escapes (UnquoteID
// decodes it); message is false for an auditor-made record (a rejection or
// a notice about the stream: the event ends with "rejected": true), whose
// id names the record rather than a message. ok is false when the bytes
// are not an event as the auditor writes it.
func EventID(event []byte) (raw []byte, message, ok bool) {
	const head, key = `{"attributes":{`, `,"id":"`
	if !bytes.HasPrefix(event, []byte(head)) {
		return nil, false, false
	}
	i := bytes.Index(event[len(head):], []byte(key))
	if i < 0 {
		return nil, false, false
	}
	start := len(head) + i + len(key)
	for j := start; j < len(event); j++ {
		switch event[j] {
		case '\\':
			j++
		case '"':
			return event[start:j:j], !bytes.HasSuffix(event, []byte(`,"rejected":true}`)), true
		}
	}
	return nil, false, false
}

// UnquoteID decodes an id EventID returned.
func UnquoteID(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw)
	}
	s, err := strconv.Unquote(`"` + string(raw) + `"`)
	if err != nil {
		return string(raw)
	}
	return s
}
