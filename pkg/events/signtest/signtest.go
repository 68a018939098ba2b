// Package signtest gives tests a collector's signing identity per host
// name: a fixed Ed25519 key derived from the name, and one sequence per
// key, increasing across every signer of the process, so that evidence
// built in tests is authentic to a verifier that pinned the key (first-use
// enrollment) or had it approved (Approve).
package signtest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
)

// Key is host's key: derived from its name, the same in every test.
func Key(host string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("runtimetruth signtest key\x00" + host))
	return ed25519.NewKeyFromSeed(seed[:])
}

// KeyID is the key id of Key(host).
func KeyID(host string) string { return dsse.KeyID(Key(host).Public().(ed25519.PublicKey)) }

var (
	mu      sync.Mutex
	signers = map[string]*dsse.Signer{}
	// seq starts at the process's start time, so that a test run after
	// another against the same verifier state still signs above it.
	seq atomic.Uint64
)

func init() { seq.Store(uint64(time.Now().UnixNano())) }

// Signer signs as host's collector: Key(host), with a sequence number
// above every one signed before in the process.
func Signer(host string) *dsse.Signer {
	mu.Lock()
	defer mu.Unlock()
	s, ok := signers[host]
	if !ok {
		s = dsse.NewSigner(Key(host), func() (uint64, error) { return seq.Add(1), nil })
		signers[host] = s
	}
	return s
}

// Sign is the option that signs an event as host's collector.
func Sign(host string) binding.Option { return binding.WithSigner(Signer(host)) }

// Random is a signer with a fresh key of its own and its own sequence
// (from 1): a collector no registry knows, an impostor's.
func Random() *dsse.Signer {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic("signtest: " + err.Error()) // crypto/rand does not fail
	}
	var n atomic.Uint64
	return dsse.NewSigner(key, func() (uint64, error) { return n.Add(1), nil })
}
