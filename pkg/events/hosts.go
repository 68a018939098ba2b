package events

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// The host registry's record (a key-value entry per host): the keys a
// host's collector has signed with and where each stands. Evidence is
// authentic only when it is signed by a key the registry holds as
// enrolled for the host it names.

// KeyState is where a host's key stands.
type KeyState string

// Key states.
const (
	// KeyPending: seen on evidence, waiting for an operator's approval;
	// evidence it signs changes nothing.
	KeyPending KeyState = "pending"
	// KeyEnrolled: the host's key; its evidence is accepted.
	KeyEnrolled KeyState = "enrolled"
	// KeyRevoked: no longer accepted.
	KeyRevoked KeyState = "revoked"
)

// HostKey is one key of a host.
type HostKey struct {
	// Key is the key id (KeyID): the public key itself.
	Key   string   `json:"key"`
	State KeyState `json:"state"`
	// FirstSeen is when evidence signed by the key was first seen, or when
	// an operator added it.
	FirstSeen time.Time `json:"first_seen"`
	// Changed and By say when and by whom the state was last set:
	// "first-use" when the registry pinned the key itself, else the
	// operator.
	Changed time.Time `json:"changed"`
	By      string    `json:"by"`
}

// HostRecord is a host's entry in the registry.
type HostRecord struct {
	Host string    `json:"host"`
	Keys []HostKey `json:"keys"`
	// Rotating: an operator expects a new key (`runtimetruth host
	// rotate`); a new key waits as pending even under first-use
	// enrollment, and approving it revokes the others.
	Rotating bool `json:"rotating,omitempty"`
	// DroppedKeys counts the keys the registry let go to keep the record
	// bounded, whatever evidence in the host's name carries: the oldest
	// pending keys beyond the newest few, the oldest revoked beyond the
	// newest ones kept (services/verifier: MaxPendingKeys, MaxRevokedKeys).
	DroppedKeys uint64 `json:"dropped_keys,omitempty"`
}

// KeyOf returns the host's entry for key id, or nil.
func (r *HostRecord) KeyOf(id string) *HostKey {
	for i := range r.Keys {
		if r.Keys[i].Key == id {
			return &r.Keys[i]
		}
	}
	return nil
}

// Enrolled reports whether the host has an enrolled key.
func (r *HostRecord) Enrolled() bool {
	for _, k := range r.Keys {
		if k.State == KeyEnrolled {
			return true
		}
	}
	return false
}

// HostKeyChanged is the data of TypeHostKeyChanged: a write of a host's
// registry record that changed where its keys stand. The registry's
// record is the state; this is its history, in the audit chain.
type HostKeyChanged struct {
	Host string `json:"host"`
	// Keys are the keys the write added or moved to another state, in the
	// record's order (at most MaxKeyChanges).
	Keys []KeyChange `json:"keys"`
	// Rotating is the record's Rotating after the write.
	Rotating bool `json:"rotating,omitempty"`
	// Actor names who made the change: the operator, or "first-use" and
	// "rotation" when the registry did (HostKey.By).
	Actor string `json:"actor"`
}

// KeyChange is one key's change of state.
type KeyChange struct {
	// Key is the key id: ed25519: and the public key in standard base64.
	Key   string   `json:"key"`
	State KeyState `json:"state"`
	// Previous is the state before; absent for a key the record did not
	// hold.
	Previous KeyState `json:"previous,omitempty"`
}

// MaxKeyChanges bounds HostKeyChanged.Keys; a host's record keeps far
// fewer keys (services/verifier bounds it).
const MaxKeyChanges = 64

// Type is TypeHostKeyChanged.
func (HostKeyChanged) Type() string { return TypeHostKeyChanged }

// Subject is the host.
func (p HostKeyChanged) Subject() string { return p.Host }

// NATSSubject is rt.hostkey.<host>.
func (p HostKeyChanged) NATSSubject() string { return HostKeySubject(p.Host) }

// Validate checks the names, the key ids and that each key changed.
func (p HostKeyChanged) Validate() error {
	if err := checkName("host", p.Host); err != nil {
		return err
	}
	if err := checkName("actor", p.Actor); err != nil {
		return err
	}
	if len(p.Keys) == 0 || len(p.Keys) > MaxKeyChanges {
		return schemaErr("keys", "%d keys, want 1 to %d", len(p.Keys), MaxKeyChanges)
	}
	for i, k := range p.Keys {
		field := fmt.Sprintf("keys/%d", i)
		if _, err := ParseKeyID(k.Key); err != nil {
			return schemaErr(field+"/key", "%q is not ed25519:<base64 of 32 bytes>", k.Key)
		}
		if !k.State.valid() {
			return schemaErr(field+"/state", "%q is not pending, enrolled or revoked", k.State)
		}
		if k.Previous != "" && !k.Previous.valid() {
			return schemaErr(field+"/previous", "%q is not pending, enrolled or revoked", k.Previous)
		}
		if k.Previous == k.State {
			return fieldErr(field+"/previous", "%q, the state it has", k.Previous)
		}
	}
	return nil
}

func (s KeyState) valid() bool { return s == KeyPending || s == KeyEnrolled || s == KeyRevoked }

// KeyIDPrefix starts a key id: "ed25519:" and the standard base64 of the
// Ed25519 public key's 32 bytes (package dsse's KeyID).
const KeyIDPrefix = "ed25519:"

// ParseKeyID returns the Ed25519 public key a key id names.
func ParseKeyID(id string) (ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(id, KeyIDPrefix)
	if !ok {
		return nil, fmt.Errorf("key id %q: want %s<base64 of 32 bytes>", id, KeyIDPrefix)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(rest)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("key id %q: want %s<base64 of 32 bytes>", id, KeyIDPrefix)
	}
	return ed25519.PublicKey(b), nil
}
