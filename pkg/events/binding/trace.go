package binding

import (
	"errors"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
)

// The extension attributes the codec accepts: W3C trace context, as the
// CloudEvents distributed-tracing extension defines it. Any other extension
// is rejected (events.ReasonUnknownExtension).
const (
	ExtTraceparent = "traceparent"
	ExtTracestate  = "tracestate"
)

// maxTracestate is the W3C limit on a tracestate value.
const maxTracestate = 512

// validTraceparent checks a version-00 W3C traceparent with non-zero ids:
// ^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$ (patterns_test.go holds it
// to that expression), then the ids.
func validTraceparent(v string) error {
	if len(v) != 55 || v[:3] != "00-" || v[35] != '-' || v[52] != '-' ||
		!lowerHex(v[3:35]) || !lowerHex(v[36:52]) || !lowerHex(v[53:]) {
		return errors.New("not a version-00 W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case)")
	}
	if strings.Trim(v[3:35], "0") == "" || strings.Trim(v[36:52], "0") == "" {
		return errors.New("all-zero trace-id or parent-id")
	}
	return nil
}

func validTracestate(v string) error {
	if v == "" || len(v) > maxTracestate {
		return errors.New("empty or longer than 512 bytes")
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7E {
			return errors.New("not printable ASCII")
		}
	}
	return nil
}

// Carrier reads and writes an event's trace context extensions. It has the
// method set of OpenTelemetry's propagation.TextMapCarrier, so
//
//	otel.GetTextMapPropagator().Inject(ctx, events.TraceCarrier(&e))
//
// puts the current span's context into e, and Extract(ctx, ...) on a
// received event continues the trace.
type Carrier struct{ e *event.Event }

// TraceCarrier returns the carrier of e's trace context.
func TraceCarrier(e *event.Event) Carrier { return Carrier{e: e} }

// Get returns the traceparent or tracestate value, or "".
func (c Carrier) Get(key string) string {
	key = strings.ToLower(key)
	if key != ExtTraceparent && key != ExtTracestate {
		return ""
	}
	s, _ := extensions(*c.e)[key].(string)
	return s
}

// Set sets traceparent or tracestate; other keys are ignored. The codec
// checks the values when the event is encoded.
func (c Carrier) Set(key, value string) {
	key = strings.ToLower(key)
	if key == ExtTraceparent || key == ExtTracestate {
		c.e.SetExtension(key, value)
	}
}

// Keys lists the trace context keys present.
func (c Carrier) Keys() []string {
	var keys []string
	for _, k := range []string{ExtTraceparent, ExtTracestate} {
		if _, ok := extensions(*c.e)[k]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// HeaderCarrier reads and writes the trace context of an event already
// encoded as a NATS message (ToNATS): its ce-traceparent and ce-tracestate
// headers. It has the method set of OpenTelemetry's
// propagation.TextMapCarrier, so a consumer can continue the producer's
// trace from a received message without decoding it, and a publisher can
// add its span's context to a message built by NewMsg:
//
//	ctx = otel.GetTextMapPropagator().Extract(ctx, events.TraceHeaderCarrier(msg.Headers()))
type HeaderCarrier struct{ h nats.Header }

// TraceHeaderCarrier returns the carrier of the trace context headers in h.
// Set needs a non-nil h.
func TraceHeaderCarrier(h nats.Header) HeaderCarrier { return HeaderCarrier{h: h} }

// Get returns the decoded traceparent or tracestate header value, or ""
// when it is absent, given more than once or malformed. Header names match
// case-insensitively, as FromNATS matches them.
func (c HeaderCarrier) Get(key string) string {
	key = strings.ToLower(key)
	if key != ExtTraceparent && key != ExtTracestate {
		return ""
	}
	name := HeaderPrefix + key
	var found string
	n := 0
	for k, vs := range c.h {
		if len(k) == len(name) && strings.EqualFold(k, name) {
			n += len(vs)
			if len(vs) > 0 {
				found = vs[0]
			}
		}
	}
	if n != 1 {
		return ""
	}
	v, err := decodeValue(found)
	if err != nil {
		return ""
	}
	return v
}

// Set sets the traceparent or tracestate header, replacing any copy under
// another case; other keys, and values the codec would reject (so that the
// consumer would dead-letter the event), are ignored.
func (c HeaderCarrier) Set(key, value string) {
	key = strings.ToLower(key)
	switch key {
	case ExtTraceparent:
		if validTraceparent(value) != nil {
			return
		}
	case ExtTracestate:
		if validTracestate(value) != nil {
			return
		}
	default:
		return
	}
	for k := range c.h {
		if strings.EqualFold(k, HeaderPrefix+key) {
			delete(c.h, k)
		}
	}
	c.h[HeaderPrefix+key] = []string{encodeValue(value)}
}

// Keys lists the trace context keys present.
func (c HeaderCarrier) Keys() []string {
	var keys []string
	for _, k := range []string{ExtTraceparent, ExtTracestate} {
		for hk := range c.h {
			if strings.EqualFold(hk, HeaderPrefix+k) {
				keys = append(keys, k)
				break
			}
		}
	}
	return keys
}

// lowerHex reports whether every byte of s is 0-9 or a-f.
func lowerHex(s string) bool { return strings.Trim(s, "0123456789abcdef") == "" }
