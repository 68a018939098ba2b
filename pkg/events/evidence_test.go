package events_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/canonjson"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// The decoder (Decode's, Read's, ReadEvidence's: decodeStrict, then
// Validate) reads the data without running the JSON Schema, which stays
// the specification. These tests hold it to the schema, differentially:
// over each type's golden example, every mutation below and fuzzed data,
// what the compiled JSON Schema refuses the decoder refuses for the same
// reason, and what it accepts re-encodes to data the schema takes and
// that decodes to the same payload.

// evidenceDocs returns the golden evidence.collected data and mutations of
// it: every value replaced by values of every JSON type at and around the
// schema's limits, every member removed, an unknown member added to every
// object; each mutation also with its digest recomputed, so that the
// snapshot rules are reached.
func evidenceDocs(tb testing.TB) [][]byte {
	tb.Helper()
	raw, docs := mutations(tb, "evidence.collected.v1.golden.json", fixDigest)
	add := func(doc any) {
		docs = append(docs, encodeAny(tb, doc))
		if fixed, ok := fixDigest(doc); ok {
			docs = append(docs, encodeAny(tb, fixed))
		}
	}
	// Data keys whose UTF-8 and UTF-16 orders differ, escapes, raw DEL.
	for _, k := range []string{`\ue000`, "😀", `a\u00e9`, `z\/`, `\u007f`, `\t`, "\x7f"} {
		docs = append(docs, bytes.Replace(raw, []byte(`"active_state"`), []byte(`"`+k+`"`), 1))
	}
	for _, k := range []string{"x", "😀x", "é", "\x7f"} {
		m := decodeAny(tb, raw)
		m.(map[string]any)["snapshot"].(map[string]any)["evidence"].([]any)[0].(map[string]any)["data"].(map[string]any)[k] = "v"
		add(m)
	}
	for _, lit := range []string{`{"host":"a","host":"b"}`, `{"host":`} {
		docs = append(docs, []byte(lit))
	}
	canonical, variants := canonicalVariants(tb)
	return append(append(docs, canonical), variants...)
}

// mutations returns the golden data of file and mutations of it: every
// value replaced by values of every JSON type at and around the schemas'
// limits, every member removed, an unknown member added to every object,
// arrays grown and emptied, and documents that are not one object; each
// mutation also as fix makes it, when it does.
func mutations(tb testing.TB, file string, fix func(any) (any, bool)) (golden []byte, docs [][]byte) {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	require.NoError(tb, err)
	root := decodeAny(tb, raw)
	docs = [][]byte{raw}
	add := func(doc any) {
		docs = append(docs, encodeAny(tb, doc))
		if fixed, ok := fix(doc); ok {
			docs = append(docs, encodeAny(tb, fixed))
		}
	}
	var walk func(path []any, v any)
	walk = func(path []any, v any) {
		if len(path) > 0 {
			for _, r := range replacements() {
				add(setAt(decodeAny(tb, raw), path, r))
			}
			add(setAt(decodeAny(tb, raw), path, deleteMarker{}))
		}
		switch x := v.(type) {
		case map[string]any:
			add(setAt(decodeAny(tb, raw), append(append([]any(nil), path...), "unknown_member"), json.Number("1")))
			for k, c := range x {
				walk(append(append([]any(nil), path...), k), c)
			}
		case []any:
			for i, c := range x {
				walk(append(append([]any(nil), path...), i), c)
			}
			if len(x) > 0 {
				add(setAt(decodeAny(tb, raw), path, append(append([]any(nil), x...), x[0])))
			}
			add(setAt(decodeAny(tb, raw), path, []any{}))
			add(setAt(decodeAny(tb, raw), path, []any{"x"}))
		}
	}
	walk(nil, root)
	// Every member the schema names that the golden example leaves out,
	// with every replacement value, so that a member added to the type
	// and the schema is held to the schema too.
	if top, ok := root.(map[string]any); ok {
		for _, name := range schemaProperties(tb, file) {
			if _, present := top[name]; present {
				continue
			}
			for _, r := range replacements() {
				add(setAt(decodeAny(tb, raw), []any{name}, r))
			}
		}
	}
	for _, lit := range []string{"", "null", "[]", `"x"`, "{}", string(raw) + " x", string(raw[:len(raw)/2])} {
		docs = append(docs, []byte(lit))
	}
	return raw, docs
}

