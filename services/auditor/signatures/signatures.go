// Package signatures re-checks the evidence signatures audit links carry
// against the host registry, beside the chain's verification: Evidence is
// a chain.Inspector (chain.Options.Inspector) that, for each link of a
// signed event, checks the DSSE envelope, the claim against what the link
// records, and the key's enrolment (Registry, Hosts).
package signatures

import (
	"errors"
	"fmt"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// Registry says which keys were a host's: the host registry
// (events.HostRecord).
type Registry interface {
	// Enrolled returns nil when key (a key id) was an enrolled key of
	// host at time at, else why not.
	Enrolled(host, key string, at time.Time) error
}

// Hosts is a Registry over the host registry's records, as the verifier's
// hosts bucket holds them and `runtimetruth host list --json` prints them.
//
// A key counts as enrolled at a time when it is enrolled now, or when it
// was revoked after that time (the record keeps when a key's state last
// changed, not its whole history: a key revoked while still pending counts
// too, before its revocation). A pending key, a key the record does not
// hold and a host it does not know are refused.
type Hosts map[string]events.HostRecord

// NewHosts indexes records by host.
func NewHosts(recs []events.HostRecord) Hosts {
	h := make(Hosts, len(recs))
	for _, r := range recs {
		h[r.Host] = r
	}
	return h
}

// Enrolled implements Registry.
func (h Hosts) Enrolled(host, key string, at time.Time) error {
	rec, ok := h[host]
	if !ok {
		return fmt.Errorf("host %q is not in the registry", host)
	}
	k := rec.KeyOf(key)
	if k == nil {
		return fmt.Errorf("key %s is not a key of host %q", key, host)
	}
	switch k.State {
	case events.KeyEnrolled:
		return nil
	case events.KeyRevoked:
		if at.Before(k.Changed) {
			return nil
		}
		return fmt.Errorf("key %s of host %q was revoked at %s, before the event's time %s", key, host,
			k.Changed.UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("key %s of host %q is %s, never enrolled", key, host, k.State)
}

// signedTypes are the event types collectors sign (current and earlier
// versions): a link of one of them without a signature is counted as
// unsigned.
var signedTypes = map[string]bool{
	events.TypeEvidenceCollected: true,
	events.TypeRunnableModified:  true,
	events.TypeCollectionFailed:  true,
}

// Evidence checks the evidence signatures links carry, as the
// chain.Inspector of a verification (chain.Options.Inspector):
// for each link whose event has one (the rtsignature attribute), the DSSE
// envelope verifies with the key its key id names, the claim says what the
// link records (id, type, source, subject, time, the data's host and
// target, and the payload digest the auditor recorded, data_sha256), and
// the registry holds the key as the claimed host's, enrolled at the
// event's time. It names the first link that fails. A link of an event
// type collectors sign without a signature is counted as unsigned, and is a
// failure only with Require; links of other events (verdicts, baselines,
// auditor-made records) are counted apart.
type Evidence struct {
	Registry Registry
	// Require makes an unsigned link of an event type collectors sign a
	// failure.
	Require bool

	signed, unsigned, other int
	bad                     *BadSignature
}

// EvidenceReport is what Evidence found.
type EvidenceReport struct {
	// Signed counts links whose signature held; Unsigned links of a type
	// collectors sign without one; Other links of other events.
	Signed   int
	Unsigned int
	Other    int
	// Bad is the first link whose signature does not hold (or, with
	// Require, the first unsigned one); nil when none.
	Bad *BadSignature
}

// BadSignature names a link whose evidence signature does not hold.
type BadSignature struct {
	Chain  string
	Seq    uint64
	ID     string
	Reason string
	Pos    chain.Position
}

func (b *BadSignature) Error() string {
	return fmt.Sprintf("chain %q seq %d: event %q: %s", b.Chain, b.Seq, b.ID, b.Reason)
}

// Kinds of the findings of Evidence.Inspect (0 is chain's "not
// inspected").
const (
	evSigned uint8 = iota + 1
	evUnsigned
	evOther
	evBad
)

// errUnsigned is the reason of an unsigned link under Require.
var errUnsigned = errors.New("unsigned (a signature is required)")

// Inspect implements chain.Inspector: it checks a link's event, on the
// hashing goroutines.
func (e *Evidence) Inspect(event []byte) chain.Finding {
	kind, err := e.classify(event)
	return chain.Finding{Kind: kind, Err: err}
}

func (e *Evidence) classify(event []byte) (uint8, error) {
	ev, err := jsontree.Parse(event)
	if err != nil {
		return evBad, fmt.Errorf("event: %w", err)
	}
	if r, ok := ev.Get("rejected"); ok && r.Kind == jsontree.Bool && r.Bool {
		return evOther, nil
	}
	attrs, _ := ev.Get("attributes")
	env := text(attrs, events.ExtSignature)
	if env == "" {
		spec, ok := events.Lookup(text(attrs, "type"))
		if ok && signedTypes[spec.Current()] {
			if e.Require {
				return evBad, errUnsigned
			}
			return evUnsigned, nil
		}
		return evOther, nil
	}
	sig, err := events.OpenSignature(env)
	if err != nil {
		return evBad, err
	}
	data, _ := ev.Get("data")
	at, err := time.Parse(time.RFC3339Nano, text(attrs, "time"))
	if err != nil {
		return evBad, fmt.Errorf("the link's time attribute: %w", err)
	}
	want := events.Claim{ID: text(attrs, "id"), Type: text(attrs, "type"), Source: text(attrs, "source"),
		Subject: text(attrs, "subject"), Time: sig.Claim.Time, Host: text(data, "host"),
		PayloadSHA256: text(ev, link.DataDigestMember)}
	if t, ok := data.Get("target"); ok && t.Kind == jsontree.Object {
		want.Target = &events.Target{Kind: text(t, "kind"), Identifier: text(t, "identifier")}
	}
	if ct, err := time.Parse(time.RFC3339Nano, sig.Claim.Time); err != nil || !ct.Equal(at) {
		return evBad, fmt.Errorf("%w: time differs", events.ErrClaim)
	}
	if field := events.ClaimDiff(sig.Claim, want); field != "" {
		return evBad, fmt.Errorf("%w: %s differs", events.ErrClaim, field)
	}
	if e.Registry == nil {
		return evBad, errors.New("no registry to check the key against")
	}
	if err := e.Registry.Enrolled(sig.Claim.Host, sig.KeyID, at); err != nil {
		return evBad, err
	}
	return evSigned, nil
}

// Tally implements chain.Inspector: it counts a link that verified; the
// first bad one is kept.
func (e *Evidence) Tally(c *chain.Candidate, f chain.Finding) {
	switch f.Kind {
	case evSigned:
		e.signed++
	case evUnsigned:
		e.unsigned++
	case evOther:
		e.other++
	case evBad:
		if errors.Is(f.Err, errUnsigned) {
			e.unsigned++
		}
		if e.bad == nil {
			id, _, _ := chain.EventID(c.Event)
			e.bad = &BadSignature{Chain: c.Chain, Seq: c.Seq, ID: chain.UnquoteID(id), Reason: f.Err.Error(), Pos: c.Pos}
		}
	}
}

// Report returns what e found of the links it tallied.
func (e *Evidence) Report() *EvidenceReport {
	return &EvidenceReport{Signed: e.signed, Unsigned: e.unsigned, Other: e.other, Bad: e.bad}
}

func text(v jsontree.Value, key string) string {
	s, ok := v.Get(key)
	if !ok || s.Kind != jsontree.String {
		return ""
	}
	return s.Text
}
