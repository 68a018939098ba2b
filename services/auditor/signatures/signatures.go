// Package signatures re-checks the evidence signatures audit links carry
// against the host registry, beside the chain's verification: Evidence is
// a chain.Inspector (chain.Options.Inspector) that, for each link of a
// signed event, checks the DSSE envelope, the claim against what the link
// records, and the key's enrolment (Registry, Hosts). A link whose
// signature fails but whose message the verifier dead-lettered (the DLQ
// chain holds its dead letter) was refused, then recorded as the auditor
// records everything: it is reported as a note, not a failure.
package signatures

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/dsse"
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
//
// A link that fails is not a failure when a consumer of its stream (the
// verifier) dead-lettered its message: the DLQ chain holds a dead letter
// (an event.rejected the verifier published, not one the auditor made)
// naming the same stream, stream sequence and event id. The verifier
// refused the event, and the audit chain records it as it records every
// message; the link is reported as a Refusal (a note) instead. The links
// are matched once every link is read, in whatever order the chains come:
// Evidence keeps each failing link and each dead letter until Report
// (about 200 bytes each). A dead letter is the verifier's word, which the
// threat model trusts (docs/threat-model.md); only the pipeline's
// services may publish on the DLQ (pkg/platform/buspolicy).
type Evidence struct {
	Registry Registry
	// Require makes an unsigned link of an event type collectors sign a
	// failure.
	Require bool

	signed, unsigned, other int
	failed                  []*BadSignature
	dead                    map[message]*deadLetter
}

// EvidenceReport is what Evidence found.
type EvidenceReport struct {
	// Signed counts links whose signature held; Unsigned links of a type
	// collectors sign without one; Other links of other events.
	Signed   int
	Unsigned int
	Other    int
	// Refused counts the links whose signature does not hold (or, with
	// Require, unsigned ones) whose message the verifier dead-lettered:
	// not failures. Notes are the first MaxNotes of them, in the order
	// the links were read.
	Refused int
	Notes   []Refusal
	// Bad is the first link whose signature does not hold (or, with
	// Require, the first unsigned one) and whose message no dead letter
	// names; nil when none.
	Bad *BadSignature
}

// MaxNotes bounds EvidenceReport.Notes.
const MaxNotes = 100

// Refusal is a link whose signature does not hold whose message the
// verifier refused: the link and the dead letter that says so.
type Refusal struct {
	BadSignature
	// Consumer is the consumer that dead-lettered the message (the
	// verifier's, "verifier"), Refused why: the verifier's reason
	// ("replayed", "claim_mismatch", …, from its error "rejected evidence
	// (<reason>): …"), else the dead letter's own reason.
	Consumer string
	Refused  string
	// DeadLetter locates the dead letter's link.
	DeadLetter Located
}

// Note is the refusal as a note: the link's finding and the verifier's
// decision.
func (r *Refusal) Note() string {
	return fmt.Sprintf("%s; refused by the verifier: %s (dead letter: chain %q seq %d)",
		r.Error(), r.Refused, r.DeadLetter.Chain, r.DeadLetter.Seq)
}

// Located is where a link is: its chain and sequence number, and its
// place in the source.
type Located struct {
	Chain string
	Seq   uint64
	Pos   chain.Position
}

// BadSignature names a link whose evidence signature does not hold.
type BadSignature struct {
	Chain  string
	Seq    uint64
	ID     string
	Reason string
	Pos    chain.Position

	// msg is the link's message, by which a dead letter names it.
	msg message
}

// message names a stream's message as a link records it ("nats": stream
// and seq) and as a dead letter does (stream, stream_sequence), with the
// event id both carry.
type message struct {
	stream string
	seq    uint64
	id     string
}

// deadLetter is a dead letter's link, as Inspect found it (a Finding's
// Err, of kind evDeadLetter).
type deadLetter struct {
	msg      message
	consumer string
	reason   string
	at       Located // set by Tally
}

func (d *deadLetter) Error() string {
	return fmt.Sprintf("a dead letter of %s seq %d by %s: %s", d.msg.stream, d.msg.seq, d.consumer, d.reason)
}

// failure is the error of a link whose signature does not hold (a
// Finding's Err, of kind evBad), with the link's message.
type failure struct {
	err error
	msg message
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

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
	evDeadLetter // counted as other
)

// errUnsigned is the reason of an unsigned link under Require.
var errUnsigned = errors.New("unsigned (a signature is required)")

// Inspect implements chain.Inspector: it checks a link's event, on the
// hashing goroutines.
func (e *Evidence) Inspect(event []byte) chain.Finding {
	ev, err := jsontree.Parse(event)
	if err != nil {
		return chain.Finding{Kind: evBad, Err: fmt.Errorf("event: %w", err)}
	}
	if d := deadLetterOf(ev); d != nil {
		return chain.Finding{Kind: evDeadLetter, Err: d}
	}
	kind, err := e.classify(ev)
	if kind == evBad {
		attrs, _ := ev.Get("attributes")
		nats, _ := ev.Get("nats")
		err = &failure{err: err, msg: message{stream: text(nats, "stream"), seq: integer(nats, "seq"), id: text(attrs, "id")}}
	}
	return chain.Finding{Kind: kind, Err: err}
}

