package events_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

// driftMsg is the encoded drift verdict fixture, with trace context.
func driftMsg(t *testing.T) (*nats.Msg, event.Event, events.Verdict) {
	t.Helper()
	p := fixtures(t)["verdict.drift.v2.golden.json"].(events.Verdict)
	m, e, err := binding.NewMsg(fixtureSource, p, binding.WithID(fixtureID), binding.WithTime(fixtureTime),
		binding.WithTraceContext(fixtureTraceparent, "rt=1,vendor=x"))
	require.NoError(t, err)
	return m, e, p
}

func cloneHeader(h nats.Header) nats.Header {
	out := make(nats.Header, len(h))
	for k, v := range h {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// fromNATSWith is FromNATS of m with its header key set to values.
func fromNATSWith(m *nats.Msg, key string, values ...string) (event.Event, error) {
	h := cloneHeader(m.Header)
	h[key] = values
	return binding.FromNATS(h, m.Data)
}

// assertSameEvent compares every attribute and the data.
func assertSameEvent(t *testing.T, want, got event.Event) {
	t.Helper()
	assert.Equal(t, want.SpecVersion(), got.SpecVersion())
	assert.Equal(t, want.ID(), got.ID())
	assert.Equal(t, want.Source(), got.Source())
	assert.Equal(t, want.Type(), got.Type())
	assert.Equal(t, want.Subject(), got.Subject())
	assert.True(t, want.Time().Equal(got.Time()), "time %s != %s", want.Time(), got.Time())
	assert.Equal(t, want.DataContentType(), got.DataContentType())
	assert.Equal(t, want.DataSchema(), got.DataSchema())
	assert.Equal(t, want.Extensions(), got.Extensions())
	assert.Equal(t, string(want.Data()), string(got.Data()))
}

func requireReason(t *testing.T, err error, reason events.Reason, field string) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, events.ErrInvalid)
	ie, ok := errors.AsType[*events.Error](err)
	require.True(t, ok, "%v is not an *events.Error", err)
	assert.Equal(t, reason, ie.Reason, "%v", err)
	if field != "" {
		assert.Equal(t, field, ie.Field, "%v", err)
	}
	assert.Equal(t, reason, events.ReasonOf(err))
}

func TestAttributesRoundTrip(t *testing.T) {
	for name, p := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			m, e, err := binding.NewMsg(fixtureSource, p, binding.WithTraceContext(fixtureTraceparent, ""))
			require.NoError(t, err)
			assert.Equal(t, p.NATSSubject(), m.Subject)
			assert.Equal(t, e.ID(), m.Header.Get(binding.HeaderMsgID), "the id is the Nats-Msg-Id")
			assert.Empty(t, m.Header.Get("Content-Type"), "binary mode sets no Content-Type")

			got, err := binding.FromNATS(m.Header, m.Data)
			require.NoError(t, err)
			assertSameEvent(t, e, got)

			decoded, err := binding.Decode[events.Payload](got)
			require.NoError(t, err)
			assert.Equal(t, indent(t, p), indent(t, decoded))

			again, err := binding.ToNATS(m.Subject, got)
			require.NoError(t, err)
			assert.Equal(t, m.Header, again.Header, "re-encoding a decoded event gives the same headers")
		})
	}
}

func TestNewDefaults(t *testing.T) {
	p := fixtures(t)["collection.failed.v1.golden.json"]
	before := time.Now()
	e, err := binding.New(fixtureSource, p)
	require.NoError(t, err)
	assert.Len(t, e.ID(), 36)
	assert.Equal(t, byte('7'), e.ID()[14], "a UUIDv7")
	assert.False(t, e.Time().Before(before.Add(-time.Second)))
	assert.Equal(t, events.TypeCollectionFailed, e.Type())
	assert.Equal(t, "codex", e.Subject())
	assert.Equal(t, events.ContentType, e.DataContentType())
	assert.Empty(t, e.Extensions())
	e2, err := binding.New(fixtureSource, p)
	require.NoError(t, err)
	assert.Less(t, e.ID(), e2.ID(), "UUIDv7 ids sort by creation")
}

