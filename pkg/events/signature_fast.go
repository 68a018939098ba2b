package events

import (
	"encoding/base64"
)

// The direct paths of signature reading. fastEnvelope and fastClaim read
// the envelope and the claim as Signer writes them (compact JSON, the
// members each once under their exact names, no \u escape) in one pass,
// and give up (ok false) on anything else, leaving the decision to
// encoding/json's strict decoding (decodeEnvelope, Verified), so that both
// paths accept the same documents with the same results; the tests hold
// them to it.

// fastEnvelope decodes a DSSE envelope as decodeEnvelope does.
func fastEnvelope(raw []byte) (dsseEnvelope, bool) {
	d := newJSONReader(raw)
	defer d.release()
	var env dsseEnvelope
	seen := 0
	ok := d.object(func(key string) bool {
		var bit int
		var ok bool
		switch key {
		case "payloadType":
			bit = 1
			env.PayloadType, ok = d.str()
		case "payload":
			bit = 2
			env.Payload, ok = d.base64()
		case "signatures":
			bit = 4
			env.Signatures, ok = d.signatures()
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	if !ok || seen != 7 || !d.end() {
		return dsseEnvelope{}, false
	}
	return env, true
}

// signatures reads a non-empty array of {keyid, sig}.
func (d *jsonReader) signatures() ([]dsseSignature, bool) {
	if !d.byte('[') {
		return nil, false
	}
	var out []dsseSignature
	for {
		var s dsseSignature
		seen := 0
		ok := d.object(func(key string) bool {
			var bit int
			var ok bool
			switch key {
			case "keyid":
				bit = 1
				s.KeyID, ok = d.str()
			case "sig":
				bit = 2
				s.Sig, ok = d.base64()
			}
			if !ok || seen&bit != 0 {
				return false
			}
			seen |= bit
			return true
		})
		if !ok || seen != 3 {
			return nil, false
		}
		out = append(out, s)
		if d.byte(']') {
			return out, true
		}
		if !d.byte(',') {
			return nil, false
		}
	}
}

// base64 reads a string of standard base64, as encoding/json decodes a
// []byte.
func (d *jsonReader) base64() ([]byte, bool) {
	v, ok := d.str()
	if !ok {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(v)
	return b, err == nil
}

// fastClaim decodes a claim as Claim does, without unknown members.
func fastClaim(b []byte) (Claim, bool) {
	d := newJSONReader(b)
	defer d.release()
	var c Claim
	seen := 0
	ok := d.object(func(key string) bool {
		var bit int
		var ok bool
		switch key {
		case "id":
			bit = 1 << 0
			c.ID, ok = d.str()
		case "type":
			bit = 1 << 1
			c.Type, ok = d.str()
		case "source":
			bit = 1 << 2
			c.Source, ok = d.str()
		case "subject":
			bit = 1 << 3
			c.Subject, ok = d.str()
		case "time":
			bit = 1 << 4
			c.Time, ok = d.str()
		case "host":
			bit = 1 << 5
			c.Host, ok = d.str()
		case "target":
			bit = 1 << 6
			var t Target
			if t, ok = d.target(false); ok {
				c.Target = &t
			}
		case "seq":
			bit = 1 << 7
			c.Seq, ok = d.uint64()
		case "payload_sha256":
			bit = 1 << 8
			c.PayloadSHA256, ok = d.str()
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	if !ok || !d.end() {
		return Claim{}, false
	}
	return c, true
}
