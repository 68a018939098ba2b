package verifier

import (
	"crypto/ed25519"
	"crypto/rand"
	"sync"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
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
// (curve25519-voi, about a third of the cost per signature of checking
// each alone at the verifier's batch sizes), each checked again alone
// only when the batch as a whole does not hold, to find the bad ones.
// The keys in keys (nil: none) are used in their expanded form, which
// saves decompressing each signature's key and, when every key of the
// batch is expanded, lets the multiscalar multiplication use their
// precomputed tables: 24 µs per signature instead of 34 at the
// verifier's batch sizes.
func verifyAll(sigs []*dsse.PendingSignature, keys *expandedKeys) []bool {
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
		if k := keys.get(s); k != nil {
			valid[idx[0]] = voi.VerifyExpandedWithOptions(k, s.Message, s.Sig, verifyOptions)
		} else {
			valid[idx[0]] = voi.VerifyWithOptions(voi.PublicKey(s.PublicKey), s.Message, s.Sig, verifyOptions)
		}
		return valid
	}
	// A batch of keys not all expanded is verified without expanding
	// them (a table per key, for the multiscalar multiplication, costs
	// more than it saves for a key used once).
	bv := voi.NewBatchVerifierWithCapacity(len(idx))
	for _, i := range idx {
		s := sigs[i]
		if k := keys.get(s); k != nil {
			bv.AddExpandedWithOptions(k, s.Message, s.Sig, verifyOptions)
		} else {
			bv.ForceNoPublicKeyExpansion().AddWithOptions(voi.PublicKey(s.PublicKey), s.Message, s.Sig, verifyOptions)
		}
	}
	_, ok := bv.Verify(rand.Reader)
	for j, i := range idx {
		valid[i] = ok[j]
	}
	return valid
}

// maxExpandedKeys bounds expandedKeys (about 1.5 KiB a key): past it the
// memory starts over.
const maxExpandedKeys = 4096

// expandedKeys keeps the expanded form of the public keys that signed
// authentic evidence (added once their evidence was admitted, so that a
// flood of unknown keys cannot churn it); a nil *expandedKeys holds
// none. It only speeds verification up: whether a key may sign for a
// host is the registry's to say.
type expandedKeys struct {
	mu   sync.Mutex
	keys map[string]*voi.ExpandedPublicKey
}

func newExpandedKeys() *expandedKeys {
	return &expandedKeys{keys: map[string]*voi.ExpandedPublicKey{}}
}

// get returns the expanded form of s's key, or nil. The form is of the
// key bytes s carries, whatever its key id says.
func (k *expandedKeys) get(s *dsse.PendingSignature) *voi.ExpandedPublicKey {
	if k == nil {
		return nil
	}
	k.mu.Lock()
	e := k.keys[string(s.PublicKey)]
	k.mu.Unlock()
	return e
}

// add keeps the expanded form of pub.
func (k *expandedKeys) add(pub ed25519.PublicKey) {
	if k == nil {
		return
	}
	k.mu.Lock()
	_, ok := k.keys[string(pub)]
	k.mu.Unlock()
	if ok {
		return
	}
	e, err := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	if err != nil {
		return // not a point: checked, and refused, without expanding
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	setBounded(k.keys, maxExpandedKeys, string(pub), e)
}
