package events_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

// The codec benchmarks measure encoding (NewMsg: Validate, the data and
// its check, headers) and strict decoding (FromNATS, then Decode[Payload]:
// the payload type's decoder) of one payload, against a naive reference:
// encoding/json Marshal into a message with the same headers, then
// Unmarshal into a map, without any check.

func BenchmarkCodecVerdict(b *testing.B) {
	p := fixtures(b)["verdict.drift.v2.golden.json"]
	benchCodec(b, p)
	// NewMsg of a verdict, as the verifier sends them (the encode
	// benchmark above is the same call).
	benchNewMsg(b, "encode-verdict-msg", p)
	// A pass verdict with its id given, as the verifier sends most.
	pass := fixtures(b)["verdict.pass.v2.golden.json"].(events.Verdict)
	benchNewMsg(b, "encode-verdict-msg-pass", pass, binding.WithID(fixtureID))
}

// benchNewMsg runs the sub-benchmark name: NewMsg of p with opts.
func benchNewMsg(b *testing.B, name string, p events.Payload, opts ...binding.Option) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := binding.NewMsg(fixtureSource, p, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkCodecEvidence(b *testing.B) {
	p := fixtures(b)["evidence.collected.v1.golden.json"]
	benchCodec(b, p)
	m, _, err := binding.NewMsg(fixtureSource, p)
	require.NoError(b, err)
	// ReadEvidence: the evidence decoder, the snapshot parsed once (Read
	// plus ParseSnapshot, below, parses it twice).
	b.Run("read-evidence", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, err := binding.ReadEvidence(received{m}); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same data indented, as the golden file holds it: the snapshot
	// is written canonically by ReadEvidence rather than passed through.
	indented, err := os.ReadFile(filepath.Join("testdata", "evidence.collected.v1.golden.json"))
	require.NoError(b, err)
	im := &nats.Msg{Subject: m.Subject, Header: m.Header, Data: indented}
	b.Run("read-evidence-indented", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, err := binding.ReadEvidence(received{im}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-then-parse-snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, p, err := binding.Read[events.EvidenceCollected](received{m})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.ParseSnapshot(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func benchCodec(b *testing.B, p events.Payload) {
	m, _, err := binding.NewMsg(fixtureSource, p)
	require.NoError(b, err)
	b.Run("reference-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			data, err := json.Marshal(p)
			if err != nil {
				b.Fatal(err)
			}
			msg := &nats.Msg{Subject: m.Subject, Header: m.Header, Data: data}
			var v map[string]any
			if err := json.Unmarshal(msg.Data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	benchNewMsg(b, "encode", p)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e, err := binding.FromNATS(m.Header, m.Data)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := binding.Decode[events.Payload](e); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFromNATS measures the envelope alone: the strict header decode
// every consumer runs before the payload.
func BenchmarkFromNATS(b *testing.B) {
	for _, name := range []string{"verdict.drift.v2.golden.json", "evidence.collected.v1.golden.json"} {
		m, _, err := binding.NewMsg(fixtureSource, fixtures(b)[name], binding.WithTraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""))
		require.NoError(b, err)
		b.Run(name[:len(name)-len(".v1.golden.json")], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := binding.FromNATS(m.Header, m.Data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
