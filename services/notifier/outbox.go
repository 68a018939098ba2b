package notifier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// MaxOutbox bounds the alert changes waiting for one receiver: one that
// stays down through a storm holds at most this many, and further ones
// are dropped and counted, not kept.
const MaxOutbox = 65536

// entry is an alert change waiting for a receiver.
type entry struct {
	// ID is derived from the receiver and the change (the alert, the
	// event that caused it, firing or resolved), so that the same change
	// is the same entry after a restart.
	ID, Receiver, Group string
	Created             time.Time
	Alert               Alert
}

// key is the entry's key in the bucket: outbox.<receiver>.<id>.
func (e entry) key() string { return "outbox." + e.Receiver + "." + e.ID }

// outbox holds the alert changes each receiver has not taken yet. Safe
// for concurrent use.
type outbox struct {
	mu      sync.Mutex
	entries map[string]*entry // by key
	count   map[string]int    // by receiver
	dropped uint64
	// dirty are the keys changed since last saved: present to put, absent
	// to delete.
	dirty map[string]bool
}

func newOutbox() *outbox {
	return &outbox{entries: map[string]*entry{}, count: map[string]int{}, dirty: map[string]bool{}}
}

// add queues a change for a receiver (its group the values of groupBy);
// false when the receiver holds its share.
func (o *outbox) add(receiver string, groupBy []string, a Alert, at time.Time) bool {
	state := "firing"
	if a.Resolved() {
		state = "resolved"
	}
	e := entry{Receiver: receiver, Created: at, Alert: a,
		ID: events.NotificationIDs.ID(receiver, a.Host, a.Target, a.Package, a.Name, a.Cause, state, a.EndsAt.UTC().Format(time.RFC3339Nano))}
	labels := a.Labels()
	parts := make([]string, len(groupBy))
	for i, l := range groupBy {
		parts[i] = l + "=" + labels[l]
	}
	e.Group = strings.Join(parts, ",")
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.entries[e.key()]; ok {
		return true
	}
	if o.count[receiver] >= MaxOutbox {
		o.dropped++
		return false
	}
	o.entries[e.key()] = &e
	o.count[receiver]++
	o.dirty[e.key()] = true
	return true
}

// restore adds a stored entry (at start), within its receiver's share.
func (o *outbox) restore(e entry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.entries[e.key()]; ok || o.count[e.Receiver] >= MaxOutbox {
		return
	}
	o.entries[e.key()] = &e
	o.count[e.Receiver]++
}

// groups returns a receiver's entries by group, each oldest first.
func (o *outbox) groups(receiver string) map[string][]entry {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string][]entry{}
	for _, e := range o.entries {
		if e.Receiver == receiver {
			out[e.Group] = append(out[e.Group], *e)
		}
	}
	for _, es := range out {
		slices.SortFunc(es, func(a, b entry) int { return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID)) })
	}
	return out
}

// remove forgets entries a receiver took (or refused for good).
func (o *outbox) remove(es []entry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range es {
		if _, ok := o.entries[e.key()]; ok {
			delete(o.entries, e.key())
			o.count[e.Receiver]--
			o.dirty[e.key()] = true
		}
	}
}

// unsaved returns the entries to store and the keys to delete.
func (o *outbox) unsaved() (put []entry, gone []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return unsaved(o.dirty, o.entries)
}

// saved marks what unsaved returned as stored, unless it changed since.
func (o *outbox) saved(put []entry, gone []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	saved(o.dirty, o.entries, entry.key, put, gone)
}

// receiver is a webhook receiver ready to send: its URL, signer and
// client read at start.
type receiver struct {
	cfg    WebhookConfig
	url    string
	signer *Signer
	client *http.Client
}

func newReceiver(c WebhookConfig) (*receiver, error) {
	u, err := secret("webhook "+c.Name+" url", c.URLFile, c.URLEnv)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		return nil, fmt.Errorf("webhook %s: the URL is not http(s)", c.Name)
	}
	r := &receiver{cfg: c, url: u, client: &http.Client{Timeout: c.Timeout}}
	s, err := secret("webhook "+c.Name+" secret", c.SecretFile, c.SecretEnv)
	if err != nil {
		return nil, err
	}
	if s != "" {
		if r.signer, err = NewSigner(s); err != nil {
			return nil, fmt.Errorf("webhook %s: %w", c.Name, err)
		}
	}
	return r, nil
}

