package dsse

import (
	"crypto/ed25519"
	"strings"
	"testing"
)

// TestNamesKey holds namesKey to comparing with KeyID.
func TestNamesKey(t *testing.T) {
	pub := make(ed25519.PublicKey, ed25519.PublicKeySize)
	for i := range pub {
		pub[i] = byte(i * 7)
	}
	other := append(ed25519.PublicKey{}, pub...)
	other[31] ^= 1
	id := KeyID(pub)
	for _, tc := range []string{
		id, KeyID(other), "", keyIDPrefix, strings.TrimPrefix(id, keyIDPrefix), id + "=", id[:len(id)-1],
		strings.Replace(id, "ed25519:", "ED25519:", 1), "ed25519:" + strings.Repeat("A", 44), id + " ",
	} {
		for _, k := range []ed25519.PublicKey{pub, other, pub[:16]} {
			if got, want := namesKey(tc, k), KeyID(k) == tc; got != want {
				t.Errorf("namesKey(%q, %x) = %t, want %t", tc, k, got, want)
			}
		}
	}
}
