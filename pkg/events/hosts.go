package events

import "time"

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
