package events

// AppendJSON appends v as its event's data carries it (encodeData), for
// records that hold one (the verifier's).
func (v Verdict) AppendJSON(dst []byte) []byte {
	b, err := encodeData(v)
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}
