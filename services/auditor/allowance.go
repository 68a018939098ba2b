package auditor

import (
	"fmt"
	"sync"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// AllowanceConfig bounds what one host's messages add to the audit sinks
// (README "Bulkheads"): the links of the messages of a host-scoped stream
// (EVIDENCE, VERDICTS, DLQ; the host as their NATS subject names it, which
// per-host credentials make the publisher's own) draw on a bucket of
// Burst bytes that refills at BytesPerMinute, in the stream's time (when
// the server stored each message, not the auditor's clock). A message
// whose link does not fit is recorded by its digest and size only
// (link.ReasonOverAllowance, a few hundred bytes) while the bucket has
// Burst/4 more to lend; past that, the host's messages are acknowledged
// without a link, between two notices: one where it starts, one naming
// the messages and bytes left out once the bucket is out of debt again.
type AllowanceConfig struct {
	// BytesPerMinute is the refill rate (default 256 KiB: a host's three
	// targets every minute take a few KiB).
	BytesPerMinute int64 `mapstructure:"bytes_per_minute"`
	// Burst is the bucket's size: at least MinAllowanceBurst, the largest
	// message a stream stores and its link (default 4 MiB).
	Burst int64 `mapstructure:"burst"`
}

// MinAllowanceBurst is the least AllowanceConfig.Burst.
const MinAllowanceBurst = minPull

// DefaultAllowance is the default AllowanceConfig.
var DefaultAllowance = AllowanceConfig{BytesPerMinute: 256 << 10, Burst: 4 << 20}

// Validate checks the allowance.
func (c AllowanceConfig) Validate() error {
	if c.BytesPerMinute <= 0 {
		return config.Invalidf("allowance.bytes_per_minute: %d, want more than 0", c.BytesPerMinute)
	}
	if c.Burst < MinAllowanceBurst {
		return config.Invalidf("allowance.burst: %d, want at least %d (the largest message and its link)", c.Burst, MinAllowanceBurst)
	}
	return nil
}

// compactCost is what a link recording a message by digest and size, or
// a notice, takes of a bucket: about its line's size.
const compactCost = 1 << 10

// admission is what becomes of a message under its host's allowance.
type admission int

const (
	// admitWhole: the message's link as it is.
	admitWhole admission = iota
	// admitCompact: a record of its digest and size.
	admitCompact
	// admitNone: no link (a notice stands for it).
	admitNone
)

// allowances holds one bucket per host of each host-scoped stream.
type allowances struct {
	cfg  AllowanceConfig
	mu   sync.Mutex
	by   map[string]*bucket
	peak int // map size at the last sweep
}

// bucket is one host's allowance on one stream.
type bucket struct {
	tokens float64
	at     time.Time
	run    *unrecorded // the messages left out since the bucket ran dry
}

// unrecorded is a run of a host's messages acknowledged without a link.
type unrecorded struct {
	first, last uint64
	count       int
	bytes       int64
}

func newAllowances(cfg AllowanceConfig) *allowances {
	return &allowances{cfg: cfg, by: map[string]*bucket{}}
}

// tenant is the key of m's bucket; false for a stream that is not
// host-scoped (its messages are the services' own, not a host's).
func tenant(m *link.Message) (string, bool) {
	if m.Notice != nil {
		return "", false
	}
	switch m.Stream {
	case "EVIDENCE", "VERDICTS":
		return m.Stream + "/" + events.HostToken(m.Subject), true
	case "DLQ":
		return m.Stream + "/" + link.DeadLetterHost(m.Subject), true
	}
	return "", false
}

// admit charges the link of m, size bytes, to its host's bucket and says
// what to record: the link, a record by digest, or nothing. ended is the
// run of messages left out that ends here (the bucket refilled), to be
// noticed before m's record; started says that m starts such a run.
func (a *allowances) admit(m *link.Message, size int) (d admission, ended *unrecorded, started bool) {
	key, ok := tenant(m)
	if !ok {
		return admitWhole, nil, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	burst := float64(a.cfg.Burst)
	b := a.by[key]
	if b == nil {
		b = &bucket{tokens: burst, at: m.Stored}
		a.by[key] = b
		a.sweep(m.Stored)
	}
	b.refill(m.Stored, float64(a.cfg.BytesPerMinute), burst)
	if b.run != nil {
		if b.tokens < 0 {
			b.run.count++
			b.run.bytes += int64(len(m.Data))
			b.run.last = m.Seq
			return admitNone, nil, false
		}
		ended, b.run = b.run, nil
		b.tokens -= compactCost
	}
	switch {
	case b.tokens >= float64(size):
		b.tokens -= float64(size)
		return admitWhole, ended, false
	case b.tokens-compactCost >= -burst/4:
		b.tokens -= compactCost
		return admitCompact, ended, false
	}
	b.tokens -= compactCost // the notice that starts the run
	b.run = &unrecorded{first: m.Seq, last: m.Seq, count: 1, bytes: int64(len(m.Data))}
	return admitNone, ended, true
}

// refill adds what the bucket earned from its last charge to at.
func (b *bucket) refill(at time.Time, perMinute, burst float64) {
	if d := at.Sub(b.at); d > 0 {
		b.tokens = min(burst, b.tokens+perMinute*d.Minutes())
		b.at = at
	}
}

// sweep, once the map doubled since the last sweep, drops the buckets
// that are full by now and leave nothing out: a host that is back within
// its allowance costs no memory.
func (a *allowances) sweep(now time.Time) {
	if len(a.by) < max(2*a.peak, 1024) {
		return
	}
	burst, rate := float64(a.cfg.Burst), float64(a.cfg.BytesPerMinute)
	for k, b := range a.by {
		if b.run == nil && b.tokens+rate*now.Sub(b.at).Minutes() >= burst {
			delete(a.by, k)
		}
	}
	a.peak = len(a.by)
}

// overAllowance is the notice that m starts a run of its host's messages
// left out of the chain.
func (a *allowances) overAllowance(m *link.Message) *link.Message {
	return &link.Message{Stream: m.Stream, Seq: m.Seq, Subject: m.Subject, Stored: m.Stored, Consumer: m.Consumer,
		Chain: m.Chain, Notice: &link.Notice{
			Reason: link.ReasonOverAllowance, Seq: m.Seq, Subject: m.Subject,
			Detail: fmt.Sprintf("this host's messages are over its allowance (%d bytes, %d a minute) and are not recorded from stream sequence %d until it refills",
				a.cfg.Burst, a.cfg.BytesPerMinute, m.Seq),
		}}
}

// unrecordedNotice is the notice of run, a run of messages of m's host
// left out, recorded before m.
func unrecordedNotice(m *link.Message, run *unrecorded) *link.Message {
	return &link.Message{Stream: m.Stream, Seq: run.last, Subject: m.Subject, Stored: m.Stored, Consumer: m.Consumer,
		Chain: m.Chain, Notice: &link.Notice{
			Reason: link.ReasonUnrecorded, Seq: run.first, Subject: m.Subject,
			Detail: fmt.Sprintf("%d messages of this host (%d bytes), stream sequences %d..%d, were not recorded: over its allowance",
				run.count, run.bytes, run.first, run.last),
		}}
}
