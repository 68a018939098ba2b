package events

import (
	"errors"
	"regexp"
	"strings"

	"github.com/cloudevents/sdk-go/v2/event"
)

// The extension attributes the codec accepts: W3C trace context, as the
// CloudEvents distributed-tracing extension defines it. Any other extension
// is rejected (ReasonUnknownExtension).
const (
	ExtTraceparent = "traceparent"
	ExtTracestate  = "tracestate"
)

// maxTracestate is the W3C limit on a tracestate value.
const maxTracestate = 512

var traceparentRE = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$`)

// validTraceparent checks a version-00 W3C traceparent with non-zero ids.
func validTraceparent(v string) error {
	m := traceparentRE.FindStringSubmatch(v)
	if m == nil {
		return errors.New("not a version-00 W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>, lower case)")
	}
	if strings.Trim(m[1], "0") == "" || strings.Trim(m[2], "0") == "" {
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
	s, _ := c.e.Extensions()[key].(string)
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
		if _, ok := c.e.Extensions()[k]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}
