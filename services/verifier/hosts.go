package verifier

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
)

// Enrollment is how the host registry treats a key it has not seen.
type Enrollment string

// Enrollment modes.
const (
	// EnrollOff checks no signature (Config.Enrollment).
	EnrollOff Enrollment = "off"
	// EnrollManual: a new key waits as pending until an operator
	// approves it (`runtimetruth host approve`); the services' default.
	EnrollManual Enrollment = "manual"
	// EnrollFirstUse: the first key seen for a host name is pinned; a
	// different key later waits as pending and is reported.
	EnrollFirstUse Enrollment = "first-use"
)

// Why evidence is not authentic (errors of Hosts.Admit, wrapped).
var (
	ErrNotEnrolled = errors.New("the host's key is not enrolled")
	ErrKeyChanged  = errors.New("the host signs with another key than its enrolled one")
	ErrRevoked     = errors.New("the key is revoked")
	ErrNoSuchHost  = errors.New("no such host in the registry")
	ErrNoSuchKey   = errors.New("no such key for the host")
)

// Bounds of a host's record, so that nothing sent in a host's name can
// grow it past what the bucket takes (topology: 64 KiB a value; a key
// entry is under 250 bytes, so 1 enrolled + MaxPendingKeys +
// MaxRevokedKeys keys stay under 10 KiB): a host records at most
// MaxPendingKeys pending keys (a further new key is refused without a
// write: pendingFull), and the newest MaxRevokedKeys revoked ones, older
// ones dropped and counted (HostRecord.DroppedKeys).
const (
	// MaxPendingKeys bounds the pending keys of a host: every new key
	// seen on evidence in its name is one, and anyone who may publish in
	// its name can make them. A pending key is never enrolled on its own
	// (an operator names the key to enroll), so one not recorded loses
	// nothing but a hint; approving a key (which keeps the pending ones)
	// or revoking makes room only by the operator's hand.
	MaxPendingKeys = 4
	// MaxRevokedKeys bounds the revoked keys a record keeps (each
	// rotation or revocation adds one; `audit verify --registry` reads
	// them to accept evidence signed before a revocation).
	MaxRevokedKeys = 32
)

// ErrNoKeyNamed is why a key is not enrolled without an operator naming
// it: a pending key is whatever anyone who may publish in the host's name
// signed with.
var ErrNoKeyNamed = errors.New("name the key to enroll (--key, as runtimetruth-collector --print-identity prints it on the host)")

// Hosts is the host registry: one entry per host (events.HostRecord) in a
// key-value bucket, written with compare-and-set so that verifiers and
// operators changing one host at once never lose a change.
//
// A registry made Announcing publishes each write that changes where a
// host's keys stand as a host.key.changed event (rt.hostkey.<host>, in
// the BASELINES stream and so in the audit chain), after the write, with
// an id derived from the host and the record's revision, so a retried
// announcement is dropped as a duplicate. The record is the state: a
// change written but not announced (the bus failed in between) is
// reported to whoever made it (ErrNotAnnounced), as Baselines does.
type Hosts struct {
	kv   jetstream.KeyValue
	mode Enrollment
	now  func() time.Time
	view *hostsView // the verifier's view of the bucket (registry.go); nil: none

	pub    *natsbus.Publisher // host.key.changed; nil: not announced
	source string
}

// NewHosts is the registry in kv, enrolling new keys by mode.
func NewHosts(kv jetstream.KeyValue, mode Enrollment) *Hosts {
	return &Hosts{kv: kv, mode: mode, now: time.Now}
}

// Announcing returns the registry h is, announcing its changes through js
// as source (events.Source("cli", user), say).
func (h *Hosts) Announcing(js jetstream.JetStream, source string) *Hosts {
	a := *h
	a.pub, a.source = natsbus.NewPublisher(js, telemetry.Providers{}), source
	return &a
}

// hostKey is a host's key in the bucket.
func hostKey(host string) string { return events.Token(host) }

// Get returns a host's record (ErrNoSuchHost when there is none).
func (h *Hosts) Get(ctx context.Context, host string) (events.HostRecord, error) {
	rec, _, err := h.get(ctx, host)
	return rec, err
}

func (h *Hosts) get(ctx context.Context, host string) (events.HostRecord, uint64, error) {
	e, err := h.kv.Get(ctx, hostKey(host))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return events.HostRecord{Host: host}, 0, ErrNoSuchHost
	}
	if err != nil {
		return events.HostRecord{}, 0, fmt.Errorf("host %s: %w", host, err)
	}
	rec, err := decodeHostRecord(e.Value())
	if err != nil {
		return events.HostRecord{}, 0, fmt.Errorf("host %s: record: %w", host, err)
	}
	if rec.Host != host {
		return events.HostRecord{}, 0, fmt.Errorf("host %s: the record is of host %q", host, rec.Host)
	}
	return rec, e.Revision(), nil
}

