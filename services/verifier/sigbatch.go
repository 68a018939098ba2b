package verifier

import (
	"crypto/rand"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// verifyOptions are the Ed25519 rules of verifyAll: crypto/ed25519's
// (small-order and non-canonically encoded public keys and small-order R
// accepted, a non-canonical R or S refused) but with the cofactored
// equation, which batch verification needs. The two agree on every
// signature made by an Ed25519 signer; they differ only on a signature
// crafted, by the holder of the private key, with a small-order
// component, which only the cofactored equation accepts.
var verifyOptions = &voi.Options{Verify: &voi.VerifyOptions{
	AllowSmallOrderA: true, AllowSmallOrderR: true, AllowNonCanonicalA: true,
}}

// verifyAll reports, for each signature of a batch (nil: none to check),
// whether it holds: all checked at once by batch verification
// (curve25519-voi, about half the cost per signature of checking each
// alone at the verifier's batch sizes), each checked again alone only
// when the batch as a whole does not hold, to find the bad ones.
func verifyAll(sigs []*events.PendingSignature) []bool {
	valid := make([]bool, len(sigs))
	idx := make([]int, 0, len(sigs))
	for i, s := range sigs {
		if s != nil {
			idx = append(idx, i)
		}
	}
	switch len(idx) {
	case 0:
		return valid
	case 1:
		s := sigs[idx[0]]
		valid[idx[0]] = voi.VerifyWithOptions(voi.PublicKey(s.PublicKey), s.Message, s.Sig, verifyOptions)
		return valid
	}
	// Expanding each public key (a table per key, for the multiscalar
	// multiplication) costs more than it saves at these sizes.
	bv := voi.NewBatchVerifierWithCapacity(len(idx)).ForceNoPublicKeyExpansion()
	for _, i := range idx {
		s := sigs[i]
		bv.AddWithOptions(voi.PublicKey(s.PublicKey), s.Message, s.Sig, verifyOptions)
	}
	_, ok := bv.Verify(rand.Reader)
	for j, i := range idx {
		valid[i] = ok[j]
	}
	return valid
}
