package events

// AppendJSON appends v as its event's data carries it (EncodeData), for
// records that hold one (the verifier's).
func (v Verdict) AppendJSON(dst []byte) []byte {
	b, err := EncodeData(v)
	if err != nil {
		return append(dst, "null"...)
	}
	return append(dst, b...)
}
