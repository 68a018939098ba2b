package events_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// The codec (FromNATS's and ParseAttributes's header reading, New's,
// NewMsg's message building, a verdict's data included) must give exactly what
// the reference codec (on the sdk-go setters, reference_test.go) gives:
// the same event, message and error.

// requireSameDecode decodes h and data by the codec and the reference and
// compares everything.
func requireSameDecode(t *testing.T, h nats.Header, data []byte) {
	t.Helper()
	want, wantErr := events.FromNATSReference(h, data)
	got, gotErr := events.FromNATS(h, data)
	attrs, attrsErr := events.ParseAttributes(h, data)
	if wantErr != nil {
		require.Error(t, gotErr)
		require.Equal(t, wantErr.Error(), gotErr.Error())
		require.Equal(t, events.ReasonOf(wantErr), events.ReasonOf(gotErr))
		require.Error(t, attrsErr)
		require.Equal(t, wantErr.Error(), attrsErr.Error())
		return
	}
	require.NoError(t, gotErr)
	require.NoError(t, attrsErr)
	require.True(t, reflect.DeepEqual(want, got), "FromNATS:\n%#v\nwant\n%#v", got, want)
	ext := want.Extensions()
	tp, _ := ext[events.ExtTraceparent].(string)
	ts, _ := ext[events.ExtTracestate].(string)
	sig, _ := ext[events.ExtSignature].(string)
	require.Equal(t, events.Attributes{
		ID: want.ID(), Source: want.Source(), Type: want.Type(), Subject: want.Subject(), Time: want.Time(),
		DataContentType: want.DataContentType(), DataSchema: want.DataSchema(), Traceparent: tp, Tracestate: ts,
		Signature: sig,
	}, attrs)
}

// headerVariants are the fixtures' messages and edits of their headers,
// accepted and rejected.
func headerVariants(t *testing.T) []*nats.Msg {
	t.Helper()
	var out []*nats.Msg
	edits := []func(h nats.Header){
		func(nats.Header) {},
		func(h nats.Header) { delete(h, events.HeaderMsgID) },
		func(h nats.Header) { h[events.HeaderMsgID] = []string{"other"} },
		func(h nats.Header) { h["nats-msg-id"] = h[events.HeaderMsgID] },
		func(h nats.Header) { h["Content-Type"] = []string{"application/json"} },
		func(h nats.Header) { h["Content-Type"] = []string{"application/cloudevents+json"} },
		func(h nats.Header) { h["CE-ID"] = h["ce-id"]; delete(h, "ce-id") },
		func(h nats.Header) { h["Ce-Subject"] = h["ce-subject"] },
		func(h nats.Header) { h["ce-subject"] = []string{`"quoted value"`} },
		func(h nats.Header) { h["ce-subject"] = []string{"a%20b"} },
		func(h nats.Header) { h["ce-subject"] = []string{" padded "} },
		func(h nats.Header) { h["ce-subject"] = []string{"%20padded"} },
		func(h nats.Header) { h["ce-subject"] = []string{""} },
		func(h nats.Header) { h["ce-subject"] = []string{"a%0Ab"} },
		func(h nats.Header) { h["ce-subject"] = []string{"a", "b"} },
		func(h nats.Header) { h["ce-id"] = []string{"a%20b"} },
		func(h nats.Header) { h["ce-id"] = []string{""} },
		func(h nats.Header) { h["ce-source"] = []string{"/a/b%20c"} },
		func(h nats.Header) { h["ce-source"] = []string{"/a/b%2520c"} },
		func(h nats.Header) { h["ce-source"] = []string{"http://x/%zz"} },
		func(h nats.Header) { h["ce-source"] = []string{"//user:pw@host/x"} },
		func(h nats.Header) { h["ce-source"] = []string{"HTTP://Host/x"} },
		func(h nats.Header) { h["ce-source"] = []string{"%20"} },
		func(h nats.Header) { h["ce-source"] = []string{""} },
		func(h nats.Header) { delete(h, "ce-source") },
		func(h nats.Header) { delete(h, "ce-time") },
		func(h nats.Header) { h["ce-time"] = []string{"2026-10-06T05:09:41.5+02:00"} },
		func(h nats.Header) { h["ce-time"] = []string{"0001-01-01T00:00:00Z"} },
		func(h nats.Header) { h["ce-time"] = []string{"yesterday"} },
		func(h nats.Header) { h["ce-specversion"] = []string{"0.3"} },
		func(h nats.Header) { h["ce-type"] = []string{"dev.other"} },
		func(h nats.Header) { h["ce-type"] = []string{events.TypeVerdictPass} },
		func(h nats.Header) { h["ce-dataschema"] = []string{"https://example.com/s"} },
		func(h nats.Header) { h["ce-datacontenttype"] = []string{"application/json%3B"} },
		func(h nats.Header) { h["ce-traceparent"] = []string{fixtureTraceparent} },
		func(h nats.Header) { h["ce-traceparent"] = []string{strings.ToUpper(fixtureTraceparent)} },
		func(h nats.Header) { h["ce-traceparent"] = []string{""} },
		func(h nats.Header) { h["ce-tracestate"] = []string{"rt=1"} },
		func(h nats.Header) {
			h["ce-traceparent"] = []string{fixtureTraceparent}
			h["ce-tracestate"] = []string{"rt=1"}
		},
		func(h nats.Header) {
			h["ce-traceparent"] = []string{fixtureTraceparent}
			h["ce-tracestate"] = []string{"r%0At"}
		},
		func(h nats.Header) { h["ce-other"] = []string{"x"} },
		func(h nats.Header) { h["ce-"] = []string{"x"} },
		func(h nats.Header) { h["X-Other"] = []string{"x", "y"} },
		func(h nats.Header) { h["ce-big"] = []string{strings.Repeat("x", events.MaxHeaderSize)} },
	}
	for _, p := range fixtures(t) {
		m, _, err := events.NewMsg(fixtureSource, p, events.WithID(fixtureID), events.WithTime(fixtureTime))
		require.NoError(t, err)
		for _, edit := range edits {
			h := cloneHeader(m.Header)
			edit(h)
			out = append(out, &nats.Msg{Subject: m.Subject, Header: h, Data: m.Data})
		}
		out = append(out, &nats.Msg{Subject: m.Subject, Header: m.Header},
			&nats.Msg{Subject: m.Subject, Header: m.Header, Data: make([]byte, events.MaxDataSize+1)})
	}
	return out
}