type deleteMarker struct{}

func replacements() []any {
	n := func(s string) any { return json.Number(s) }
	return []any{
		nil, true, false, map[string]any{}, []any{},
		"", "x", "\u0001", "\u0085", "\u00a0", "a\u007fb", "café ☕",
		strings.Repeat("é", events.MaxNameLength), strings.Repeat("a", events.MaxNameLength+1), strings.Repeat("a", events.MaxNameLength),
		"declared", "resolved", "live", "Live",
		"systemd.unit", "agent worker.service",
		"sha256:" + strings.Repeat("ab", 32), "sha256:" + strings.Repeat("AB", 32), "sha256:" + strings.Repeat("a", 63),
		"2026-10-06T03:09:40Z", "2026-10-06T03:09:40.5Z", "2026-10-06t03:09:40z", "2026-10-06T03:09:40,5Z",
		"2026-10-06T23:59:60Z", "2026-10-06T03:09:60Z", "2026-10-06T03:09:40+24:00", "2026-10-06T03:09:40-02:30",
		"2026-10-06T03:09:40.123456789+01:00", "2026-10-06 03:09:40Z", "2026-02-30T03:09:40Z", "2026-10-06T03:09:40",
		"0001-01-01T00:00:00Z", "0000-12-31T23:00:00-01:00",
		"2026-10-06T03:09:40+00:00", "2026-10-06T03:09:40-00:00", "2026-10-06T03:09:40.120Z", "2026-10-06T+3:+9:+0Z",
		"2026-10-06T03:09:40+01:+0",
		n("0"), n("-0"), n("1"), n("-1"), n("2"), n("60"), n("1.0"), n("1e0"), n("10e-1"), n("0.1e1"), n("0.5"),
		n("60.0"), n("6e1"), n("6E+1"), n("1e-400"), n("1e400"), n("-1e400"),
		n("9007199254740991"), n("9007199254740992"), n("-9007199254740991"), n("-9007199254740992"),
		n("9223372036854775807"), n("9223372036854775808"), n("1.5"),
		map[string]any{"kind": "systemd.unit", "identifier": "agent.service"},
		map[string]any{"kind": "systemd.unit"},
		map[string]any{"kind": "", "identifier": "x"},
	}
}

func decodeAny(tb testing.TB, b []byte) any {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	require.NoError(tb, dec.Decode(&v))
	return v
}

