package events_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

// headerBlock renders h as the NATS wire header block.
func headerBlock(h nats.Header) string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteString("NATS/1.0\r\n")
	for _, k := range keys {
		for _, v := range h[k] {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.String()
}

// tracedMsg is p's message with the fixed id, time and trace context.
func tracedMsg(tb testing.TB, p events.Payload) *nats.Msg {
	tb.Helper()
	m, _, err := binding.NewMsg(fixtureSource, p, binding.WithID(fixtureID), binding.WithTime(fixtureTime),
		binding.WithTraceContext(fixtureTraceparent, "rt=1"))
	require.NoError(tb, err)
	return m
}

// FuzzFromNATS feeds arbitrary header blocks and data to the decoder. It
// must never panic, and an accepted event must re-encode to headers that
// decode to the same event and re-encode identically; an accepted payload
// must build the same event again through New.
func FuzzFromNATS(f *testing.F) {
	for _, p := range fixtures(f) {
		m := tracedMsg(f, p)
		f.Add(headerBlock(m.Header), m.Data)
		h := cloneHeader(m.Header)
		h["ce-subject"] = []string{`"quoted value"`}
		h["CE-SOURCE"] = h["ce-source"]
		delete(h, "ce-source")
		f.Add(headerBlock(h), m.Data)
	}
	f.Add("NATS/1.0\r\nce-specversion: 1.0\r\n\r\n", []byte("{}"))
	f.Add("NATS/1.0\r\nContent-Type: application/cloudevents+json\r\n\r\n", []byte("{}"))
	f.Fuzz(func(t *testing.T, block string, data []byte) {
		h, err := nats.DecodeHeadersMsg([]byte(block))
		if err != nil {
			return
		}
		e, err := binding.FromNATS(h, data)
		if err != nil {
			assert.ErrorIs(t, err, events.ErrInvalid)
			assert.NotEmpty(t, events.ReasonOf(err))
			return
		}
		m, err := binding.ToNATS("rt.fuzz", e)
		require.NoError(t, err, "an accepted event must encode")
		again, err := binding.FromNATS(m.Header, m.Data)
		require.NoError(t, err, "a re-encoded event must decode")
		assertSameEvent(t, e, again)
		m2, err := binding.ToNATS("rt.fuzz", again)
		require.NoError(t, err)
		require.Equal(t, m.Header, m2.Header)

		p, err := binding.Decode[events.Payload](e)
		if err != nil {
			assert.ErrorIs(t, err, events.ErrInvalid)
			return
		}
		opts := []binding.Option{binding.WithID(e.ID()), binding.WithTime(e.Time())}
		if tp, ok := e.Extensions()[binding.ExtTraceparent].(string); ok {
			ts, _ := e.Extensions()[binding.ExtTracestate].(string)
			opts = append(opts, binding.WithTraceContext(tp, ts))
		}
		rebuilt, err := binding.New(e.Source(), p, opts...)
		require.NoError(t, err, "an accepted payload must build an event")
		p2, err := binding.Decode[events.Payload](rebuilt)
		require.NoError(t, err)
		assert.Equal(t, indent(t, p), indent(t, p2))
	})
}

// FuzzToken checks that any string encodes to a valid subject token (and
// key-value key) that decodes back, unless shortened.
func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "web-01.example.com", "a b/c*d>e", "=", "==", "café ☕", strings.Repeat("x.", 80), "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := events.Token(s)
		require.LessOrEqual(t, len(tok), events.MaxTokenLength)
		require.True(t, events.ValidSubject("rt."+tok), "%q", tok)
		require.NotContains(t, tok, ".")
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			require.True(t, 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_=", c) >= 0, "%q", tok)
		}
		got, err := events.ParseToken(tok)
		if strings.Contains(tok, "==") {
			require.ErrorIs(t, err, events.ErrHashedToken)
			return
		}
		require.NoError(t, err)
		require.Equal(t, s, got)
	})
}