// deadLetterOf reads a dead letter of a stream's message from a link's
// event: an event.rejected a consumer published (not one the auditor
// made, "rejected": true) naming the stream, the sequence and the
// event's id; nil for any other event.
func deadLetterOf(ev jsontree.Value) *deadLetter {
	if r, ok := ev.Get("rejected"); ok && r.Kind == jsontree.Bool && r.Bool {
		return nil
	}
	attrs, _ := ev.Get("attributes")
	if spec, ok := events.Lookup(text(attrs, "type")); !ok || spec.Current() != events.TypeEventRejected {
		return nil
	}
	data, _ := ev.Get("data")
	env, _ := data.Get("envelope")
	d := &deadLetter{
		msg:      message{stream: text(data, "stream"), seq: integer(data, "stream_sequence"), id: text(env, "id")},
		consumer: text(data, "consumer"),
		reason:   text(data, "reason"),
	}
	if d.msg.stream == "" || d.msg.seq == 0 || d.msg.id == "" {
		return nil
	}
	// The verifier's refusals say why in the error: "rejected evidence
	// (<reason>): …" (its dead letters' own reason is "permanent").
	const mark = "rejected evidence ("
	msg := text(data, "error")
	if i := strings.Index(msg, mark); i >= 0 {
		if r, _, ok := strings.Cut(msg[i+len(mark):], ")"); ok && r != "" {
			d.reason = r
		}
	}
	return d
}

func (e *Evidence) classify(ev jsontree.Value) (uint8, error) {
	if r, ok := ev.Get("rejected"); ok && r.Kind == jsontree.Bool && r.Bool {
		return evOther, nil
	}
	attrs, _ := ev.Get("attributes")
	env := text(attrs, dsse.ExtSignature)
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
	sig, err := dsse.OpenSignature(env)
	if err != nil {
		return evBad, err
	}
	data, _ := ev.Get("data")
	at, err := time.Parse(time.RFC3339Nano, text(attrs, "time"))
	if err != nil {
		return evBad, fmt.Errorf("the link's time attribute: %w", err)
	}
	want := dsse.Claim{ID: text(attrs, "id"), Type: text(attrs, "type"), Source: text(attrs, "source"),
		Subject: text(attrs, "subject"), Time: sig.Claim.Time, Host: text(data, "host"),
		PayloadSHA256: text(ev, link.DataDigestMember)}
	if t, ok := data.Get("target"); ok && t.Kind == jsontree.Object {
		want.Target = &events.Target{Kind: text(t, "kind"), Identifier: text(t, "identifier")}
	}
	if ct, err := time.Parse(time.RFC3339Nano, sig.Claim.Time); err != nil || !ct.Equal(at) {
		return evBad, fmt.Errorf("%w: time differs", dsse.ErrClaim)
	}
	if field := dsse.ClaimDiff(sig.Claim, want); field != "" {
		return evBad, fmt.Errorf("%w: %s differs", dsse.ErrClaim, field)
	}
	if e.Registry == nil {
		return evBad, errors.New("no registry to check the key against")
	}
	if err := e.Registry.Enrolled(sig.Claim.Host, sig.KeyID, at); err != nil {
		return evBad, err
	}
	return evSigned, nil
}

// Tally implements chain.Inspector: it counts a link that verified, and
// keeps each bad one and each dead letter for Report.
func (e *Evidence) Tally(c *chain.Candidate, f chain.Finding) {
	switch f.Kind {
	case evSigned:
		e.signed++
	case evUnsigned:
		e.unsigned++
	case evOther:
		e.other++
	case evDeadLetter:
		e.other++
		if d, ok := errors.AsType[*deadLetter](f.Err); ok {
			if e.dead == nil {
				e.dead = map[message]*deadLetter{}
			}
			if _, seen := e.dead[d.msg]; !seen {
				e.dead[d.msg] = d
				d.at = Located{Chain: c.Chain, Seq: c.Seq, Pos: c.Pos}
			}
		}
	case evBad:
		if errors.Is(f.Err, errUnsigned) {
			e.unsigned++
		}
		id, _, _ := chain.EventID(c.Event)
		b := &BadSignature{Chain: c.Chain, Seq: c.Seq, ID: chain.UnquoteID(id), Reason: f.Err.Error(), Pos: c.Pos}
		if fl, ok := errors.AsType[*failure](f.Err); ok {
			b.msg = fl.msg
		}
		e.failed = append(e.failed, b)
	}
}

// Report returns what e found of the links it tallied: each bad link a
// dead letter names is a refusal, the first other one Bad.
func (e *Evidence) Report() *EvidenceReport {
	r := &EvidenceReport{Signed: e.signed, Unsigned: e.unsigned, Other: e.other}
	for _, b := range e.failed {
		d, ok := e.dead[b.msg]
		if !ok || b.msg.id == "" {
			if r.Bad == nil {
				r.Bad = b
			}
			continue
		}
		r.Refused++
		if len(r.Notes) < MaxNotes {
			r.Notes = append(r.Notes, Refusal{BadSignature: *b, Consumer: d.consumer, Refused: d.reason, DeadLetter: d.at})
		}
	}
	return r
}

// integer is the unsigned integer member key of v; 0 when there is none.
func integer(v jsontree.Value, key string) uint64 {
	n, ok := v.Get(key)
	if !ok || !n.IsInteger() {
		return 0
	}
	u, _ := strconv.ParseUint(n.Text, 10, 64)
	return u
}

func text(v jsontree.Value, key string) string {
	s, ok := v.Get(key)
	if !ok || s.Kind != jsontree.String {
		return ""
	}
	return s.Text
}
