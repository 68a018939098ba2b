package verifier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/pkg/platform/retry"
)

// hostsView is an in-memory view of the host records of the hosts
// bucket, fed by a watch of the bucket, so that Hosts.Admit answers from
// memory what it can (admit): a key the view holds as its host's enrolled
// key, and a revoked one: authentic evidence costs no registry round
// trip. Anything else (an unknown host or key, a pending key, a rotating
// host, a record it cannot read, no view at all while the watch starts
// again) goes through Admit's read and compare-and-set on the bucket, so
// first-use pinning, approvals and the recording of pending keys stay
// exact; a new key past a host's pending ones costs that read and no
// write. A change to a record (a revocation, an
// approval that replaces a key) takes effect as soon as the watch
// delivers it; while the watch is down the view is empty.
//
// The rejection logs (rejectionsPrefix) share the bucket; the watch
// leaves them out (their keys have two tokens, a host record's one), and
// the view skips any that come.
type hostsView struct {
	kv  jetstream.KeyValue
	log *slog.Logger

	mu    sync.RWMutex
	hosts map[string]viewedHost // bucket key (hostKey) → what the view knows
}

// viewedHost is a host record as the view keeps it.
type viewedHost struct {
	host     string
	rec      events.HostRecord // the record, its keys at most 1 + MaxPendingKeys + MaxRevokedKeys
	rotating bool              // HostRecord.Rotating
	rev      uint64            // the record's revision
}

func newHostsView(kv jetstream.KeyValue, log *slog.Logger) *hostsView {
	return &hostsView{kv: kv, log: log, hosts: map[string]viewedHost{}}
}

// admit decides, when it can from memory, whether evidence of host signed
// by key id is authentic (Hosts.Admit): an enrolled key is; a revoked one
// is not (it is never approved again, so a view behind the bucket is right
// about it). Anything else (a host the view does not hold, a rotating one,
// a pending or new key, which an approval the view has not caught up with
// may have enrolled) is left to Admit's read, which writes only a new
// pending key (never past MaxPendingKeys: pendingFull).
func (v *hostsView) admit(host, id string) (decided bool, err error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	h, ok := v.hosts[hostKey(host)]
	if !ok || h.host != host || h.rotating {
		return false, nil // a rotation ends on the new key's first evidence (Admit)
	}
	if k := h.rec.KeyOf(id); k != nil {
		switch k.State {
		case events.KeyEnrolled:
			return true, nil
		case events.KeyRevoked:
			return true, fmt.Errorf("%w: %s of host %s", ErrRevoked, id, host)
		}
	}
	return false, nil
}

// revision is the revision of host's record the view holds (0: none).
func (v *hostsView) revision(host string) uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.hosts[hostKey(host)].rev
}

// run keeps the view until ctx ends, starting the watch again after an
// error (the view is emptied meanwhile). It reports to duties
// (DutyRegistry): a failure when the watch cannot start or ends, success
// once it has delivered the current records.
func (v *hostsView) run(ctx context.Context, duties *health.Duties) {
	for ctx.Err() == nil {
		err := v.watch(ctx, func() { duties.Report(ctx, DutyRegistry, nil) })
		v.reset()
		if ctx.Err() != nil {
			return
		}
		v.log.WarnContext(ctx, "watch the host registry", "err", err)
		duties.Report(ctx, DutyRegistry, err)
		retry.Sleep(ctx, time.Second)
	}
}

func (v *hostsView) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	clear(v.hosts)
}

// watch applies the bucket's host records, the current ones then every
// change, until ctx ends or the watch does; current is called once the
// current ones are applied.
func (v *hostsView) watch(ctx context.Context, current func()) error {
	// "*": the keys of one token, the host records; not the rejection
	// logs (rejections.<host>), written on every refusal.
	w, err := v.kv.Watch(ctx, "*")
	if err != nil {
		return fmt.Errorf("watch %s: %w", v.kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				return errors.New("the watch ended")
			}
			if e == nil { // the current records are all delivered
				current()
				continue
			}
			v.apply(ctx, e)
		}
	}
}

// apply takes in one entry of the watch: a host record, or its deletion.
func (v *hostsView) apply(ctx context.Context, e jetstream.KeyValueEntry) {
	key := e.Key()
	if strings.HasPrefix(key, rejectionsPrefix) {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.hosts, key)
	if e.Operation() != jetstream.KeyValuePut {
		return
	}
	rec, err := decodeHostRecord(e.Value())
	if err != nil || hostKey(rec.Host) != key {
		// Left out of the view: Admit reads it, and says what is wrong.
		v.log.WarnContext(ctx, "a host record the view leaves out", "key", key, "err", err)
		return
	}
	v.hosts[key] = viewedHost{host: rec.Host, rec: rec, rotating: rec.Rotating, rev: e.Revision()}
}