func TestFromNATSIsReference(t *testing.T) {
	for _, m := range headerVariants(t) {
		requireSameDecode(t, m.Header, m.Data)
	}
}

// FuzzFromNATSIsReference holds the header reading to the reference on
// arbitrary header blocks: accepted iff the reference accepts, the same
// event or the same error.
func FuzzFromNATSIsReference(f *testing.F) {
	for _, p := range fixtures(f) {
		m := tracedMsg(f, p)
		f.Add(headerBlock(m.Header), m.Data)
	}
	f.Fuzz(func(t *testing.T, block string, data []byte) {
		h, err := nats.DecodeHeadersMsg([]byte(block))
		if err != nil {
			return
		}
		requireSameDecode(t, h, data)
	})
}

// requireSameMsg compares NewMsg with the reference.
func requireSameMsg(t *testing.T, got *nats.Msg, gotE event.Event, gotErr error, want *nats.Msg, wantE event.Event, wantErr error) {
	t.Helper()
	if wantErr != nil {
		require.Error(t, gotErr)
		require.Equal(t, wantErr.Error(), gotErr.Error())
		require.Equal(t, events.ReasonOf(wantErr), events.ReasonOf(gotErr))
		return
	}
	require.NoError(t, gotErr)
	require.Equal(t, want.Subject, got.Subject)
	require.Equal(t, want.Header, got.Header)
	require.Equal(t, string(want.Data), string(got.Data))
	require.True(t, reflect.DeepEqual(wantE, gotE), "event:\n%#v\nwant\n%#v", gotE, wantE)
}

func TestNewMsgIsReference(t *testing.T) {
	sources := []string{fixtureSource, "/a/b%20c", "/a/b c", "", " /x", "HTTP://Host/x", "//user:pw@host/x", "/x\x01", "http://x/%zz", "urn:x:y"}
	ids := []string{fixtureID, "", " x", "a b", strings.Repeat("a", events.MaxIDLength+1), "é"}
	traces := [][2]string{{"", ""}, {fixtureTraceparent, ""}, {fixtureTraceparent, "rt=1"}, {"", "rt=1"}, {"bad", ""},
		{fixtureTraceparent, strings.Repeat("a", 513)}, {fixtureTraceparent, "r\nt"}}
	times := []time.Time{fixtureTime, {}, fixtureTime.In(time.FixedZone("x", 3600))}
	for name, p := range fixtures(t) {
		for _, source := range sources {
			for _, id := range ids {
				for _, tr := range traces {
					for _, tm := range times {
						opts := []events.Option{events.WithID(id), events.WithTime(tm), events.WithTraceContext(tr[0], tr[1])}
						if id == "" || tm.IsZero() {
							continue // a fresh id or time each call
						}
						want, wantE, wantErr := events.NewMsgReference(source, p, opts...)
						got, gotE, gotErr := events.NewMsg(source, p, opts...)
						requireSameMsg(t, got, gotE, gotErr, want, wantE, wantErr)
						_ = name
					}
				}
			}
		}
	}
}
