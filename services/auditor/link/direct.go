package link

import (
	"bytes"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/bufpool"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
)

// prepareDirect is Prepare's non-strict path for a message Entry accepts
// as an event: the canonical form of Entry's event written from the
// message's bytes (canonjson.AppendJSONFunc transcodes the data), and the
// meta MetaOf would read from the tree, without building it. It returns
// false where Entry makes a rejection or the canonical form cannot carry
// the event: the tree's path then records the rejection and words its
// cause.
func prepareDirect(chainName string, m *Message) (Prepared, bool) {
	buf := bufpool.Get()
	defer bufpool.Put(buf)
	p := Prepared{Chain: chainName}
	b, ok := appendEntry((*buf)[:0], m, &p.Meta)
	if !ok {
		return Prepared{}, false
	}
	*buf = b
	// The event goes where its link line will be, so that sealing it
	// (once) needs no second copy.
	ln := chain.LineStart(make([]byte, 0, len(b)+len(chainName)+chain.LineRoom), chainName)
	ln = append(ln, b...)
	p.Bytes = ln[len(ln)-len(b) : len(ln) : len(ln)]
	p.line, p.claimed = ln, new(atomic.Bool)
	return p, true
}

// appendEntry appends the canonical form of Entry(m, …) for a message
// Entry accepts, and fills meta as MetaOf does; false otherwise. The
// members are written in canonical order: attributes, data, nats, and
// within them as attributesOf and position name them, sorted.
func appendEntry(dst []byte, m *Message, meta *Meta) ([]byte, bool) {
	e, err := binding.FromNATS(m.Header, m.Data)
	if err != nil || m.Seq > canonjson.MaxSafeInteger {
		return nil, false
	}
	a := binding.AttributesOf(e)
	digest, err := claimed(m, e)
	if err != nil {
		return nil, false
	}
	*meta = Meta{
		Stream: m.Stream, StreamSeq: m.Seq, NATSSubject: m.Subject, Stored: stamp(m.Stored),
		ID: a.ID, Type: a.Type, Source: a.Source, Subject: a.Subject, Time: stamp(a.Time),
	}
	dst = appendMember(dst, `{"attributes":{"datacontenttype":`, a.DataContentType)
	dst = appendMember(dst, `,"dataschema":`, a.DataSchema)
	dst = appendMember(dst, `,"id":`, a.ID)
	if a.Signature != "" {
		dst = appendMember(dst, `,"`+dsse.ExtSignature+`":`, a.Signature)
	}
	dst = appendMember(dst, `,"source":`, a.Source)
	dst = appendMember(dst, `,"specversion":`, binding.SpecVersion)
	dst = appendMember(dst, `,"subject":`, a.Subject)
	dst = append(dst, `,"time":`...)
	dst = appendTime(dst, a.Time)
	if a.Traceparent != "" {
		dst = appendMember(dst, `,"traceparent":`, a.Traceparent)
	}
	if a.Tracestate != "" {
		dst = appendMember(dst, `,"tracestate":`, a.Tracestate)
	}
	dst = appendMember(dst, `,"type":`, a.Type)
	dst = append(dst, `},"data":`...)
	dst, err = canonjson.AppendJSONFunc(dst, m.Data, func(key, value []byte) { dataMeta(meta, key, value) })
	if err != nil {
		return nil, false
	}
	if digest != "" {
		dst = append(dst, `,"`+DataDigestMember+`":"`...)
		dst = append(dst, digest...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"nats":{"seq":`...)
	dst = strconv.AppendUint(dst, m.Seq, 10)
	dst = appendMember(dst, `,"stream":`, m.Stream)
	dst = appendMember(dst, `,"subject":`, m.Subject)
	dst = append(dst, `,"time":`...)
	dst = appendTime(dst, m.Stored)
	return append(dst, "}}"...), true
}

// appendMember appends what precedes a string member's value (its name,
// quoted, and the colon, after the separator or the opening brace) and
// the canonical JSON string v.
func appendMember(dst []byte, head, v string) []byte {
	return canonjson.AppendString(append(dst, head...), v)
}

// appendTime appends t as position and attributesOf write it: a string of
// its UTC RFC 3339 form (which needs no escaping).
func appendTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.UTC().AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// stamp is t as MetaOf reads it back from appendTime's form: t in UTC
// for years RFC 3339 holds.
func stamp(t time.Time) time.Time {
	t = t.UTC()
	if y := t.Year(); y >= 1 && y <= 9999 {
		return t
	}
	return parseTime(t.Format(time.RFC3339Nano))
}

// dataMeta fills meta from a top-level member of the event's data, given
// in canonical form, as MetaOf reads host, status and target from the
// tree: text of strings only, a target only when it is an object.
func dataMeta(meta *Meta, key, value []byte) {
	switch string(key) {
	case "host":
		meta.Host = textOf(value)
	case "status":
		meta.Status = textOf(value)
	case "target":
		if value[0] == '{' {
			meta.Target = targetOf(value)
		}
	}
}

// textOf returns the string a canonical JSON value holds; "" when the
// value is not a string.
func textOf(v []byte) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	if s := v[1 : len(v)-1]; bytes.IndexByte(s, '\\') < 0 {
		return string(s)
	}
	var b [64]byte
	return string(appendText(b[:0], v))
}

// appendText appends the string the canonical JSON string v holds,
// decoding its escapes (RFC 8785 writes only \", \\, \b, \f, \n, \r, \t
// and \u00XX).
func appendText(dst, v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return dst
	}
	s := v[1 : len(v)-1]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			dst = append(dst, c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 'b':
			c = '\b'
		case 'f':
			c = '\f'
		case 'n':
			c = '\n'
		case 'r':
			c = '\r'
		case 't':
			c = '\t'
		case 'u':
			if i+4 < len(s) {
				c = unhex(s[i+3])<<4 | unhex(s[i+4])
				i += 4
			}
		}
		dst = append(dst, c)
	}
	return dst
}

func unhex(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// targetOf is MetaOf's "<kind>:<identifier>" of a canonical JSON object.
func targetOf(obj []byte) string {
	var kind, id []byte
	for i := 1; i < len(obj) && obj[i] == '"'; {
		k := valueEnd(obj, i)
		v := k + 1 // past ':'
		e := valueEnd(obj, v)
		switch string(obj[i:k]) {
		case `"kind"`:
			kind = obj[v:e]
		case `"identifier"`:
			id = obj[v:e]
		}
		i = e + 1 // past ',' or '}'
	}
	var b [128]byte
	t := appendText(b[:0], kind)
	t = append(t, ':')
	return string(appendText(t, id))
}

// valueEnd returns the end of the canonical JSON value that starts at
// obj[i], a member value or key of an object.
func valueEnd(obj []byte, i int) int {
	depth := 0
	for ; i < len(obj); i++ {
		switch obj[i] {
		case '"':
			for i++; i < len(obj) && obj[i] != '"'; i++ {
				if obj[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ':':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}