// deliver sends r's groups when due, until ctx ends: a group's first
// change waits GroupWait, and a group sends at most once per
// GroupInterval (zero both: each change on its own). A 2xx takes the
// changes; a 5xx, 429, 408 or an unreachable receiver leaves them, and r
// is retried after a backoff doubling up to MaxBackoff; another answer
// drops them (counted, logged once per outage of that kind).
func (n *Notifier) deliver(ctx context.Context, r *receiver) {
	tick := time.NewTicker(min(max(r.cfg.GroupInterval/4, 20*time.Millisecond), 500*time.Millisecond))
	defer tick.Stop()
	last := map[string]time.Time{} // a group's last request
	var retryAt time.Time
	backoff := time.Duration(0)
	log := n.log.With("receiver", r.cfg.Name)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := n.set.Now()
		if now.Before(retryAt) {
			continue
		}
		groups := r.batches(n.outbox.groups(r.cfg.Name), last, now)
		for _, b := range groups {
			err := n.send(ctx, r, b, now)
			switch {
			case err == nil:
				last[b[0].Group], backoff = now, 0
				n.in.webhookSent.Add(ctx, int64(len(b)))
			case ctx.Err() != nil:
				return
			case errors.Is(err, errPermanent):
				log.Warn("notifier: webhook refused the alerts; they are dropped", "err", err, "alerts", len(b))
				n.outbox.remove(b)
				n.in.webhookFailed.Add(ctx, 1)
			default:
				if backoff == 0 {
					log.Warn("notifier: webhook unreachable; retrying", "err", err, "alerts", len(b))
				}
				backoff = min(max(2*backoff, time.Second), r.cfg.MaxBackoff)
				retryAt = now.Add(backoff)
				n.in.webhookFailed.Add(ctx, 1)
				n.in.retried.Add(ctx, 1)
			}
			if err != nil && !errors.Is(err, errPermanent) {
				break // the receiver is down: the other groups wait too
			}
		}
		if err := n.save(ctx); err != nil && ctx.Err() == nil {
			log.Warn("notifier: store the outbox", "err", err)
		}
	}
}

// batches are the requests due now: per group, its changes, or each on
// its own when r does not group.
func (r *receiver) batches(groups map[string][]entry, last map[string]time.Time, now time.Time) [][]entry {
	var out [][]entry
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		es := groups[g]
		if r.cfg.GroupWait == 0 && r.cfg.GroupInterval == 0 {
			for _, e := range es {
				out = append(out, []entry{e})
			}
			continue
		}
		if now.Before(es[0].Created.Add(r.cfg.GroupWait)) || now.Before(last[g].Add(r.cfg.GroupInterval)) {
			continue
		}
		out = append(out, es)
	}
	return out
}

// send posts a batch, its webhook-id derived from its changes (the same
// batch sent again, after a failure or a restart, has the same id), and
// forgets the changes once the receiver took them.
func (n *Notifier) send(ctx context.Context, r *receiver, b []entry, now time.Time) error {
	ids := make([]string, len(b))
	changes := make([]Alert, len(b))
	for i, e := range b {
		ids[i], changes[i] = e.ID, e.Alert
	}
	id := ids[0]
	if len(ids) > 1 {
		id = events.NotificationIDs.ID(append([]string{r.cfg.Name}, ids...)...)
	}
	group := map[string]string{}
	for _, l := range r.cfg.GroupBy {
		group[l] = b[0].Alert.Labels()[l]
	}
	body, err := body(r.cfg.Format, r.cfg.Name, group, changes)
	if err != nil {
		return fmt.Errorf("%w: %w", errPermanent, err)
	}
	if err := post(ctx, r.client, r.url, r.signer, id, now, body); err != nil {
		return err
	}
	n.outbox.remove(b)
	return nil
}
