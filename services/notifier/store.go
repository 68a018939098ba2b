package notifier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

// BucketAlerts is the key-value bucket of the notifier's state: one key
// per alert, alert.<host token>.<digest of target and package>, so that a
// restarted notifier resolves what it fired before it stopped, and one per
// alert change a webhook receiver has not taken,
// outbox.<receiver>.<change id>, so that it is sent after a restart.
const BucketAlerts = "notifier-alerts"

// alertsBucket is the bucket's definition (the notifier creates it).
func alertsBucket(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: BucketAlerts, Description: "the notifier's alerts, firing or resolved and not yet sent",
		History: 1, MaxValueSize: 16 << 10, Storage: jetstream.FileStorage, Replicas: replicas}
}

// alertKey is an alert's key in the bucket.
func alertKey(k Key) string {
	sum := sha256.Sum256([]byte(k.Target + "\x00" + k.Package))
	return "alert." + events.Token(k.Host) + "." + hex.EncodeToString(sum[:16])
}

// storedAlert is an alert as the bucket holds it: a version, then the
// alert.
type storedAlert struct {
	Version     int       `json:"version"`
	Host        string    `json:"host"`
	Target      string    `json:"target"`
	Package     string    `json:"package,omitempty"`
	Name        string    `json:"name"`
	Kind        string    `json:"kind"`
	Severity    string    `json:"severity"`
	Summary     string    `json:"summary"`
	Description string    `json:"description"`
	StartsAt    time.Time `json:"starts_at"`
	EndsAt      time.Time `json:"ends_at"`
	Cause       string    `json:"cause"`
}

const storedVersion = 1

// storedOf is a's stored form.
func storedOf(a Alert) storedAlert {
	return storedAlert{Version: storedVersion, Host: a.Host, Target: a.Target, Package: a.Package, Name: a.Name, Kind: a.Kind,
		Severity: a.Severity, Summary: a.Summary, Description: a.Description, StartsAt: a.StartsAt, EndsAt: a.EndsAt, Cause: a.Cause}
}

// alert is the alert s stores.
func (s storedAlert) alert() Alert {
	return Alert{Key: Key{Host: s.Host, Target: s.Target, Package: s.Package}, Name: s.Name, Kind: s.Kind, Severity: s.Severity,
		Summary: s.Summary, Description: s.Description, StartsAt: s.StartsAt, EndsAt: s.EndsAt, Cause: s.Cause}
}

func encodeAlert(a Alert) ([]byte, error) { return json.Marshal(storedOf(a)) }

func decodeAlert(key string, b []byte) (Alert, error) {
	var s storedAlert
	if err := strictjson.Decode(b, &s); err != nil {
		return Alert{}, fmt.Errorf("alert %s: %w", key, err)
	}
	if s.Version != storedVersion {
		return Alert{}, fmt.Errorf("alert %s: version %d, want %d", key, s.Version, storedVersion)
	}
	a := s.alert()
	if alertKey(a.Key) != key {
		return Alert{}, fmt.Errorf("alert %s: the record is of another alert (%s)", key, alertKey(a.Key))
	}
	return a, nil
}

// storedEntry is an outbox entry as the bucket holds it.
type storedEntry struct {
	Version  int         `json:"version"`
	ID       string      `json:"id"`
	Receiver string      `json:"receiver"`
	Group    string      `json:"group"`
	Created  time.Time   `json:"created"`
	Alert    storedAlert `json:"alert"`
}

func encodeEntry(e entry) ([]byte, error) {
	return json.Marshal(storedEntry{Version: storedVersion, ID: e.ID, Receiver: e.Receiver, Group: e.Group, Created: e.Created,
		Alert: storedOf(e.Alert)})
}

func decodeEntry(key string, b []byte) (entry, error) {
	var s storedEntry
	if err := strictjson.Decode(b, &s); err != nil {
		return entry{}, fmt.Errorf("outbox %s: %w", key, err)
	}
	if s.Version != storedVersion || s.Alert.Version != storedVersion {
		return entry{}, fmt.Errorf("outbox %s: version %d, want %d", key, s.Version, storedVersion)
	}
	e := entry{ID: s.ID, Receiver: s.Receiver, Group: s.Group, Created: s.Created, Alert: s.Alert.alert()}
	if e.key() != key {
		return entry{}, fmt.Errorf("outbox %s: the record is of another entry (%s)", key, e.key())
	}
	return e, nil
}

// save stores what changed since it was last saved: the alerts, and the
// outbox.
func (n *Notifier) save(ctx context.Context) error {
	put, gone := n.alerts.Unsaved()
	goneKeys := make([]string, len(gone))
	for i, k := range gone {
		goneKeys[i] = alertKey(k)
	}
	if err := saveRecords(ctx, n.kv, put, goneKeys, func(a Alert) string { return alertKey(a.Key) }, encodeAlert); err != nil {
		return fmt.Errorf("save the alerts: %w", err)
	}
	n.alerts.Saved(put, gone)
	eput, egone := n.outbox.unsaved()
	if err := saveRecords(ctx, n.kv, eput, egone, entry.key, encodeEntry); err != nil {
		return fmt.Errorf("save the outbox: %w", err)
	}
	n.outbox.saved(eput, egone)
	return nil
}

// unsaved splits the keys of dirty (changed since last stored): the
// records of items to store, and the keys gone from items, to delete.
func unsaved[K comparable, V any](dirty map[K]bool, items map[K]*V) (put []V, gone []K) {
	for k := range dirty {
		if v, ok := items[k]; ok {
			put = append(put, *v)
		} else {
			gone = append(gone, k)
		}
	}
	return put, gone
}

// saved clears from dirty what unsaved returned and was stored, as it
// still is: a record unchanged since, a key still gone.
func saved[K, V comparable](dirty map[K]bool, items map[K]*V, key func(V) K, put []V, gone []K) {
	for _, v := range put {
		if cur, ok := items[key(v)]; ok && *cur == v {
			delete(dirty, key(v))
		}
	}
	for _, k := range gone {
		if _, ok := items[k]; !ok {
			delete(dirty, k)
		}
	}
}

// saveRecords puts each record of put under its key, encoded, and
// deletes the keys gone; it tries every one and reports each failure.
func saveRecords[V any](ctx context.Context, kv jetstream.KeyValue, put []V, gone []string, key func(V) string,
	encode func(V) ([]byte, error)) error {
	var errs []error
	for _, v := range put {
		b, err := encode(v)
		if err == nil {
			_, err = kv.Put(ctx, key(v), b)
		}
		errs = append(errs, err)
	}
	for _, k := range gone {
		errs = append(errs, deleteKey(ctx, kv, k))
	}
	return errors.Join(errs...)
}

func deleteKey(ctx context.Context, kv jetstream.KeyValue, key string) error {
	err := kv.Delete(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	return err
}

// load restores the stored alerts and outbox entries; a record that does
// not read is skipped and counted.
func (n *Notifier) load(ctx context.Context) (skipped int, err error) {
	lister, err := n.kv.ListKeysFiltered(ctx, "alert.>", "outbox.>")
	if err != nil {
		return 0, fmt.Errorf("list the stored alerts: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	for key := range lister.Keys() {
		e, err := n.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return skipped, fmt.Errorf("read %s: %w", key, err)
		}
		if strings.HasPrefix(key, "outbox.") {
			en, err := decodeEntry(key, e.Value())
			if err != nil {
				skipped++
				continue
			}
			n.outbox.restore(en)
			continue
		}
		a, err := decodeAlert(key, e.Value())
		if err != nil {
			skipped++
			continue
		}
		n.alerts.Restore(a)
	}
	return skipped, nil
}