// update applies change to host's record (a new one when there is none)
// and writes it when change says to (updateRecord); when h announces,
// what the write changed is published (keyChanges).
func (h *Hosts) update(ctx context.Context, host string, change func(rec *events.HostRecord) (write bool, err error)) error {
	var ev events.HostKeyChanged
	rev, err := updateRecord(ctx, h.kv, hostKey(host), decodeHostRecord, func(rec *events.HostRecord, found bool) (bool, error) {
		if !found {
			rec.Host = host
		} else if rec.Host != host {
			return false, fmt.Errorf("host %s: the record is of host %q", host, rec.Host)
		}
		before := slices.Clone(rec.Keys)
		write, err := change(rec)
		ev = keyChanges(host, before, rec)
		return write, err
	})
	if rev == 0 || h.pub == nil || len(ev.Keys) == 0 {
		return err
	}
	id := events.HostKeyChangedIDs.ID(hostKey(host), strconv.FormatUint(rev, 10))
	if aerr := announce(ctx, h.pub, h.source, ev, id, "keys of host "+host, rev); aerr != nil {
		return errors.Join(err, aerr)
	}
	return err
}

// keyChanges is what a write of host's record changed: the keys of rec
// that before did not hold, or held in another state; its actor is theirs
// (HostKey.By).
func keyChanges(host string, before []events.HostKey, rec *events.HostRecord) events.HostKeyChanged {
	ev := events.HostKeyChanged{Host: host, Rotating: rec.Rotating}
	for _, k := range rec.Keys {
		var previous events.KeyState
		if i := slices.IndexFunc(before, func(b events.HostKey) bool { return b.Key == k.Key }); i >= 0 {
			previous = before[i].State
		}
		if previous == k.State {
			continue
		}
		ev.Keys = append(ev.Keys, events.KeyChange{Key: k.Key, State: k.State, Previous: previous})
		if ev.Actor == "" {
			ev.Actor = k.By
		}
	}
	return ev
}

// updateRecord reads the record under key (decode: its decoder) into a T
// (its zero value when there is none: found false), applies change and
// writes the record (encodeRecord) when change says to, by
// compare-and-set on the revision read, reading again when another
// writer got there first; it returns the revision written (0 when
// nothing was) and change's error (what to report), or why it could not
// be written.
func updateRecord[T any](ctx context.Context, kv jetstream.KeyValue, key string, decode func([]byte) (T, error),
	change func(rec *T, found bool) (write bool, err error)) (uint64, error) {
	for attempt := 0; ; attempt++ {
		var rec T
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return 0, fmt.Errorf("%s/%s: %w", kv.Bucket(), key, err)
		default:
			if rec, err = decode(e.Value()); err != nil {
				return 0, fmt.Errorf("%s/%s: record: %w", kv.Bucket(), key, err)
			}
			rev = e.Revision()
		}
		write, cerr := change(&rec, rev != 0)
		if !write {
			return 0, cerr
		}
		value, err := encodeRecord(&rec)
		if err != nil {
			return 0, fmt.Errorf("%s/%s: %w", kv.Bucket(), key, err)
		}
		var written uint64
		if rev == 0 {
			written, err = kv.Create(ctx, key, value)
		} else {
			written, err = kv.Update(ctx, key, value, rev)
		}
		if err == nil {
			return written, cerr
		}
		if attempt < 8 && (errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)) {
			continue
		}
		return 0, fmt.Errorf("%s/%s: write: %w", kv.Bucket(), key, err)
	}
}

// Admit decides whether evidence of host signed by key id is authentic:
// nil when the registry holds the key as the host's enrolled key (the
// newest one of a rotation ends it: Rotate). A key
// it has not seen is recorded: pinned (enrolled, by "first-use") when the
// mode is first-use and the host has no key and was never revoked; else
// pending (ErrNotEnrolled, or ErrKeyChanged when the host has an enrolled
// key), the newest MaxPendingKeys kept. A pending or revoked key is
// refused (ErrNotEnrolled, ErrRevoked). A key the verifier's view of the
// bucket holds as enrolled is admitted without reading the bucket
// (hostsView), unless the host is rotating.
func (h *Hosts) Admit(ctx context.Context, host, id string) error {
	if h.view != nil {
		if decided, err := h.view.admit(host, id); decided {
			return err
		}
	}
	return h.update(ctx, host, func(rec *events.HostRecord) (bool, error) {
		if k := rec.KeyOf(id); k != nil {
			switch k.State {
			case events.KeyEnrolled:
				return rotated(rec, id, h.now().UTC()), nil
			case events.KeyRevoked:
				return false, fmt.Errorf("%w: %s of host %s", ErrRevoked, id, host)
			}
			return false, pendingKey(rec, host, id)
		}
		if full, err := pendingFull(rec, host, id); full {
			return false, err // not recorded: the host has its pending keys
		}
		now := h.now().UTC()
		k := events.HostKey{Key: id, State: events.KeyPending, FirstSeen: now, Changed: now, By: "first-use"}
		fresh := len(rec.Keys) == 0 && !rec.Rotating && rec.DroppedKeys == 0
		if h.mode == EnrollFirstUse && fresh {
			k.State = events.KeyEnrolled
			rec.Keys = append(rec.Keys, k)
			return true, nil
		}
		rec.Keys = append(rec.Keys, k)
		bound(rec)
		if rec.Enrolled() {
			return true, fmt.Errorf("%w: %s of host %s waits for approval", ErrKeyChanged, id, host)
		}
		return true, fmt.Errorf("%w: %s of host %s waits for approval", ErrNotEnrolled, id, host)
	})
}