func TestPercentEncoding(t *testing.T) {
	p := fixtures(t)["collection.failed.v1.golden.json"].(events.CollectionFailed)
	p.Collector = "Euro € 😀" // the binding's example
	m, e, err := binding.NewMsg(fixtureSource, p)
	require.NoError(t, err)
	assert.Equal(t, "Euro%20%E2%82%AC%20%F0%9F%98%80", m.Header.Get("ce-subject"))
	got, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(t, err)
	assert.Equal(t, e.Subject(), got.Subject())

	p.Collector = `100% "quoted"`
	m, _, err = binding.NewMsg(fixtureSource, p)
	require.NoError(t, err)
	assert.Equal(t, "100%25%20%22quoted%22", m.Header.Get("ce-subject"))
}

func TestHeaderValueDecoding(t *testing.T) {
	m, _, _ := driftMsg(t)
	const subject = "systemd.unit:agent worker.service"
	accepted := map[string]string{
		"canonical":                "systemd.unit:agent%20worker.service",
		"lower-case hex":           "systemd.unit:agent%20worker%2eservice",
		"unnecessarily encoded":    "%73ystemd.unit:agent%20worker.service",
		"surrounding whitespace":   "  systemd.unit:agent%20worker.service\t",
		"double-quoted (old form)": `"systemd.unit:agent worker.service"`,
		"quoted with escapes":      `"systemd.unit:agent\ worker.service"`,
		"raw space":                "systemd.unit:agent worker.service",
	}
	for name, v := range accepted {
		t.Run(name, func(t *testing.T) {
			e, err := fromNATSWith(m, "ce-subject", v)
			require.NoError(t, err)
			assert.Equal(t, subject, e.Subject())
		})
	}
	rejected := map[string]string{
		"lone percent":        "systemd.unit:agent%",
		"short escape":        "systemd.unit:agent%2",
		"bad hex":             "systemd.unit:agent%ZZ",
		"overlong UTF-8":      "systemd.unit:agent%C0%A0x",
		"invalid UTF-8":       "systemd.unit:agent%FF",
		"raw non-ASCII":       "systemd.unit:agent café",
		"raw control":         "systemd.unit:agent\x01",
		"encoded control":     "systemd.unit:agent%01",
		"unterminated quote":  `"systemd.unit`,
		"quote inside quotes": `"a"b"`,
		"trailing backslash":  `"a\"`,
		"empty":               "",
		"percent-encoded C1":  "agent%C2%85",
	}
	for name, v := range rejected {
		t.Run(name, func(t *testing.T) {
			_, err := fromNATSWith(m, "ce-subject", v)
			if v == "" {
				requireReason(t, err, events.ReasonMissingAttribute, "subject")
				return
			}
			requireReason(t, err, events.ReasonInvalidAttribute, "")
		})
	}
}

func TestHeaderNamesAreCaseInsensitive(t *testing.T) {
	m, e, _ := driftMsg(t)
	h := nats.Header{}
	for k, v := range m.Header {
		h[strings.ToUpper(k)] = v
	}
	got, err := binding.FromNATS(h, m.Data)
	require.NoError(t, err)
	assertSameEvent(t, e, got)

	h = cloneHeader(m.Header)
	h["Ce-Id"] = []string{"other"}
	_, err = binding.FromNATS(h, m.Data)
	requireReason(t, err, events.ReasonInvalidAttribute, "")

	h = cloneHeader(m.Header)
	h["ce-type"] = append(h["ce-type"], events.TypeVerdictPass)
	_, err = binding.FromNATS(h, m.Data)
	requireReason(t, err, events.ReasonInvalidAttribute, "ce-type")
}

