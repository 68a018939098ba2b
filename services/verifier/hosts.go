package verifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
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

// Hosts is the host registry: one entry per host (events.HostRecord) in a
// key-value bucket, written with compare-and-set so that verifiers and
// operators changing one host at once never lose a change.
type Hosts struct {
	kv   jetstream.KeyValue
	mode Enrollment
	now  func() time.Time
	view *hostsView // the verifier's view of the bucket (registry.go); nil: none
}

// NewHosts is the registry in kv, enrolling new keys by mode.
func NewHosts(kv jetstream.KeyValue, mode Enrollment) *Hosts {
	return &Hosts{kv: kv, mode: mode, now: time.Now}
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
	var rec events.HostRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return events.HostRecord{}, 0, fmt.Errorf("host %s: record: %w", host, err)
	}
	if rec.Host != host {
		return events.HostRecord{}, 0, fmt.Errorf("host %s: the record is of host %q", host, rec.Host)
	}
	return rec, e.Revision(), nil
}

// update applies change to host's record (a new one when there is none)
// and writes it when change says to (updateJSON).
func (h *Hosts) update(ctx context.Context, host string, change func(rec *events.HostRecord) (write bool, err error)) error {
	return updateJSON(ctx, h.kv, hostKey(host), func(rec *events.HostRecord, found bool) (bool, error) {
		if !found {
			rec.Host = host
		} else if rec.Host != host {
			return false, fmt.Errorf("host %s: the record is of host %q", host, rec.Host)
		}
		return change(rec)
	})
}

// updateJSON reads the JSON record under key into a T (its zero value
// when there is none: found false), applies change and writes the record
// when change says to, by compare-and-set on the revision read, reading
// again when another writer got there first; it returns change's error
// (what to report) once written, or why it could not be.
func updateJSON[T any](ctx context.Context, kv jetstream.KeyValue, key string, change func(rec *T, found bool) (write bool, err error)) error {
	for attempt := 0; ; attempt++ {
		var rec T
		var rev uint64
		e, err := kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return fmt.Errorf("%s/%s: %w", kv.Bucket(), key, err)
		default:
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				return fmt.Errorf("%s/%s: record: %w", kv.Bucket(), key, err)
			}
			rev = e.Revision()
		}
		write, cerr := change(&rec, rev != 0)
		if !write {
			return cerr
		}
		value, err := json.Marshal(&rec)
		if err != nil {
			return fmt.Errorf("%s/%s: %w", kv.Bucket(), key, err)
		}
		if rev == 0 {
			_, err = kv.Create(ctx, key, value)
		} else {
			_, err = kv.Update(ctx, key, value, rev)
		}
		if err == nil {
			return cerr
		}
		if attempt < 8 && (errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)) {
			continue
		}
		return fmt.Errorf("%s/%s: write: %w", kv.Bucket(), key, err)
	}
}

// Admit decides whether evidence of host signed by key id is authentic:
// nil when the registry holds the key as the host's enrolled key. A key
// it has not seen is recorded: pinned (enrolled, by "first-use") when the
// mode is first-use and the host has no key, no rotation pending and was
// never revoked; else pending (ErrNotEnrolled, or ErrKeyChanged when the
// host has an enrolled key). A pending or revoked key is refused
// (ErrNotEnrolled, ErrRevoked). A key the verifier's view of the bucket
// holds as enrolled is admitted without reading the bucket (hostsView).
func (h *Hosts) Admit(ctx context.Context, host, id string) error {
	if h.view != nil && h.view.enrolled(host, id) {
		return nil
	}
	return h.update(ctx, host, func(rec *events.HostRecord) (bool, error) {
		if k := rec.KeyOf(id); k != nil {
			switch k.State {
			case events.KeyEnrolled:
				return false, nil
			case events.KeyRevoked:
				return false, fmt.Errorf("%w: %s of host %s", ErrRevoked, id, host)
			}
			return false, fmt.Errorf("%w: %s of host %s is pending approval", ErrNotEnrolled, id, host)
		}
		now := h.now().UTC()
		k := events.HostKey{Key: id, State: events.KeyPending, FirstSeen: now, Changed: now, By: "first-use"}
		fresh := len(rec.Keys) == 0 && !rec.Rotating
		if h.mode == EnrollFirstUse && fresh {
			k.State = events.KeyEnrolled
			rec.Keys = append(rec.Keys, k)
			return true, nil
		}
		rec.Keys = append(rec.Keys, k)
		if rec.Enrolled() {
			return true, fmt.Errorf("%w: %s of host %s waits for approval", ErrKeyChanged, id, host)
		}
		return true, fmt.Errorf("%w: %s of host %s waits for approval", ErrNotEnrolled, id, host)
	})
}

// Approve enrolls a key of host, by an operator: id, or the host's one
// pending key when id is empty (an error when it has none or several). A
// key the registry has not seen is added (enrolled before its first
// evidence). When the host was rotating, or the approved key replaces
// an enrolled one, the host's other keys are revoked.
func (h *Hosts) Approve(ctx context.Context, host, id, by string) (events.HostKey, error) {
	if id != "" {
		if _, err := events.ParseKeyID(id); err != nil {
			return events.HostKey{}, err
		}
	}
	var approved events.HostKey
	err := h.update(ctx, host, func(rec *events.HostRecord) (bool, error) {
		if id == "" {
			var pending []string
			for _, k := range rec.Keys {
				if k.State == events.KeyPending {
					pending = append(pending, k.Key)
				}
			}
			if len(pending) != 1 {
				return false, fmt.Errorf("host %s has %d pending keys: name one with --key", host, len(pending))
			}
			id = pending[0]
		}
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
		return true, nil
	})
	return approved, err
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
		return true, nil
	})
}

// Rotate tells the registry that host will sign with a new key: it
// waits as pending, even under first-use, and approving it revokes the
// current one (which stays accepted until then).
func (h *Hosts) Rotate(ctx context.Context, host string) error {
	return h.update(ctx, host, func(rec *events.HostRecord) (bool, error) {
		if len(rec.Keys) == 0 {
			return false, fmt.Errorf("%w: %s", ErrNoSuchHost, host)
		}
		rec.Rotating = true
		return true, nil
	})
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
		var rec events.HostRecord
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return nil, fmt.Errorf("hosts: %s: %w", key, err)
		}
		out = append(out, rec)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out, nil
}
