package verifier

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// ErrReplayed is why evidence signed with a sequence number at or below
// the last one verified for its host and target by the same key is
// refused.
var ErrReplayed = errors.New("a replay: its signature's sequence number is not above the last verified one")

// ErrClockSkew is why evidence whose time is too far from the verifier's
// clock is refused.
var ErrClockSkew = errors.New("the evidence's time is too far from the verifier's clock")

// authenticator decides whether evidence is authentic (Config.Enrollment):
// signed, the signature checked over its claim with the key the key id
// names, that key the enrolled one of the host the evidence names in the
// registry, and its time within skew of now.
type authenticator struct {
	hosts *Hosts
	keys  *expandedKeys // of the keys of admitted evidence
	skew  time.Duration
	now   func() time.Time
	tel   *metrics
}

// checkBatch authenticates each item of a batch (its event and payload
// decoded), the signatures verified together (verifyAll): it sets an
// authentic item's sig and the ordering it signs (SignedBy, SignedSeq),
// and fails each other item with a permanent error naming why (counted
// by reason), or a transient one when the registry cannot be read, so
// the evidence is retried.
func (a *authenticator) checkBatch(items []*item, r *refusals) {
	pending := make([]*dsse.PendingSignature, len(items))
	errs := make([]error, len(items))
	for i, it := range items {
		pending[i], errs[i] = a.read(it.e, it.ev)
	}
	valid := verifyAll(pending, a.keys)
	for i, it := range items {
		var sig dsse.Signature
		err := errs[i]
		if err == nil {
			sig, err = pending[i].Verified(valid[i])
		}
		if err == nil {
			// The signature first: nothing unverified reaches the
			// registry, which pins (first-use) or records (pending) the
			// key it is given.
			err = a.hosts.Admit(it.ctx, it.ev.Host, sig.KeyID)
		}
		if err != nil {
			a.refuse(r, it, fmt.Errorf("authenticate evidence of %s: %w", it.ev.Host, err))
			continue
		}
		a.keys.add(pending[i].PublicKey)
		it.sig = sig
		it.ord.SignedBy, it.ord.SignedSeq = sig.KeyID, sig.Claim.Seq
	}
}

// refusals are the refusals of a batch, kept to be recorded together:
// one write of each host's rejection log per batch, however many of its
// events the batch refuses (a host sending junk or ever new keys at full
// speed costs the bucket a write a batch, not one an event).
type refusals struct {
	byHost map[string][]refusal
}

type refusal struct {
	it     *item
	reason string
	err    error
}

// refuse fails it with err: when err says why the evidence is not
// authentic, as a refusal to be recorded (record); else as it is (the
// registry could not be read: transient, retried).
func (a *authenticator) refuse(r *refusals, it *item, err error) {
	reason := rejectReason(err)
	if reason == "" {
		it.fail(err)
		return
	}
	if r.byHost == nil {
		r.byHost = map[string][]refusal{}
	}
	r.byHost[it.ev.Host] = append(r.byHost[it.ev.Host], refusal{it: it, reason: reason, err: err})
	it.fail(err) // settled here; record sets the result
}

// record adds the batch's refusals to their hosts' rejection logs, each
// log written once, at once, and settles each refused item: permanent,
// counted by reason, once recorded; transient when its host's log could
// not be written (the refusal is retried until it is recorded).
func (a *authenticator) record(ctx context.Context, r *refusals) {
	hosts := make([]string, 0, len(r.byHost))
	for host := range r.byHost {
		hosts = append(hosts, host)
	}
	eachAtOnce(len(hosts), func(i int) {
		host, rs := hosts[i], r.byHost[hosts[i]]
		logged := make([]Rejection, len(rs))
		for j, x := range rs {
			logged[j] = Rejection{Reason: x.reason, EvidenceID: x.it.e.ID()}
		}
		err := recordRejections(ctx, a.hosts.kv, host, a.now(), logged)
		for _, x := range rs {
			if err != nil {
				x.it.err = fmt.Errorf("record the rejection of evidence of %s: %w", host, err)
				continue
			}
			a.tel.reject(x.it.ctx, x.reason)
			x.it.err = natsbus.Permanent(fmt.Errorf("rejected evidence (%s): %w", x.reason, x.err))
		}
	})
}

// replayed checks sig against the latest verified evidence's record of
// the same host and target, refusing it as a replay.
func (a *authenticator) replayed(r *refusals, it *item, cur ordering) {
	if sig := it.sig; cur.SignedBy != sig.KeyID || sig.Claim.Seq > cur.SignedSeq {
		return
	}
	a.refuse(r, it, fmt.Errorf("%w: %d, last verified %d", ErrReplayed, it.sig.Claim.Seq, cur.SignedSeq))
}

// read checks e's time and reads its signature, up to the Ed25519 check.
func (a *authenticator) read(e event.Event, ev events.EvidenceCollected) (*dsse.PendingSignature, error) {
	if d := a.now().Sub(e.Time()); d > a.skew || d < -a.skew {
		return nil, fmt.Errorf("%w: %s off (at most %s)", ErrClockSkew, d.Round(time.Second), a.skew)
	}
	return dsse.ReadSignature(e, ev, func(id string) (ed25519.PublicKey, error) {
		pub, err := dsse.ParseKeyID(id)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", dsse.ErrBadSignature, err)
		}
		return pub, nil
	})
}

// rejectReason is the reason label of a refusal, or "" for an error that
// says nothing about the evidence (the registry could not be read).
func rejectReason(err error) string {
	for _, r := range []struct {
		err    error
		reason string
	}{
		{ErrClockSkew, "clock_skew"},
		{ErrReplayed, "replayed"},
		{dsse.ErrUnsigned, "unsigned"},
		{dsse.ErrBadSignature, "bad_signature"},
		{dsse.ErrClaim, "claim_mismatch"},
		{ErrKeyChanged, "key_changed"},
		{ErrNotEnrolled, "not_enrolled"},
		{ErrRevoked, "revoked"},
	} {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return ""
}
