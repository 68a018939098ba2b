package events_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

// The envelope's decoding and encoding, on every fixture under edits of
// its headers and on a matrix of New's inputs, against golden outcomes:
// the event's attributes and data, the message's headers, or the error
// and its reason. The golden files were first written by the codec these
// replaced (headers read and written directly, held to the sdk-go
// setters), so they pin what it accepted and refused.

// headerVariants are the fixtures' messages and edits of their headers,
// accepted and rejected.
func headerVariants(t *testing.T) []*nats.Msg {
	t.Helper()
	var out []*nats.Msg
	edits := []func(h nats.Header){
		func(nats.Header) {},
		func(h nats.Header) { delete(h, binding.HeaderMsgID) },
		func(h nats.Header) { h[binding.HeaderMsgID] = []string{"other"} },
		func(h nats.Header) { h["nats-msg-id"] = h[binding.HeaderMsgID] },
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
	fx := fixtures(t)
	names := slices.Sorted(maps.Keys(fx))
	for _, name := range names {
		p := fx[name]
		m, _, err := binding.NewMsg(fixtureSource, p, binding.WithID(fixtureID), binding.WithTime(fixtureTime))
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

// describeEvent is an event's attributes and data, one per line.
func describeEvent(e event.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  specversion=%q id=%q source=%q type=%q subject=%q time=%s datacontenttype=%q dataschema=%q\n",
		e.SpecVersion(), e.ID(), e.Source(), e.Type(), e.Subject(), e.Time().Format(time.RFC3339Nano), e.DataContentType(), e.DataSchema())
	ext := e.Extensions()
	names := slices.Sorted(maps.Keys(ext))
	for _, k := range names {
		fmt.Fprintf(&b, "  ext %s=%q\n", k, ext[k])
	}
	fmt.Fprintf(&b, "  data %d bytes\n", len(e.Data()))
	return b.String()
}

// describeHeader is a message's headers, sorted.
func describeHeader(h nats.Header) string {
	keys := slices.Sorted(maps.Keys(h))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %q\n", k, h[k])
	}
	return b.String()
}

func describeErr(err error) string {
	return fmt.Sprintf("  error (%s): %v\n", events.ReasonOf(err), err)
}

func TestFromNATSGolden(t *testing.T) {
	var b strings.Builder
	for i, m := range headerVariants(t) {
		fmt.Fprintf(&b, "variant %d\n", i)
		e, err := binding.FromNATS(m.Header, m.Data)
		if err != nil {
			b.WriteString(describeErr(err))
			continue
		}
		a := binding.AttributesOf(e)
		require.Equal(t, e.ID(), a.ID)
		require.Equal(t, e.Source(), a.Source)
		require.Equal(t, e.Time(), a.Time)
		b.WriteString(describeEvent(e))
	}
	golden(t, "wire/fromnats.golden", []byte(b.String()))
}

func TestNewMsgGolden(t *testing.T) {
	sources := []string{fixtureSource, "/a/b%20c", "/a/b c", "", " /x", "HTTP://Host/x", "//user:pw@host/x", "/x\x01", "http://x/%zz", "urn:x:y"}
	ids := []string{fixtureID, " x", "a b", strings.Repeat("a", events.MaxIDLength+1), "é"}
	traces := [][2]string{{"", ""}, {fixtureTraceparent, ""}, {fixtureTraceparent, "rt=1"}, {"", "rt=1"}, {"bad", ""},
		{fixtureTraceparent, strings.Repeat("a", 513)}, {fixtureTraceparent, "r\nt"}}
	times := []time.Time{fixtureTime, fixtureTime.In(time.FixedZone("x", 3600))}
	fx := fixtures(t)
	names := slices.Sorted(maps.Keys(fx))
	var b strings.Builder
	for i, name := range names {
		p := fx[name]
		for _, source := range sources {
			for _, id := range ids {
				for j, tr := range traces {
					for k, tm := range times {
						if i > 0 && (j > 0 || k > 0) {
							continue // the whole matrix for one payload
						}
						fmt.Fprintf(&b, "%s source=%q id=%q trace=%q time=%s\n", name, source, id, tr, tm.Format(time.RFC3339Nano))
						m, e, err := binding.NewMsg(source, p, binding.WithID(id), binding.WithTime(tm), binding.WithTraceContext(tr[0], tr[1]))
						if err != nil {
							b.WriteString(describeErr(err))
							continue
						}
						require.Equal(t, p.NATSSubject(), m.Subject)
						require.Equal(t, string(e.Data()), string(m.Data))
						got, err := binding.FromNATS(m.Header, m.Data)
						require.NoError(t, err)
						assertSameEvent(t, e, got)
						b.WriteString(describeHeader(m.Header))
					}
				}
			}
		}
	}
	golden(t, "wire/newmsg.golden", []byte(b.String()))
}