func TestMissingRequiredAttributes(t *testing.T) {
	m, _, _ := driftMsg(t)
	for _, name := range []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema"} {
		t.Run(name, func(t *testing.T) {
			h := cloneHeader(m.Header)
			delete(h, "ce-"+name)
			if name == "id" {
				delete(h, binding.HeaderMsgID)
			}
			_, err := binding.FromNATS(h, m.Data)
			requireReason(t, err, events.ReasonMissingAttribute, name)
		})
	}
	t.Run("data", func(t *testing.T) {
		_, err := binding.FromNATS(m.Header, nil)
		requireReason(t, err, events.ReasonMissingAttribute, "data")
	})
	t.Run("Nats-Msg-Id is optional", func(t *testing.T) {
		h := cloneHeader(m.Header)
		delete(h, binding.HeaderMsgID)
		_, err := binding.FromNATS(h, m.Data)
		require.NoError(t, err)
	})
}

func TestWrongSpecVersion(t *testing.T) {
	m, _, _ := driftMsg(t)
	for _, v := range []string{"0.3", "1.1", "1", "1.0.0", "%31.0x"} {
		_, err := fromNATSWith(m, "ce-specversion", v)
		requireReason(t, err, events.ReasonSpecVersion, "specversion")
	}
	e03 := event.New(event.CloudEventsVersionV03)
	_, err := binding.ToNATS("rt.x", e03)
	requireReason(t, err, events.ReasonSpecVersion, "specversion")
}

func TestUnknownType(t *testing.T) {
	m, _, _ := driftMsg(t)
	for _, typ := range []string{
		events.TypePrefix + "verdict.drift.v3",
		events.TypePrefix + "verdict.drift",
		"com.example.other.v1",
	} {
		_, err := fromNATSWith(m, "ce-type", typ)
		requireReason(t, err, events.ReasonUnknownType, "type")
	}
}

func TestExtensions(t *testing.T) {
	m, e, _ := driftMsg(t)
	got, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"traceparent": fixtureTraceparent, "tracestate": "rt=1,vendor=x"}, got.Extensions())
	c := binding.TraceCarrier(&got)
	assert.Equal(t, fixtureTraceparent, c.Get("traceparent"))
	assert.Equal(t, "rt=1,vendor=x", c.Get("TraceState"))
	assert.Equal(t, []string{"traceparent", "tracestate"}, c.Keys())
	assert.Empty(t, c.Get("baggage"))

	t.Run("carrier injects", func(t *testing.T) {
		e2 := e.Clone()
		c := binding.TraceCarrier(&e2)
		c.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")
		c.Set("baggage", "ignored")
		m2, err := binding.ToNATS(m.Subject, e2)
		require.NoError(t, err)
		assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", m2.Header.Get("ce-traceparent"))
		assert.NotContains(t, m2.Header, "ce-baggage")
	})
	t.Run("unknown extension header", func(t *testing.T) {
		_, err := fromNATSWith(m, "ce-partitionkey", "a")
		requireReason(t, err, events.ReasonUnknownExtension, "partitionkey")
	})
	t.Run("unknown extension on the event", func(t *testing.T) {
		e2 := e.Clone()
		e2.SetExtension("comexampleextension1", "value")
		_, err := binding.ToNATS(m.Subject, e2)
		requireReason(t, err, events.ReasonUnknownExtension, "comexampleextension1")
	})
	t.Run("non-string extension", func(t *testing.T) {
		e2 := e.Clone()
		e2.SetExtension("traceparent", int32(7))
		_, err := binding.ToNATS(m.Subject, e2)
		requireReason(t, err, events.ReasonInvalidAttribute, "traceparent")
	})
	t.Run("headers without the prefix are ignored", func(t *testing.T) {
		h := cloneHeader(m.Header)
		h["Nats-Expected-Stream"] = []string{"EVIDENCE"}
		h["X-Other"] = []string{"anything at all"}
		_, err := binding.FromNATS(h, m.Data)
		require.NoError(t, err)
	})
}

