package verifier

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

// ErrClockSkew is why evidence whose time is too far from the verifier's
// clock is refused.
var ErrClockSkew = errors.New("the evidence's time is too far from the verifier's clock")

// authenticator decides whether evidence is authentic (Config.Enrollment):
// signed, the signature checked over its claim with the key the key id
// names, that key the enrolled one of the host the evidence names in the
// registry, and its time within skew of now.
type authenticator struct {
	hosts *Hosts
	skew  time.Duration
	now   func() time.Time
	tel   *metrics
}

// check returns nil for authentic evidence; a permanent error naming why
// for evidence that is not (counted by reason); a transient one when the
// registry cannot be read, so the evidence is retried.
func (a *authenticator) check(ctx context.Context, e event.Event, ev events.EvidenceCollected) error {
	err := a.authenticate(ctx, e, ev)
	if err == nil {
		return nil
	}
	reason := rejectReason(err)
	if reason == "" {
		return fmt.Errorf("authenticate evidence of %s: %w", ev.Host, err)
	}
	a.tel.reject(ctx, reason)
	return natsbus.Permanent(fmt.Errorf("rejected evidence (%s): %w", reason, err))
}

func (a *authenticator) authenticate(ctx context.Context, e event.Event, ev events.EvidenceCollected) error {
	if d := a.now().Sub(e.Time()); d > a.skew || d < -a.skew {
		return fmt.Errorf("%w: %s off (at most %s)", ErrClockSkew, d.Round(time.Second), a.skew)
	}
	// The signature first: nothing unverified reaches the registry, which
	// pins (first-use) or records (pending) the key it is given.
	sig, err := events.VerifySignature(e, ev, func(id string) (ed25519.PublicKey, error) {
		pub, err := events.ParseKeyID(id)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", events.ErrBadSignature, err)
		}
		return pub, nil
	})
	if err != nil {
		return err
	}
	return a.hosts.Admit(ctx, ev.Host, sig.KeyID)
}

// rejectReason is the reason label of a refusal, or "" for an error that
// says nothing about the evidence (the registry could not be read).
func rejectReason(err error) string {
	for _, r := range []struct {
		err    error
		reason string
	}{
		{ErrClockSkew, "clock_skew"},
		{events.ErrUnsigned, "unsigned"},
		{events.ErrBadSignature, "bad_signature"},
		{events.ErrClaim, "claim_mismatch"},
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
