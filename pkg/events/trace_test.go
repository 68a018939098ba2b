package events_test

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

func TestHeaderCarrierGet(t *testing.T) {
	tp := fixtureTraceparent
	for _, tc := range []struct {
		name string
		h    nats.Header
		want string
	}{
		{"absent", nats.Header{"ce-id": {"x"}}, ""},
		{"present", nats.Header{"ce-id": {"x"}, "ce-traceparent": {tp}}, tp},
		{"other case", nats.Header{"Ce-TraceParent": {tp}}, tp},
		{"percent-encoded", nats.Header{"ce-traceparent": {"00%2D" + tp[3:]}}, tp},
		{"two values", nats.Header{"ce-traceparent": {tp, tp}}, ""},
		{"two keys", nats.Header{"ce-traceparent": {tp}, "CE-TRACEPARENT": {tp}}, ""},
		{"an empty key beside", nats.Header{"ce-traceparent": {tp}, "CE-TRACEPARENT": {}}, tp},
		{"no values", nats.Header{"ce-traceparent": {}}, ""},
		{"malformed encoding", nats.Header{"ce-traceparent": {"%zz"}}, ""},
		{"longer name", nats.Header{"ce-traceparentx": {tp}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, binding.TraceHeaderCarrier(tc.h).Get("traceparent"))
			assert.Equal(t, tc.want, binding.TraceHeaderCarrier(tc.h).Get("TraceParent"))
		})
	}
	assert.Empty(t, binding.TraceHeaderCarrier(nats.Header{"ce-id": {"x"}}).Get("id"), "only the trace keys")
}