func TestTraceparent(t *testing.T) {
	m, _, _ := driftMsg(t)
	p := fixtures(t)["verdict.drift.v2.golden.json"]
	bad := map[string]string{
		"upper-case hex":   "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"zero trace id":    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"zero parent id":   "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"other version":    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"short":            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
		"trailing garbage": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
	}
	for name, v := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := fromNATSWith(m, "ce-traceparent", v)
			requireReason(t, err, events.ReasonInvalidAttribute, "traceparent")
			_, err = binding.New(fixtureSource, p, binding.WithTraceContext(v, ""))
			requireReason(t, err, events.ReasonInvalidAttribute, "traceparent")
		})
	}
	t.Run("tracestate without traceparent", func(t *testing.T) {
		h := cloneHeader(m.Header)
		delete(h, "ce-traceparent")
		_, err := binding.FromNATS(h, m.Data)
		requireReason(t, err, events.ReasonInvalidAttribute, "tracestate")
	})
	t.Run("tracestate too long", func(t *testing.T) {
		_, err := binding.New(fixtureSource, p, binding.WithTraceContext(fixtureTraceparent, strings.Repeat("a", 513)))
		requireReason(t, err, events.ReasonInvalidAttribute, "tracestate")
	})
}

func TestAttributeValues(t *testing.T) {
	m, _, _ := driftMsg(t)
	cases := []struct {
		name, header, value string
		reason              events.Reason
	}{
		{"id with space", "ce-id", "a%20b", events.ReasonInvalidAttribute},
		{"id too long", "ce-id", strings.Repeat("x", events.MaxIDLength+1), events.ReasonInvalidAttribute},
		{"id non-ASCII", "ce-id", "caf%C3%A9", events.ReasonInvalidAttribute},
		{"source not a URI reference", "ce-source", "%25zz", events.ReasonInvalidAttribute},
		{"source not in normal form", "ce-source", "/collector/web%2001", events.ReasonInvalidAttribute},
		{"time not RFC 3339", "ce-time", "2026-10-06 03:09:41", events.ReasonInvalidAttribute},
		{"time without zone", "ce-time", "2026-10-06T03:09:41", events.ReasonInvalidAttribute},
		{"other content type", "ce-datacontenttype", "text/plain", events.ReasonInvalidAttribute},
		{"content type with parameters", "ce-datacontenttype", "application/json;%20charset=utf-8", events.ReasonInvalidAttribute},
		{"other dataschema", "ce-dataschema", "https://runtimetruth.dev/schemas/events/verdict/v1.json", events.ReasonInvalidAttribute},
		{"dataschema not absolute", "ce-dataschema", "verdict.json", events.ReasonInvalidAttribute},
		{"Nats-Msg-Id differs from id", binding.HeaderMsgID, "other", events.ReasonInvalidAttribute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := cloneHeader(m.Header)
			h[tc.header] = []string{tc.value}
			if tc.header == "ce-id" {
				delete(h, binding.HeaderMsgID)
			}
			_, err := binding.FromNATS(h, m.Data)
			requireReason(t, err, tc.reason, "")
		})
	}
	t.Run("time with an offset is accepted and re-encoded in UTC", func(t *testing.T) {
		e, err := fromNATSWith(m, "ce-time", "2026-10-06T05:09:41.123456+02:00")
		require.NoError(t, err)
		assert.True(t, fixtureTime.Equal(e.Time()))
		m2, err := binding.ToNATS(m.Subject, e)
		require.NoError(t, err)
		assert.Equal(t, m.Header.Get("ce-time"), m2.Header.Get("ce-time"))
	})
}

func TestStructuredModeIsRejected(t *testing.T) {
	m, _, _ := driftMsg(t)
	for _, ct := range []string{"application/cloudevents+json", "Application/CloudEvents-Batch+JSON", "application/cloudevents"} {
		_, err := fromNATSWith(m, "Content-Type", ct)
		requireReason(t, err, events.ReasonContentMode, "Content-Type")
	}
}

