package events_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
)

// BenchmarkSignature: what signing costs a collector per event (NewMsg
// signed against unsigned: the claim, the data's SHA-256, the Ed25519
// signature and the envelope), and what checking it costs a verifier
// (VerifySignature; ReadSignature and Verified alone, the part around
// the Ed25519 check that a batch verifier leaves to pkg/events).
func BenchmarkSignature(b *testing.B) {
	p := fixtures(b)["evidence.collected.v1.golden.json"]
	signer, pub := testSigner(b)
	benchNewMsg(b, "new-msg-unsigned", p)
	benchNewMsg(b, "new-msg-signed", p, binding.WithSigner(signer))
	m, _, err := binding.NewMsg(fixtureSource, p, binding.WithSigner(signer))
	require.NoError(b, err)
	e, err := binding.FromNATS(m.Header, m.Data)
	require.NoError(b, err)
	key := func(string) (ed25519.PublicKey, error) { return pub, nil }
	b.Run("verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := dsse.VerifySignature(e, p, key); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read-and-check-claim", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			s, err := dsse.ReadSignature(e, p, key)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Verified(true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