// Approve enrolls key id of host, by an operator who names it (as the
// host's collector prints it, out of band: never "the pending one",
// which anyone who may publish in the host's name can make; ErrNoKeyNamed
// without id). A key the registry has not seen is added (enrolled before
// its first evidence). The host's other enrolled keys are revoked, and a
// rotation is over.
func (h *Hosts) Approve(ctx context.Context, host, id, by string) (events.HostKey, error) {
	if id == "" {
		return events.HostKey{}, ErrNoKeyNamed
	}
	if _, err := dsse.ParseKeyID(id); err != nil {
		return events.HostKey{}, err
	}
	var approved events.HostKey
	err := h.update(ctx, host, func(rec *events.HostRecord) (bool, error) {
		now := h.now().UTC()
		k := rec.KeyOf(id)
		if k == nil {
			rec.Keys = append(rec.Keys, events.HostKey{Key: id, FirstSeen: now})
			k = &rec.Keys[len(rec.Keys)-1]
		}
		if k.State == events.KeyRevoked {
			return false, fmt.Errorf("%w: %s of host %s (a revoked key is not approved again)", ErrRevoked, id, host)
		}
		k.State, k.Changed, k.By = events.KeyEnrolled, now, by
		approved = *k
		for i := range rec.Keys {
			if o := &rec.Keys[i]; o.Key != id && o.State == events.KeyEnrolled {
				o.State, o.Changed, o.By = events.KeyRevoked, now, by
			}
		}
		rec.Rotating = false
		bound(rec)
		return true, nil
	})
	return approved, err
}

// pendingKey is the refusal of id, a pending key of rec: ErrKeyChanged
// when the host has an enrolled key (another key signs in its name: an
// impostor, or a host re-keyed without its operator), else
// ErrNotEnrolled.
func pendingKey(rec *events.HostRecord, host, id string) error {
	if rec.Enrolled() {
		return fmt.Errorf("%w: %s of host %s is pending approval", ErrKeyChanged, id, host)
	}
	return fmt.Errorf("%w: %s of host %s is pending approval", ErrNotEnrolled, id, host)
}

// pendingFull reports whether rec holds MaxPendingKeys pending keys,
// and then the refusal of id, a key it does not hold: such a key is
// refused without being recorded, so that evidence signed by ever new
// keys costs the registry no write.
func pendingFull(rec *events.HostRecord, host, id string) (bool, error) {
	n := 0
	for _, k := range rec.Keys {
		if k.State == events.KeyPending {
			n++
		}
	}
	if n < MaxPendingKeys {
		return false, nil
	}
	why := ErrNotEnrolled
	if rec.Enrolled() {
		why = ErrKeyChanged
	}
	return true, fmt.Errorf("%w: %s of host %s, not recorded: the host has %d pending keys already", why, id, host, n)
}

// bound drops the oldest pending keys of rec beyond MaxPendingKeys and
// the oldest revoked beyond MaxRevokedKeys (keys are kept in the order
// first seen), counting them.
func bound(rec *events.HostRecord) {
	count := map[events.KeyState]int{}
	for _, k := range rec.Keys {
		count[k.State]++
	}
	limit := map[events.KeyState]int{events.KeyPending: MaxPendingKeys, events.KeyRevoked: MaxRevokedKeys}
	kept := rec.Keys[:0]
	for _, k := range rec.Keys {
		if l, ok := limit[k.State]; ok && count[k.State] > l {
			count[k.State]--
			rec.DroppedKeys++
			continue
		}
		kept = append(kept, k)
	}
	clear(rec.Keys[len(kept):])
	rec.Keys = kept
}

// Revoke revokes every key of host, by an operator: its evidence is
// refused until a new key is approved.
func (h *Hosts) Revoke(ctx context.Context, host, by string) error {
	return h.update(ctx, host, func(rec *events.HostRecord) (bool, error) {
		if len(rec.Keys) == 0 {
			return false, fmt.Errorf("%w: %s", ErrNoSuchHost, host)
		}
		now := h.now().UTC()
		for i := range rec.Keys {
			if k := &rec.Keys[i]; k.State != events.KeyRevoked {
				k.State, k.Changed, k.By = events.KeyRevoked, now, by
			}
		}
		rec.Rotating = false
		bound(rec)
		return true, nil
	})
}