func TestOversized(t *testing.T) {
	m, e, _ := driftMsg(t)
	t.Run("data at the limit passes the envelope checks", func(t *testing.T) {
		data := make([]byte, events.MaxDataSize)
		got, err := binding.FromNATS(m.Header, data)
		require.NoError(t, err)
		m2, err := binding.ToNATS(m.Subject, got)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(m2.Data)+headerBlockSize(m2.Header), events.MaxEventSize)
		_, err = binding.Decode[events.Payload](got)
		requireReason(t, err, events.ReasonMalformedJSON, "data")
	})
	t.Run("data over the limit", func(t *testing.T) {
		data := make([]byte, events.MaxDataSize+1)
		_, err := binding.FromNATS(m.Header, data)
		requireReason(t, err, events.ReasonTooLarge, "data")
		big := e.Clone()
		big.DataEncoded = data
		_, err = binding.ToNATS(m.Subject, big)
		requireReason(t, err, events.ReasonTooLarge, "data")
		_, err = binding.Decode[events.Verdict](big)
		requireReason(t, err, events.ReasonTooLarge, "data")
	})
	t.Run("headers over the limit", func(t *testing.T) {
		_, err := fromNATSWith(m, "X-Padding", strings.Repeat("x", events.MaxHeaderSize))
		requireReason(t, err, events.ReasonTooLarge, "headers")
		big := e.Clone()
		big.SetSubject(strings.Repeat("s", events.MaxHeaderSize))
		_, err = binding.ToNATS(m.Subject, big)
		requireReason(t, err, events.ReasonTooLarge, "headers")
	})
	t.Run("payload over the limit", func(t *testing.T) {
		p := fixtures(t)["attestation.created.v1.golden.json"].(events.AttestationCreated)
		p.Bundle = json.RawMessage(`{"pad":"` + strings.Repeat("x", events.MaxDataSize) + `"}`)
		var err error
		p.BundleDigest, err = events.BundleDigest(p.Bundle)
		require.NoError(t, err)
		_, err = binding.New(fixtureSource, p)
		requireReason(t, err, events.ReasonTooLarge, "data")
	})
}

func headerBlockSize(h nats.Header) int {
	n := len("NATS/1.0\r\n") + 2
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n
}

func TestPayloadIsStrict(t *testing.T) {
	fx := fixtures(t)
	drift := string(indent(t, fx["verdict.drift.v2.golden.json"]))
	driftV1, err := os.ReadFile(filepath.Join("testdata", "verdict.drift.v1.golden.json"))
	require.NoError(t, err)
	require.Contains(t, drift, `"after": {
              "present": false
            },
            `)
	ev := fx["evidence.collected.v1.golden.json"].(events.EvidenceCollected)
	cases := []struct {
		name, typ, subject, data string
		reason                   events.Reason
		field                    string
	}{
		{"unknown field", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, `"status": "drift",`, `"status": "drift", "extra": 1,`, 1), events.ReasonSchema, ""},
		{"unknown field in the report", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, `"protected": [],`, `"protected": [], "identity": {"verified": true, "certificate_identity": "a", "oidc_issuer": "b"},`, 1), events.ReasonSchema, ""},
		{"duplicate key", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, `"status": "drift",`, `"status": "drift", "status": "drift",`, 1), events.ReasonDuplicateKey, "data"},
		{"duplicate key in the report", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, `"protected": [],`, `"protected": [], "protected": [],`, 1), events.ReasonDuplicateKey, "data"},
		{"malformed JSON", events.TypeVerdictDrift, "systemd.unit:agent worker.service", drift[:len(drift)-3], events.ReasonMalformedJSON, "data"},
		{"trailing data", events.TypeVerdictDrift, "systemd.unit:agent worker.service", drift + "{}", events.ReasonMalformedJSON, "data"},
		{"invalid UTF-8", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, "web-01", "web-\xff", 1), events.ReasonMalformedJSON, "data"},
		{"not an object", events.TypeVerdictDrift, "x", `[1,2]`, events.ReasonSchema, "/"},
		{"missing field", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, `"host": "web-01.example.com",`, ``, 1), events.ReasonSchema, ""},
		{"wrong field type", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, `"host": "web-01.example.com"`, `"host": 7`, 1), events.ReasonSchema, "/host"},
		{"v1 report in a v2 verdict", events.TypeVerdictDrift, "systemd.unit:agent worker.service", string(driftV1), events.ReasonSchema, ""},
		{"v2 report in a v1 verdict", events.TypeVerdictDriftV1, "systemd.unit:agent worker.service", drift, events.ReasonSchema, ""},
		{"missing side left out", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, `"after": {
              "present": false
            },
            `, ``, 1), events.ReasonSchema, ""},
		{"report status differs", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, `"status": "drift",`, `"status": "pass",`, 1), events.ReasonSchema, ""},
		{"verdict status differs from the type", events.TypeVerdictError, "systemd.unit:agent worker.service", drift, events.ReasonInvalidPayload, "type"},
		{"subject differs from the payload", events.TypeVerdictDrift, "systemd.unit:other", drift, events.ReasonSubjectMismatch, "subject"},
		{"report target differs", events.TypeVerdictDrift, "systemd.unit:agent worker.service",
			strings.Replace(drift, `"identifier": "agent worker.service",
      "kind"`, `"identifier": "other",
      "kind"`, 1), events.ReasonInvalidPayload, "/report/target"},
		{"evidence digest differs from the snapshot", events.TypeEvidenceCollected, ev.Subject(),
			strings.Replace(string(indent(t, ev)), ev.Digest, digestA, 1), events.ReasonInvalidPayload, "/digest"},
		{"evidence target differs from the snapshot", events.TypeEvidenceCollected, "systemd.unit:other",
			strings.Replace(string(indent(t, ev)), `"identifier": "agent worker.service"`, `"identifier": "other"`, 1), events.ReasonInvalidPayload, "/target"},
		{"snapshot with a float", events.TypeEvidenceCollected, ev.Subject(),
			strings.Replace(string(indent(t, ev)), `"main_pid": 3036`, `"main_pid": 3036.5`, 1), events.ReasonSchema, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := rawEvent(t, tc.typ, tc.subject, []byte(tc.data))
			_, err := binding.Decode[events.Payload](e)
			requireReason(t, err, tc.reason, tc.field)
		})
	}
}

