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
	d := fastDecs.Get().(*fastDec)
	defer d.release()
	d.b, d.s = raw, string(raw)
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
func (d *fastDec) signatures() ([]dsseSignature, bool) {
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
func (d *fastDec) base64() ([]byte, bool) {
	v, ok := d.str()
	if !ok {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(v)
	return b, err == nil
}

// fastClaim decodes a claim as Claim does, without unknown members.
func fastClaim(b []byte) (Claim, bool) {
	d := fastDecs.Get().(*fastDec)
	defer d.release()
	d.b, d.s = b, string(b)
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

// uint64 reads a plain unsigned integer literal (0|[1-9][0-9]*) that
// fits in a uint64, without a fraction or exponent.
func (d *fastDec) uint64() (uint64, bool) {
	d.ws()
	start := d.i
	var v uint64
	for d.i < len(d.b) && '0' <= d.b[d.i] && d.b[d.i] <= '9' {
		c := uint64(d.b[d.i] - '0')
		if v > (1<<64-1-c)/10 {
			return 0, false
		}
		v = v*10 + c
		d.i++
	}
	n := d.i - start
	if n == 0 || (n > 1 && d.b[start] == '0') {
		return 0, false
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return v, true
}