// Rotate enrolls key id of host beside its current key, by an operator
// who names it (ErrNoKeyNamed without id): both are accepted until the
// host's first authentic evidence signed by the new key, which revokes
// the others (Admit), or until `host approve` of it. The collector can
// so restart with its new key at any time without a refused event.
func (h *Hosts) Rotate(ctx context.Context, host, id, by string) error {
	if id == "" {
		return ErrNoKeyNamed
	}
	if _, err := dsse.ParseKeyID(id); err != nil {
		return err
	}
	return h.update(ctx, host, func(rec *events.HostRecord) (bool, error) {
		if !rec.Enrolled() {
			return false, fmt.Errorf("%w with an enrolled key: %s (approve its key instead)", ErrNoSuchHost, host)
		}
		now := h.now().UTC()
		k := rec.KeyOf(id)
		switch {
		case k == nil:
			rec.Keys = append(rec.Keys, events.HostKey{Key: id, FirstSeen: now})
			k = &rec.Keys[len(rec.Keys)-1]
		case k.State == events.KeyRevoked:
			return false, fmt.Errorf("%w: %s of host %s (a revoked key is not approved again)", ErrRevoked, id, host)
		case k.State == events.KeyEnrolled:
			return false, fmt.Errorf("%s is already the enrolled key of host %s", id, host)
		}
		k.State, k.Changed, k.By = events.KeyEnrolled, now, by
		rec.Rotating = true
		bound(rec)
		return true, nil
	})
}

// rotated ends a rotation when id, an enrolled key of rec, is the newest
// one enrolled: the host signs with it, so the others are revoked. It
// reports whether rec changed.
func rotated(rec *events.HostRecord, id string, now time.Time) bool {
	if !rec.Rotating {
		return false
	}
	newest := -1
	for i, k := range rec.Keys {
		if k.State == events.KeyEnrolled && (newest < 0 || k.Changed.After(rec.Keys[newest].Changed)) {
			newest = i
		}
	}
	if newest < 0 || rec.Keys[newest].Key != id {
		return false
	}
	for i := range rec.Keys {
		if k := &rec.Keys[i]; k.Key != id && k.State == events.KeyEnrolled {
			k.State, k.Changed, k.By = events.KeyRevoked, now, "rotation"
		}
	}
	rec.Rotating = false
	bound(rec)
	return true
}

// List returns every host's record, by host name.
func (h *Hosts) List(ctx context.Context) ([]events.HostRecord, error) {
	lister, err := h.kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hosts: %w", err)
	}
	var out []events.HostRecord
	for key := range lister.Keys() {
		if strings.HasPrefix(key, rejectionsPrefix) {
			continue
		}
		e, err := h.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("hosts: %w", err)
		}
		rec, err := decodeHostRecord(e.Value())
		if err != nil {
			return nil, fmt.Errorf("hosts: %s: %w", key, err)
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out, nil
}

// ErrNotEnrolledKey is the refusal of a signed reply that names a key the
// registry does not hold as the host's enrolled key.
var ErrNotEnrolledKey = errors.New("not an enrolled key of the host")

// EnrolledKeys returns the key lookup for host's signed replies (collect
// now): the keys the registry holds as host's enrolled keys, and nothing
// else (ErrNotEnrolledKey); an error when host has none.
func (h *Hosts) EnrolledKeys(ctx context.Context, host string) (func(keyID string) (ed25519.PublicKey, error), error) {
	rec, err := h.Get(ctx, host)
	if errors.Is(err, ErrNoSuchHost) {
		return nil, fmt.Errorf("host %s is not enrolled: the registry has no key to check its reply with (runtimetruth host approve %s --key KEY)",
			snapshot.Printable(host), snapshot.ShellQuote(host))
	}
	if err != nil {
		return nil, err
	}
	enrolled := map[string]bool{}
	pending := 0
	for _, k := range rec.Keys {
		switch k.State {
		case events.KeyEnrolled:
			enrolled[k.Key] = true
		case events.KeyPending:
			pending++
		}
	}
	if len(enrolled) == 0 {
		return nil, fmt.Errorf("host %s is not enrolled: none of its %d key(s) is enrolled (%d pending; runtimetruth host approve %s)",
			snapshot.Printable(host), len(rec.Keys), pending, snapshot.ShellQuote(host))
	}
	return func(id string) (ed25519.PublicKey, error) {
		if !enrolled[id] {
			return nil, ErrNotEnrolledKey
		}
		return dsse.ParseKeyID(id)
	}, nil
}