func TestDecodeWrongPayloadType(t *testing.T) {
	_, e, _ := driftMsg(t)
	_, err := binding.Decode[events.EvidenceCollected](e)
	requireReason(t, err, events.ReasonUnexpectedType, "type")
	_, err = binding.Decode[Verdict](e) // a type of the same name is not the catalog's
	requireReason(t, err, events.ReasonUnexpectedType, "type")
	v, err := binding.Decode[events.Verdict](e)
	require.NoError(t, err)
	assert.Equal(t, events.StatusDrift, v.Status)
}

// Verdict is a payload type named as the catalog's, which is not it.
type Verdict struct{ events.Verdict }

func TestNewRejectsBadPayloads(t *testing.T) {
	fx := fixtures(t)
	v := fx["verdict.drift.v2.golden.json"].(events.Verdict)
	_, err := binding.New(fixtureSource, &v)
	requireReason(t, err, events.ReasonUnexpectedType, "data")
	// Another type of the same name and methods is not the catalog's.
	_, err = binding.New(fixtureSource, Verdict{v})
	requireReason(t, err, events.ReasonUnexpectedType, "data")
	_, err = binding.New(fixtureSource, nil)
	requireReason(t, err, events.ReasonInvalidPayload, "data")

	bad := v
	bad.Status = "unknown"
	_, err = binding.New(fixtureSource, bad)
	requireReason(t, err, events.ReasonUnknownType, "type")

	bad = v
	bad.Report = nil
	_, err = binding.New(fixtureSource, bad)
	requireReason(t, err, events.ReasonSchema, "/report") // as Decode reports it

	_, err = binding.New("", v)
	requireReason(t, err, events.ReasonMissingAttribute, "source")
	_, err = binding.New(fixtureSource, v, binding.WithID("has space"))
	requireReason(t, err, events.ReasonInvalidAttribute, "id")

	rm := fx["runnable.modified.v1.golden.json"].(events.RunnableModified)
	rm.ChangedFiles = append(rm.ChangedFiles, rm.ChangedFiles[0])
	_, err = binding.New(fixtureSource, rm)
	requireReason(t, err, events.ReasonInvalidPayload, "/changed_files/2/path")
}

