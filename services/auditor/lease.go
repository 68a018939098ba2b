package auditor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// BucketLeases is the key-value bucket of the writer leases: one key per
// audited stream and consumer ("auditor.EVIDENCE"), held by the one
// auditor that writes that stream's chains (topology.AuditorLeases).
const BucketLeases = topology.BucketAuditorLeases

// ErrLeaseHeld is returned by Start when another auditor instance holds
// the lease of a stream this one is configured to audit.
var ErrLeaseHeld = errors.New("another auditor writes this stream")

// ErrLeaseLost is returned by a commit after this auditor lost a stream's
// lease: another instance may be writing the chains now.
var ErrLeaseLost = errors.New("writer lease lost")

// leaseHolder is the value of a lease key: who writes the stream.
type leaseHolder struct {
	Instance string    `json:"instance"`
	Token    string    `json:"token"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Since    time.Time `json:"since"`
}

// leases are the writer leases of one auditor: acquired together at Start
// (before the heads are read from the sinks), renewed every TTL/3, checked
// before every commit, released at Shutdown. The bucket's MaxAge is the
// TTL, so the lease of an auditor that died lapses TTL after its last
// renewal; an auditor of the same Instance name takes its own lease over
// at once when that process is gone (a restart after a crash).
type leases struct {
	kv  jetstream.KeyValue
	ttl time.Duration
	me  leaseHolder
	val []byte

	mu      sync.Mutex
	revs    map[string]uint64 // key → revision of our last write
	renewed time.Time         // when every lease was last written
	lost    error             // set once a lease is lost
	onLost  func(error)

	stop chan struct{}
	done chan struct{}
}

// leaseKey is the lease key of a stream audited through consumer.
func leaseKey(consumer, stream string) string { return consumer + "." + stream }

// acquireLeases ensures the bucket and takes the lease of every stream,
// waiting while another instance holds one until ctx ends (then
// ErrLeaseHeld naming the holder). onLost is called once, from the renewal
// goroutine, if a lease is lost later.
func acquireLeases(ctx context.Context, js jetstream.JetStream, replicas int, ttl time.Duration, instance, consumer string,
	streams []string, onLost func(error)) (*leases, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, topology.AuditorLeases(replicas, ttl))
	if err != nil {
		return nil, fmt.Errorf("ensure bucket %s: %w", BucketLeases, err)
	}
	host, _ := os.Hostname()
	l := &leases{kv: kv, ttl: ttl, revs: map[string]uint64{}, onLost: onLost,
		me: leaseHolder{Instance: instance, Token: uuid.NewString(), Host: host, PID: os.Getpid(), Since: time.Now().UTC()}}
	if l.val, err = json.Marshal(l.me); err != nil {
		return nil, fmt.Errorf("lease value: %w", err)
	}
	for _, s := range streams {
		key := leaseKey(consumer, s)
		rev, err := l.take(ctx, key)
		if err != nil {
			l.release(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("lease %s: %w", key, err)
		}
		l.revs[key] = rev
	}
	l.renewed = time.Now()
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.renewLoop()
	return l, nil
}

// take acquires key: creates it, takes it over from an earlier process of
// the same instance, or waits for the holder's lease to lapse.
func (l *leases) take(ctx context.Context, key string) (uint64, error) {
	wait := min(l.ttl/6, time.Second)
	for {
		rev, err := l.kv.Create(ctx, key, l.val)
		if err == nil {
			return rev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return 0, err
		}
		e, err := l.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue // lapsed between the two calls
		case err != nil:
			return 0, err
		}
		var h leaseHolder
		if json.Unmarshal(e.Value(), &h) == nil && l.crashed(h) {
			if rev, err := l.kv.Update(ctx, key, l.val, e.Revision()); err == nil {
				return rev, nil
			}
			continue // changed meanwhile: look again
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w: held by instance %q on %s (pid %d) since %s", ErrLeaseHeld, h.Instance, h.Host, h.PID,
				h.Since.Format(time.RFC3339))
		case <-time.After(wait):
		}
	}
}

// crashed reports whether h is an earlier process of this instance on
// this host that is gone (a restart after a crash): its lease is taken
// over at once rather than waited out.
func (l *leases) crashed(h leaseHolder) bool {
	if h.Instance != l.me.Instance || h.Host != l.me.Host || h.PID <= 0 || h.Token == l.me.Token {
		return false
	}
	return errors.Is(syscall.Kill(h.PID, 0), syscall.ESRCH)
}

// renewLoop renews the leases every TTL/3 until release.
func (l *leases) renewLoop() {
	defer close(l.done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.ttl/3)
			err := l.renew(ctx)
			cancel()
			if errors.Is(err, ErrLeaseLost) {
				l.onLost(err)
				return
			}
		}
	}
}

// abandon stops the renewals and leaves the leases to lapse (a crash).
func (l *leases) abandon() {
	if l.stop != nil {
		close(l.stop)
		<-l.done
		l.stop = nil
	}
}

// renew rewrites every lease at the revision last written; a key another
// instance wrote (or that lapsed and was taken) is lost. A lease not
// renewed for a whole TTL (NATS unreachable) is lost too: another instance
// may have taken it.
func (l *leases) renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return l.lost
	}
	start := time.Now()
	for key, rev := range l.revs {
		nrev, err := l.kv.Update(ctx, key, l.val, rev)
		if err != nil && mismatch(err) {
			// Our own renewal may have been written with its answer lost (a
			// reconnect): the lease is still ours if it holds our value,
			// token included, which no other process writes.
			if e, gerr := l.kv.Get(ctx, key); gerr == nil && bytes.Equal(e.Value(), l.val) {
				nrev, err = l.kv.Update(ctx, key, l.val, e.Revision())
			}
		}
		if err != nil {
			if mismatch(err) || time.Since(l.renewed) >= l.ttl {
				l.lost = fmt.Errorf("%w: %s: %w", ErrLeaseLost, key, err)
				return l.lost
			}
			return fmt.Errorf("renew lease %s: %w", key, err)
		}
		l.revs[key] = nrev
	}
	l.renewed = start
	return nil
}

// mismatch reports whether a lease write failed because the key is not at
// the revision written last.
func mismatch(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || strings.Contains(err.Error(), "wrong last sequence")
}

// check is the writer's fence, called before every commit: nil when every
// lease has at least half its TTL left (renewing first when not).
func (l *leases) check(ctx context.Context) error {
	l.mu.Lock()
	lost, fresh := l.lost, time.Since(l.renewed) < l.ttl/2
	l.mu.Unlock()
	switch {
	case lost != nil:
		return lost
	case fresh:
		return nil
	}
	return l.renew(ctx)
}

// release stops the renewals and deletes the leases still ours, so a
// standby takes over at once.
func (l *leases) release(ctx context.Context) {
	l.abandon()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost != nil {
		return
	}
	for key, rev := range l.revs {
		_ = l.kv.Delete(ctx, key, jetstream.LastRevision(rev))
	}
	l.revs = map[string]uint64{}
}
