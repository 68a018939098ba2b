package link_test

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/services/auditor/auditortest"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// messages returns the auditortest mix and variations of it: other data,
// headers and stream positions, valid and not.
func messages(t testing.TB) map[string]*link.Message {
	t.Helper()
	out := map[string]*link.Message{}
	hosts := []string{"web-01.example.com", "db 02", "ünïcode\"host\\"}
	for i := range 64 {
		m := auditortest.Msg(t, auditortest.Payload(t, hosts, i), i)
		out[fmt.Sprintf("payload %d", i)] = auditortest.Message(t, auditortest.StreamOf(m.Subject), uint64(i+1), m)
	}
	for i := range 8 {
		m := auditortest.SignedMsg(t, auditortest.Payload(t, hosts, i), i, auditortest.Key, uint64(i+1))
		out[fmt.Sprintf("signed payload %d", i)] = auditortest.Message(t, auditortest.StreamOf(m.Subject), uint64(i+1), m)
	}
	base := func() *link.Message {
		m := auditortest.Msg(t, auditortest.Payload(t, hosts, 0), 0)
		msg := auditortest.Message(t, auditortest.StreamOf(m.Subject), 7, m)
		msg.Header = maps.Clone(msg.Header)
		return msg
	}
	withData := func(name, data string) {
		m := base()
		m.Data = []byte(data)
		out["data "+name] = m
	}
	withData("reordered", ` {"target": {"identifier": "x", "kind": "k", "extra": [1, {"b": 2, "a": 1}]},
		"status": "drift", "host": "h"} `)
	withData("escaped fields", `{"h\u006fst":"a\"b\\c\n\u0001é😀","status":"\u00e9","target":{"kind":"\t","identifier":"\u0000"}}`)
	withData("long escaped target", `{"target":{"kind":"`+strings.Repeat(`\n`, 200)+`","identifier":"`+strings.Repeat("i", 300)+`"}}`)
	withData("target not an object", `{"host":1,"status":null,"target":"systemd.unit:x"}`)
	withData("target empty", `{"host":"","target":{}}`)
	withData("target with non-string fields", `{"target":{"kind":["k"],"identifier":{"id":"i"},"x":"y"}}`)
	withData("target nested members", `{"target":{"a":{"kind":"no"},"kind":"yes","z":[{"identifier":"no"}],"identifier":"id"}}`)
	withData("no fields", `{"other":{"host":"nested"}}`)
	withData("array", `[{"host":"h"}]`)
	withData("string", `"host"`)
	withData("number", `-0.0`)
	withData("empty object", `{}`)
	withData("floats", `{"a":[1.5e300,1e-7,0.1,-0,1E2],"host":"h"}`)
	withData("unsafe integer", `{"host":"h","n":9007199254740992}`)
	withData("float overflow", `{"host":"h","n":1e400}`)
	withData("duplicate key", `{"host":"a","host":"b"}`)
	withData("nested duplicate key", `{"target":{"kind":"a","kind":"b"}}`)
	withData("not JSON", `not json`)
	withData("trailing data", `{"host":"h"} {}`)
	withData("invalid UTF-8", "{\"host\":\"\xff\"}")
	withData("lone surrogate", `{"host":"\ud800"}`)
	withData("too deep", strings.Repeat("[", 200)+strings.Repeat("]", 200))
	withData("empty", ``)
	withData("oversized", `{"pad":"`+strings.Repeat("x", events.MaxDataSize)+`"}`)

	withHeader := func(name string, edit func(h nats.Header)) {
		m := base()
		edit(m.Header)
		out["header "+name] = m
	}
	withHeader("traceparent", func(h nats.Header) {
		h.Set("ce-traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		h.Set("ce-tracestate", "rojo=00f067aa0ba902b7")
	})
	withHeader("upper case", func(h nats.Header) {
		v := h.Get("ce-id")
		delete(h, "ce-id")
		h["CE-ID"] = []string{v}
	})
	withHeader("time with offset", func(h nats.Header) { h.Set("ce-time", "2026-10-06T05:09:41.5+02:00") })
	withHeader("encoded subject", func(h nats.Header) { h.Set("ce-subject", "a%22b%5Cc%C3%A9") })
	withHeader("missing id", func(h nats.Header) { h.Del("ce-id") })
	withHeader("wrong specversion", func(h nats.Header) { h.Set("ce-specversion", "0.3") })
	withHeader("twice", func(h nats.Header) { h.Add("ce-type", events.TypeVerdictPass) })
	withHeader("structured", func(h nats.Header) { h.Set("content-type", "application/cloudevents+json") })
	withHeader("bad time", func(h nats.Header) { h.Set("ce-time", "yesterday") })
	withHeader("oversized", func(h nats.Header) { h.Set("x-pad", strings.Repeat("x", events.MaxHeaderSize)) })

	withPosition := func(name string, edit func(m *link.Message)) {
		m := base()
		edit(m)
		out["position "+name] = m
	}
	withPosition("largest safe seq", func(m *link.Message) { m.Seq = canonjson.MaxSafeInteger })
	withPosition("unsafe seq", func(m *link.Message) { m.Seq = canonjson.MaxSafeInteger + 1 })
	withPosition("unsafe seq, malformed", func(m *link.Message) { m.Seq, m.Data = 1<<60, []byte("x") })
	withPosition("zero time", func(m *link.Message) { m.Stored = time.Time{} })
	withPosition("local time", func(m *link.Message) { m.Stored = m.Stored.In(time.FixedZone("X", -7*3600)) })
	withPosition("monotonic time", func(m *link.Message) { m.Stored = time.Now() })
	withPosition("year 10000", func(m *link.Message) { m.Stored = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) })
	withPosition("year -1", func(m *link.Message) { m.Stored = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) })
	withPosition("escaped stream and subject", func(m *link.Message) { m.Stream, m.Subject = "S\"\n", "rt.verdict.x\\y.pass" })
	withPosition("no consumer", func(m *link.Message) { m.Consumer, m.Deliveries, m.Data = "", 0, []byte("{") })

	signed := auditortest.SignedMsg(t, auditortest.Payload(t, hosts, 5), 5, auditortest.Key, 6)
	out["signed, other data"] = auditortest.Message(t, "EVIDENCE", 11, auditortest.HeadersOn(signed, []byte(`{"host":"web-01.example.com"}`)))
	forged := auditortest.HeadersOn(signed, signed.Data)
	forged.Header.Set("ce-source", "/collector/elsewhere")
	out["signed, source changed"] = auditortest.Message(t, "EVIDENCE", 12, forged)
	forged = auditortest.HeadersOn(signed, signed.Data)
	forged.Header.Set("ce-"+dsse.ExtSignature, `{"payload":"e30=","payloadType":"x","signatures":[]}`)
	out["signed, damaged envelope"] = auditortest.Message(t, "EVIDENCE", 13, forged)
	forged = auditortest.HeadersOn(signed, signed.Data)
	forged.Subject = events.EvidenceSubject("db 02", "systemd.unit")
	out["signed, another host's subject"] = auditortest.Message(t, "EVIDENCE", 14, forged)
	out["malformed"] = auditortest.Message(t, "EVIDENCE", 9, auditortest.Malformed("web-01.example.com", 9))
	dl := auditortest.Msg(t, auditortest.DeadLetter(3), 3)
	out["dead letter"] = auditortest.Message(t, "DLQ", 10, dl)
	return out
}

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestPrepareGolden pins what Prepare makes of every message of the mix:
// the chain, the event's canonical bytes and its meta, and the link a
// seal of it makes. The golden file was first written while a second
// encoder (writing accepted events from the message's bytes) was held
// equal to this one, so it pins what both wrote.
func TestPrepareGolden(t *testing.T) {
	msgs := messages(t)
	names := slices.Sorted(maps.Keys(msgs))
	source := events.Source("auditor", "test")
	h := chain.NewHasher(nil)
	var b strings.Builder
	for _, name := range names {
		if strings.Contains(name, "monotonic") {
			continue // its time is now
		}
		p := link.Prepare(msgs[name], source, false)
		rec := p.Seal(h, link.Head{})
		fmt.Fprintf(&b, "%s\n  chain %q\n  event %s\n  meta %+v\n  hash %s\n", name, p.Chain, p.Bytes, p.Meta, rec.Hash)
	}
	path := filepath.Join("testdata", "prepare.golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), b.String())
}

// FuzzPrepare: any data around a valid envelope makes an event whose
// bytes are its canonical form, with the meta MetaOf reads of it.
func FuzzPrepare(f *testing.F) {
	msgs := messages(f)
	for _, m := range msgs {
		if len(m.Data) < 4096 {
			f.Add(m.Data)
		}
	}
	base := msgs["payload 0"]
	f.Fuzz(func(t *testing.T, data []byte) {
		m := *base
		m.Data = data
		p := link.Prepare(&m, events.Source("auditor", "test"), false)
		v, err := jsontree.Parse(p.Bytes)
		require.NoError(t, err)
		canon, err := canonjson.Append(nil, v)
		require.NoError(t, err)
		require.Equal(t, string(p.Bytes), string(canon))
		meta, err := link.MetaOf(v)
		require.NoError(t, err)
		require.Equal(t, p.Meta, meta)
	})
}

// hostOfSplit is HostOf as it was written first, over strings.Split.
func hostOfSplit(subject string) string {
	tokens := strings.Split(subject, ".")
	i := 2
	if len(tokens) > 1 && tokens[1] == "collect" {
		i = 3
	}
	if len(tokens) <= i || tokens[i] == "" {
		return "="
	}
	tok := tokens[i]
	host, err := events.ParseToken(tok)
	if err != nil || host == "" || strings.IndexFunc(host, unicode.IsControl) >= 0 {
		return tok
	}
	return host
}

// FuzzHostOf holds HostOf equal to its first, strings.Split version.
func FuzzHostOf(f *testing.F) {
	for _, s := range []string{
		events.EvidenceSubject("web-01.example.com", "git.repository"), events.IntegritySubject("a b"),
		events.CollectFailedSubject("h"), events.VerdictSubject("h.example", events.StatusDrift),
		"rt.collect", "rt.collect.failed", "rt.collect.failed.", "rt.evidence.bad=ZZ.x", "rt.evidence.a=0A",
		"rt.evidence.==x", "rt.evidence.=", "rt.evidence..x", "", ".", "..", "...", "rt", "rt.evidence",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, subject string) {
		if got, want := link.HostOf(subject), hostOfSplit(subject); got != want {
			t.Fatalf("HostOf(%q) = %q, want %q", subject, got, want)
		}
	})
}

func TestPreparedSealTwice(t *testing.T) {
	m := messages(t)["payload 0"]
	h := chain.NewHasher(nil)
	p := link.Prepare(m, "/auditor/t", false)
	first := p.Seal(h, link.Head{})
	line := string(first.Line)
	second := p.Seal(h, first.Head())
	assert.Equal(t, line, string(first.Line), "the second seal must not write over the first")
	assert.Equal(t, string(p.Bytes), string(second.Event))
	for _, r := range []struct {
		rec  link.Record
		head link.Head
	}{{first, link.Head{}}, {second, first.Head()}} {
		want, err := link.Seal(h, r.rec.Chain, r.head, link.Entry(m, "/auditor/t"))
		require.NoError(t, err)
		assert.Equal(t, string(want.Line), string(r.rec.Line))
		assert.Equal(t, string(want.Event), string(r.rec.Event))
		assert.Equal(t, want.Hash, r.rec.Hash)
	}
}
