package notifier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/strictjson"
)

// BucketAlerts is the key-value bucket of the notifier's alerts: one key
// per alert, <host token>.<digest of target and package>, so that a
// restarted notifier resolves what it fired before it stopped.
const BucketAlerts = "notifier-alerts"

// alertsBucket is the bucket's definition (the notifier creates it).
func alertsBucket(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: BucketAlerts, Description: "the notifier's alerts, firing or resolved and not yet sent",
		History: 1, MaxValueSize: 16 << 10, Storage: jetstream.FileStorage, Replicas: replicas}
}

// alertKey is an alert's key in the bucket.
func alertKey(k Key) string {
	sum := sha256.Sum256([]byte(k.Target + "\x00" + k.Package))
	return events.Token(k.Host) + "." + hex.EncodeToString(sum[:16])
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

func encodeAlert(a Alert) ([]byte, error) {
	return json.Marshal(storedAlert{Version: storedVersion, Host: a.Host, Target: a.Target, Package: a.Package, Name: a.Name, Kind: a.Kind,
		Severity: a.Severity, Summary: a.Summary, Description: a.Description, StartsAt: a.StartsAt, EndsAt: a.EndsAt, Cause: a.Cause})
}

func decodeAlert(key string, b []byte) (Alert, error) {
	var s storedAlert
	if err := strictjson.Decode(b, &s); err != nil {
		return Alert{}, fmt.Errorf("alert %s: %w", key, err)
	}
	if s.Version != storedVersion {
		return Alert{}, fmt.Errorf("alert %s: version %d, want %d", key, s.Version, storedVersion)
	}
	a := Alert{Key: Key{Host: s.Host, Target: s.Target, Package: s.Package}, Name: s.Name, Kind: s.Kind, Severity: s.Severity,
		Summary: s.Summary, Description: s.Description, StartsAt: s.StartsAt, EndsAt: s.EndsAt, Cause: s.Cause}
	if alertKey(a.Key) != key {
		return Alert{}, fmt.Errorf("alert %s: the record is of another alert (%s)", key, alertKey(a.Key))
	}
	return a, nil
}

// save stores what changed in alerts since it was last saved.
func save(ctx context.Context, kv jetstream.KeyValue, alerts *Alerts) error {
	put, gone := alerts.Unsaved()
	var errs []error
	for _, a := range put {
		b, err := encodeAlert(a)
		if err == nil {
			_, err = kv.Put(ctx, alertKey(a.Key), b)
		}
		errs = append(errs, err)
	}
	for _, k := range gone {
		err := kv.Delete(ctx, alertKey(k))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err = nil
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("save the alerts: %w", err)
	}
	alerts.Saved(put, gone)
	return nil
}

// load restores the stored alerts; a record that does not read is
// skipped and counted.
func load(ctx context.Context, kv jetstream.KeyValue, alerts *Alerts) (skipped int, err error) {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return 0, fmt.Errorf("list the alerts: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return skipped, fmt.Errorf("read alert %s: %w", key, err)
		}
		a, err := decodeAlert(key, e.Value())
		if err != nil {
			skipped++
			continue
		}
		alerts.Restore(a)
	}
	return skipped, nil
}