func TestZeroValuesDoNotPanic(t *testing.T) {
	var e event.Event
	_, err := binding.ToNATS("rt.x", e)
	requireReason(t, err, events.ReasonMissingAttribute, "specversion")
	_, err = binding.Decode[events.Verdict](e)
	assert.ErrorIs(t, err, events.ErrInvalid)
	_, err = binding.Decode[events.Payload](e)
	assert.ErrorIs(t, err, events.ErrInvalid)
	_, err = binding.FromNATS(nil, nil)
	requireReason(t, err, events.ReasonMissingAttribute, "specversion")
	_, err = binding.ToNATS("rt.>", e)
	assert.ErrorIs(t, err, events.ErrInvalid)
}

func TestReadChecksTheNATSSubject(t *testing.T) {
	m, _, want := driftMsg(t)
	_, got, err := binding.Read[events.Verdict](natsMsg{m})
	require.NoError(t, err)
	assert.Equal(t, want.Host, got.Host)

	moved := natsMsg{&nats.Msg{Subject: "rt.verdict.other.drift", Header: m.Header, Data: m.Data}}
	_, _, err = binding.Read[events.Verdict](moved)
	requireReason(t, err, events.ReasonSubjectMismatch, "nats subject")
	_, _, err = binding.Read[events.Payload](moved)
	requireReason(t, err, events.ReasonSubjectMismatch, "nats subject")
	_, p, err := binding.Read[events.Payload](natsMsg{m})
	require.NoError(t, err)
	assert.IsType(t, events.Verdict{}, p)
}

// natsMsg adapts *nats.Msg to events.Msg.
type natsMsg struct{ m *nats.Msg }

func (n natsMsg) Subject() string      { return n.m.Subject }
func (n natsMsg) Headers() nats.Header { return n.m.Header }
func (n natsMsg) Data() []byte         { return n.m.Data }

func TestErrorText(t *testing.T) {
	m, _, _ := driftMsg(t)
	h := cloneHeader(m.Header)
	delete(h, "ce-source")
	_, err := binding.FromNATS(h, m.Data)
	assert.EqualError(t, err, "invalid event: source: no ce-source header (missing_attribute)")
	assert.Empty(t, events.ReasonOf(errors.New("other")))
}

func TestHostKeyChangedRules(t *testing.T) {
	good := fixtures(t)["host.key.changed.v1.golden.json"].(events.HostKeyChanged)
	require.NoError(t, good.Validate())
	cases := []struct {
		name   string
		change func(p *events.HostKeyChanged)
		reason events.Reason
		field  string
	}{
		{"no keys", func(p *events.HostKeyChanged) { p.Keys = nil }, events.ReasonSchema, "/keys"},
		{"not a key id", func(p *events.HostKeyChanged) { p.Keys[0].Key = "ed25519:short=" }, events.ReasonSchema, "/keys/0/key"},
		{"another algorithm", func(p *events.HostKeyChanged) {
			p.Keys[0].Key = strings.Replace(p.Keys[0].Key, "ed25519:", "ed448:", 1)
		}, events.ReasonSchema, "/keys/0/key"},
		{"unknown state", func(p *events.HostKeyChanged) { p.Keys[1].State = "trusted" }, events.ReasonSchema, "/keys/1/state"},
		{"unchanged", func(p *events.HostKeyChanged) { p.Keys[1].Previous = p.Keys[1].State }, events.ReasonInvalidPayload, "/keys/1/previous"},
		{"no actor", func(p *events.HostKeyChanged) { p.Actor = "" }, events.ReasonSchema, "/actor"},
		{"control character in host", func(p *events.HostKeyChanged) { p.Host = "web\n01" }, events.ReasonSchema, "/host"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := good
			p.Keys = slices.Clone(good.Keys)
			tc.change(&p)
			_, err := binding.New(fixtureSource, p)
			requireReason(t, err, tc.reason, tc.field)
		})
	}
}