func encodeAny(tb testing.TB, v any) []byte {
	tb.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	require.NoError(tb, enc.Encode(v))
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// setAt sets (or, for deleteMarker, removes) the value at path in root.
func setAt(root any, path []any, v any) any {
	if len(path) == 0 {
		return v
	}
	switch x := root.(type) {
	case map[string]any:
		k := path[0].(string)
		if len(path) == 1 {
			if _, del := v.(deleteMarker); del {
				delete(x, k)
			} else {
				x[k] = v
			}
			return x
		}
		x[k] = setAt(x[k], path[1:], v)
		return x
	case []any:
		i := path[0].(int)
		if len(path) == 1 {
			if _, del := v.(deleteMarker); del {
				return append(x[:i:i], x[i+1:]...)
			}
			x[i] = v
			return x
		}
		x[i] = setAt(x[i], path[1:], v)
		return x
	}
	return root
}

// fixDigest sets the digest to the mutated snapshot's, when it parses.
func fixDigest(doc any) (any, bool) {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, false
	}
	raw, err := json.Marshal(m["snapshot"])
	if err != nil {
		return nil, false
	}
	s, err := snapshot.Parse(raw)
	if err != nil {
		return nil, false
	}
	d, err := s.Digest()
	if err != nil || d == m["digest"] {
		return nil, false
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	out["digest"] = d
	return out, true
}

// checkEquivalent holds the decoder to the compiled JSON Schema on one
// document: what the schema refuses is refused for its reason (malformed
// JSON, a duplicate key, the schema); what it takes is refused, if at
// all, for the payload's rules, or (ReasonSchema) because a whole number
// is not written as an integer where the payload holds one (6e1 for 60,
// 1.0 for 1: the schema's "integer" takes it, the decoder does not). What is accepted re-encodes to data the schema
// takes and that decodes to the same payload.
func checkEquivalent(t testing.TB, doc []byte) (accepted bool) {
	schemaErr := events.CheckSchema(events.TypeEvidenceCollected, doc)
	p, s, err := events.DecodeEvidence(doc)
	if schemaErr != nil {
		require.Error(t, err, "the decoder took what the schema refuses (%v): %s", schemaErr, doc)
		require.Equal(t, events.ReasonOf(schemaErr), events.ReasonOf(err), "reasons: schema %v, decoder %v, on %s", schemaErr, err, doc)
		return false
	}
	if err != nil {
		if events.ReasonOf(err) == events.ReasonSchema {
			require.Regexp(t, "JSON number|non-integer number|schema_version", err.Error(), "the schema takes what the decoder refuses (%v): %s", err, doc)
		} else {
			require.Equal(t, events.ReasonInvalidPayload, events.ReasonOf(err), "the schema takes what the decoder refuses (%v): %s", err, doc)
		}
		return false
	}
	require.NoError(t, s.Validate(), "the decoder took a snapshot Validate refuses: %s", doc)
	canon, err := s.Canonical()
	require.NoError(t, err)
	require.Equal(t, string(canon), string(p.Snapshot), "the decoded payload carries the canonical snapshot")
	data, err := events.EncodeData(p)
	require.NoError(t, err)
	require.NoError(t, events.CheckSchema(events.TypeEvidenceCollected, data), "re-encoded: %s", data)
	again, _, err := events.DecodeEvidence(data)
	require.NoError(t, err)
	require.Equal(t, p, again)
	return true
}

func TestEvidenceDecoderMatchesTheSchema(t *testing.T) {
	docs := evidenceDocs(t)
	accepted := 0
	for _, doc := range docs {
		if checkEquivalent(t, doc) {
			accepted++
		}
	}
	t.Logf("%d documents, %d accepted", len(docs), accepted)
	assert.Greater(t, accepted, 50, "the mutations reach accepted documents")
	assert.Greater(t, len(docs)-accepted, 500, "and rejected ones")
}

func FuzzEvidenceDecoder(f *testing.F) {
	for i, doc := range evidenceDocs(f) {
		if i%7 == 0 {
			f.Add(doc)
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte) { checkEquivalent(t, doc) })
}

// ReadEvidence returns what Read returns, and the snapshot: for good
// events and for every kind of bad one, with the same error.
func TestReadEvidenceIsRead(t *testing.T) {
	ev := fixtures(t)["evidence.collected.v1.golden.json"].(events.EvidenceCollected)
	good, _, err := binding.NewMsg(fixtureSource, ev)
	require.NoError(t, err)
	verdict, _, err := binding.NewMsg(fixtureSource, fixtures(t)["verdict.error.v2.golden.json"])
	require.NoError(t, err)
	variant := func(edit func(*nats.Msg)) *nats.Msg {
		m := &nats.Msg{Subject: good.Subject, Header: cloneHeader(good.Header), Data: good.Data}
		edit(m)
		return m
	}
	for name, m := range map[string]*nats.Msg{
		"good":          good,
		"no baseline":   mustMsg(t, func() events.Payload { p := ev; p.Baseline = nil; return p }()),
		"malformed":     variant(func(m *nats.Msg) { m.Data = []byte(`{"host":`) }),
		"duplicate key": variant(func(m *nats.Msg) { m.Data = append([]byte(`{"host":"a",`), m.Data[1:]...) }),
		"schema": variant(func(m *nats.Msg) {
			m.Data = bytes.Replace(m.Data, []byte(`"interval_seconds":60`), []byte(`"interval_seconds":-1`), 1)
		}),
		"not an int64": variant(func(m *nats.Msg) {
			m.Data = bytes.Replace(m.Data, []byte(`"interval_seconds":60`), []byte(`"interval_seconds":6e1`), 1)
		}),
		"digest": variant(func(m *nats.Msg) {
			m.Data = bytes.Replace(m.Data, []byte(`"main_pid":3036`), []byte(`"main_pid":3037`), 1)
		}),
		"subject attribute": variant(func(m *nats.Msg) { m.Header.Set("ce-subject", "systemd.unit:other") }),
		"nats subject":      variant(func(m *nats.Msg) { m.Subject = events.EvidenceSubject("web-02", "systemd.unit") }),
		"unknown type":      variant(func(m *nats.Msg) { m.Header.Set("ce-type", events.TypePrefix+"evidence.collected.v2") }),
		"a verdict":         {Subject: good.Subject, Header: verdict.Header, Data: verdict.Data},
	} {
		t.Run(name, func(t *testing.T) {
			rm := received{m}
			e1, p1, err1 := binding.Read[events.EvidenceCollected](rm)
			e2, p2, s2, err2 := binding.ReadEvidence(rm)
			if err1 != nil {
				require.Error(t, err2)
				assert.Equal(t, err1.Error(), err2.Error())
				assert.Nil(t, s2)
				return
			}
			require.NoError(t, err2)
			assertSameEvent(t, e1, e2)
			s1, err := p1.ParseSnapshot()
			require.NoError(t, err)
			assert.Equal(t, s1, s2)
			assert.JSONEq(t, string(p1.Snapshot), string(p2.Snapshot))
			p1.Snapshot, p2.Snapshot = nil, nil
			assert.Equal(t, p1, p2)
		})
	}
}

func mustMsg(t *testing.T, p events.Payload) *nats.Msg {
	t.Helper()
	m, _, err := binding.NewMsg(fixtureSource, p)
	require.NoError(t, err)
	return m
}

// received is a nats.Msg as events.Msg.
type received struct{ m *nats.Msg }

func (r received) Subject() string      { return r.m.Subject }
func (r received) Headers() nats.Header { return r.m.Header }
func (r received) Data() []byte         { return r.m.Data }

// digestAndSnapshot reads the digest and the snapshot, as written, of doc
// (evidence.collected data).
func digestAndSnapshot(tb testing.TB, doc []byte) (string, json.RawMessage) {
	tb.Helper()
	var p struct {
		Digest   string          `json:"digest"`
		Snapshot json.RawMessage `json:"snapshot"`
	}
	require.NoError(tb, json.Unmarshal(doc, &p))
	return p.Digest, p.Snapshot
}

// withDigest returns doc (evidence.collected data) with the digest of its
// snapshot, or nil when the snapshot does not parse.
func withDigest(tb testing.TB, doc []byte) []byte {
	tb.Helper()
	digest, raw := digestAndSnapshot(tb, doc)
	s, err := snapshot.Parse(raw)
	if err != nil {
		return nil
	}
	d, err := s.Digest()
	require.NoError(tb, err)
	return bytes.Replace(doc, []byte(digest), []byte(d), 1)
}

// withRawDigest returns doc with the digest of its snapshot as written.
func withRawDigest(tb testing.TB, doc []byte) []byte {
	tb.Helper()
	digest, raw := digestAndSnapshot(tb, doc)
	sum := sha256.Sum256(raw)
	return bytes.Replace(doc, []byte(digest), []byte("sha256:"+hex.EncodeToString(sum[:])), 1)
}

// canonicalVariants returns evidence.collected data whose snapshot is
// written canonically (as NewEvidenceCollected writes it), and variants
// of it written otherwise in every way the one-pass decoder reads: white
// space, members out of order, an escaped '/', -0, keys out of order.
func canonicalVariants(tb testing.TB) (canonical []byte, variants [][]byte) {
	tb.Helper()
	m, _, err := binding.NewMsg(fixtureSource, fixtures(tb)["evidence.collected.v1.golden.json"])
	require.NoError(tb, err)
	canonical = m.Data
	for _, r := range [][2]string{
		{`{"captured_at":`, `{ "captured_at":`},
		{`{"captured_at":`, "{\n\"captured_at\":"},
		{`"kind":"systemd.unit","plane"`, `"kind" :"systemd.unit","plane"`},
		{`],"schema_version":1`, `] ,"schema_version":1`},
		{`"schema_version":1,"target":{"identifier":"agent worker.service","kind":"systemd.unit"}`,
			`"target":{"identifier":"agent worker.service","kind":"systemd.unit"},"schema_version":1`},
		{`{"identifier":"agent worker.service","kind":"systemd.unit"}`, `{"kind":"systemd.unit","identifier":"agent worker.service"}`},
		{`{"collector":"systemd","method":"systemctl show"}`, `{"method":"systemctl show","collector":"systemd"}`},
		{`"kind":"systemd.unit","plane":"live"`, `"plane":"live","kind":"systemd.unit"`},
		{`{"data":{"active_state":"active",`, `{"kind":"systemd.unit","data":{"active_state":"active",`},
		{`"active_state":"active","description"`, `"description":"x","active_state":"active","description"`},
		{`"active_state":"active"`, `"active_state":"act\/ive"`},
		{`"active_state":"active"`, `"active_state":"act\"ive\\\b\f\n\r\t"`},
		{`"main_pid":3036`, `"main_pid":-0`},
		{`"main_pid":3036`, `"main_pid":0`},
		{`"main_pid":3036`, `"main_pid":-3036`},
		{`"dirty":false,"head_commit"`, `"head_commit":"x","dirty":false,"head_commit"`},
		{`"active_state":"active","description":"Agent <worker> & café ☕"`, `"description":"Agent <worker> & café ☕","active_state":"active"`},
		{`"dirty":false,"head_commit":"1111111111111111111111111111111111111111"`, `"head_commit":"1111111111111111111111111111111111111111","dirty":false`},
		{`"evidence":[`, `"evidence":[ `},
		{`,"snapshot":{`, `,"snapshot": {`},
		{`,"snapshot":{`, "  ,\t\"snapshot\"\n:\r{"},
		{`"kind":"systemd.unit"}},`, `"kind":"systemd.unit"}} ,`},
	} {
		require.Equal(tb, 1, bytes.Count(canonical, []byte(r[0])), "%s", r[0])
		v := bytes.Replace(canonical, []byte(r[0]), []byte(r[1]), 1)
		variants = append(variants, v)
		if fixed := withDigest(tb, v); fixed != nil {
			variants = append(variants, fixed)
		}
		// The digest of the snapshot as written, not of its canonical
		// form: to be refused, unless it is canonical.
		variants = append(variants, withRawDigest(tb, v))
	}
	return canonical, variants
}

// The decoder passes a canonically written snapshot through and writes
// any other one canonically.
func TestEvidenceCanonicalSnapshot(t *testing.T) {
	canonical, variants := canonicalVariants(t)
	for _, doc := range append([][]byte{canonical}, variants...) {
		checkEquivalent(t, doc)
	}
	p, s, err := events.DecodeEvidence(canonical)
	require.NoError(t, err)
	want, err := s.Canonical()
	require.NoError(t, err)
	require.Equal(t, string(want), string(p.Snapshot))
	require.Contains(t, string(canonical), `"snapshot":`+string(want))
	taken := 0
	for _, doc := range variants {
		if _, _, err := events.DecodeEvidence(doc); err == nil {
			taken++
		}
	}
	require.Greater(t, taken, len(variants)/2, "the variants are decoded")
}

// A snapshot of more fields than a pooled reader keeps room for decodes
// as any other, again and again.
func TestEvidenceLargeSnapshot(t *testing.T) {
	s := fixtureSnapshot(t)
	data := snapshot.Data{}
	for i := range 6000 {
		data[fmt.Sprintf("field_%05d", i)] = snapshot.Int(int64(i))
	}
	s.Evidence[0].Data = data
	p, err := events.NewEvidenceCollected(fixtureHost, s, time.Minute)
	require.NoError(t, err)
	m := mustMsg(t, p)
	for range 3 {
		checkEquivalent(t, m.Data)
		_, got, err := events.DecodeEvidence(m.Data)
		require.NoError(t, err)
		require.Len(t, got.Evidence[0].Data, 6000)
	}
}

// An evidence.collected snapshot keeps captured_at as written, whatever its
// RFC 3339 form: every decoder takes it with the digest of the snapshot as
// written (RFC 8785 of the document as received, by gowebpki/jcs through
// canonjson.Transform), keeps the string, and refuses the digest of the
// time re-formatted as the collectors write it.
func TestEvidenceKeepsCapturedAtVerbatim(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "evidence.collected.v1.golden.json"))
	require.NoError(t, err)
	ev := fixtures(t)["evidence.collected.v1.golden.json"].(events.EvidenceCollected)
	good, _, err := binding.NewMsg(fixtureSource, ev)
	require.NoError(t, err)
	// doc is the golden data with captured_at written ts, and the digest
	// of the snapshot with captured_at written digestTS.
	doc := func(ts, digestTS string) (data []byte, snapshotDigest string, canonical []byte) {
		at := func(ts string) []byte {
			return bytes.Replace(golden, []byte(`"captured_at": "2026-10-06T03:09:40Z"`), []byte(`"captured_at": "`+ts+`"`), 1)
		}
		var p struct {
			Snapshot json.RawMessage `json:"snapshot"`
		}
		require.NoError(t, json.Unmarshal(at(digestTS), &p))
		canon, err := canonjson.Transform(p.Snapshot)
		require.NoError(t, err)
		sum := sha256.Sum256(canon)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		return bytes.Replace(at(ts), []byte(ev.Digest), []byte(digest), 1), digest, canon
	}
	for _, ts := range []string{
		"2026-10-06T03:09:40Z", "2026-10-06T03:09:40+00:00", "2026-10-06T03:09:40-00:00", "2026-10-06T03:09:40.120Z",
		"2026-10-06T03:09:40.0Z", "2026-10-06T03:09:40.5Z", "2026-10-06T05:09:40+02:00", "2026-10-06T03:09:40.123456789Z",
		"2026-10-06t03:09:40z", "0001-01-01T00:00:00Z",
	} {
		t.Run(ts, func(t *testing.T) {
			data, want, canon := doc(ts, ts)
			m := received{&nats.Msg{Subject: good.Subject, Header: good.Header, Data: data}}
			require.NoError(t, events.CheckSchema(events.TypeEvidenceCollected, data), "the schema")
			_, p, err := binding.Read[events.EvidenceCollected](m)
			require.NoError(t, err, "Read")
			assert.Equal(t, want, p.Digest)
			s, err := p.ParseSnapshot()
			require.NoError(t, err)
			assert.Equal(t, ts, s.CapturedAt)
			_, p, s, err = binding.ReadEvidence(m)
			require.NoError(t, err, "ReadEvidence")
			assert.Equal(t, ts, s.CapturedAt)
			assert.Equal(t, want, p.Digest)
			assert.Equal(t, string(canon), string(p.Snapshot))
			_, s, err = events.DecodeEvidence(data)
			require.NoError(t, err, "the decoder")
			assert.Equal(t, ts, s.CapturedAt)
			checkEquivalent(t, data)

			// Sent as NewEvidenceCollected sends it: the decoder takes it
			// as written.
			built := fixtureSnapshot(t)
			built.CapturedAt = ts
			sent, err := events.NewEvidenceCollected(fixtureHost, built, time.Minute)
			require.NoError(t, err)
			assert.Equal(t, want, sent.Digest)
			assert.Equal(t, string(canon), string(sent.Snapshot))
			sent.Baseline = ev.Baseline
			raw := mustMsg(t, sent).Data
			pf, sf, err := events.DecodeEvidence(raw)
			require.NoError(t, err, "the decoder takes any captured_at form")
			assert.Equal(t, ts, sf.CapturedAt)
			assert.Equal(t, string(canon), string(pf.Snapshot))
			checkEquivalent(t, raw)

			// The digest of the time as the collectors write it is not
			// this snapshot's.
			instant, err := time.Parse(time.RFC3339Nano, strings.ToUpper(ts))
			require.NoError(t, err)
			reformatted := snapshot.FormatTime(instant)
			if reformatted == ts {
				return
			}
			data, other, _ := doc(ts, reformatted)
			require.NotEqual(t, want, other)
			m = received{&nats.Msg{Subject: good.Subject, Header: good.Header, Data: data}}
			_, _, err = binding.Read[events.EvidenceCollected](m)
			require.ErrorContains(t, err, "but the snapshot's digest is "+want)
			_, _, _, err2 := binding.ReadEvidence(m)
			require.Error(t, err2)
			assert.Equal(t, err.Error(), err2.Error())
			_, _, err = events.DecodeEvidence(data)
			require.ErrorContains(t, err, "but the snapshot's digest is "+want)
			checkEquivalent(t, data)
		})
	}
}

// schemaProperties are the top-level members the schema of the golden
// example file names.
func schemaProperties(tb testing.TB, golden string) []string {
	tb.Helper()
	for _, s := range events.Catalog() {
		if s.Golden() != golden {
			continue
		}
		raw, err := fs.ReadFile(events.SchemaFS(), s.Schema)
		require.NoError(tb, err)
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		require.NoError(tb, json.Unmarshal(raw, &schema))
		return slices.Sorted(maps.Keys(schema.Properties))
	}
	tb.Fatalf("no catalog type has the golden example %s", golden)
	return nil
}
