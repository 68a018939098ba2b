package notifier

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// The alert names (Alertmanager's alertname label).
const (
	AlertDrift    = "RuntimeTruthDrift"
	AlertError    = "RuntimeTruthError"
	AlertStale    = "RuntimeTruthStale"
	AlertModified = "RuntimeTruthModified"
)

// MaxAlertsPerHost bounds the alerts, firing or waiting to be sent
// resolved, a host holds.
const MaxAlertsPerHost = 4096

// Key identifies an alert: a host and target's verdict alert (Package
// empty), or a package's modified alert (Target the environment's target).
type Key struct {
	Host, Target, Package string
}

// Alert is an alert's state.
type Alert struct {
	Key
	// Name is the alertname; Kind the target's kind; Severity critical
	// (drift, modified) or warning (error, stale).
	Name, Kind, Severity string
	// Summary and Description are the annotations.
	Summary, Description string
	// StartsAt is when it fired; EndsAt when it resolved (zero while
	// firing).
	StartsAt, EndsAt time.Time
	// Cause is the id of the event that fired it.
	Cause string
}

// Resolved reports whether the alert resolved.
func (a Alert) Resolved() bool { return !a.EndsAt.IsZero() }

// Labels are the alert's Alertmanager labels.
func (a Alert) Labels() map[string]string {
	l := map[string]string{"alertname": a.Name, "host": a.Host, "target": a.Target, "kind": a.Kind, "severity": a.Severity}
	if a.Package != "" {
		l["package"] = a.Package
	}
	return l
}

// Alerts is the alert state: the firing alerts, and the resolved ones not
// yet sent. Safe for concurrent use.
type Alerts struct {
	mu     sync.Mutex
	alerts map[Key]*Alert
	// byHost counts a host's alerts; untracked the events beyond a
	// host's share.
	byHost    map[string]int
	untracked uint64
	// dirty are the keys changed since they were last saved (Unsaved,
	// Saved): firing, resolved, or forgotten (absent from alerts).
	dirty map[Key]bool
	// changes are the current Observe's.
	changes Changes
}

// NewAlerts returns an empty state.
func NewAlerts() *Alerts {
	return &Alerts{alerts: map[Key]*Alert{}, byHost: map[string]int{}, dirty: map[Key]bool{}}
}

// integrityKinds are the target kinds whose pass resolves their packages'
// modified alerts.
var integrityKinds = map[string]bool{"python.environment": true, "node.project": true}

// Changes are the alerts an event fired and resolved, as they are after
// it.
type Changes struct{ Alerts []Alert }

// Fired counts the alerts that fired; Resolved those that resolved.
func (c Changes) Fired() int {
	n := 0
	for _, a := range c.Alerts {
		if !a.Resolved() {
			n++
		}
	}
	return n
}

// Resolved counts the alerts that resolved.
func (c Changes) Resolved() int { return len(c.Alerts) - c.Fired() }

// Any reports whether an alert fired or resolved.
func (c Changes) Any() bool { return len(c.Alerts) > 0 }

// Observe applies an event (a verdict, a runnable.modified; others change
// nothing) of id at time at, and says which alerts fired and resolved.
func (s *Alerts) Observe(p events.Payload, id string, at time.Time) Changes {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = Changes{}
	switch p := p.(type) {
	case events.Verdict:
		s.verdict(p, id, at)
	case events.RunnableModified:
		target := integrityTarget(p)
		k := Key{Host: p.Host, Target: target, Package: events.PackageURL(p.Ecosystem, p.Package, p.Version)}
		if a, ok := s.alerts[k]; ok && !a.Resolved() {
			break
		}
		s.fire(&Alert{Key: k, Name: AlertModified, Kind: strings.SplitN(target, ":", 2)[0], Severity: "critical",
			Summary:     fmt.Sprintf("installed code of %s modified on %s", k.Package, p.Host),
			Description: fmt.Sprintf("%d file(s) of %s in %s differ from its %s", len(p.ChangedFiles), k.Package, p.Environment, p.Baseline),
			StartsAt:    at, Cause: id})
	}
	return s.changes
}

// integrityTarget is the target whose pass verifies a package again: the
// environment's python.environment or node.project target.
func integrityTarget(p events.RunnableModified) string {
	kind := "python.environment"
	if p.Ecosystem == events.Node {
		kind = "node.project"
	}
	return events.Target{Kind: kind, Identifier: p.Environment}.String()
}

// verdictAlerts are the alerts of the statuses that fire one.
var verdictAlerts = map[events.Status]struct{ name, severity string }{
	events.StatusDrift: {AlertDrift, "critical"},
	events.StatusError: {AlertError, "warning"},
	events.StatusStale: {AlertStale, "warning"},
}

func (s *Alerts) verdict(v events.Verdict, id string, at time.Time) {
	k := Key{Host: v.Host, Target: v.Target.String()}
	va, fires := verdictAlerts[v.Status]
	if a, ok := s.alerts[k]; ok && !a.Resolved() {
		if fires && a.Name == va.name {
			return // a repeat: still firing
		}
		s.resolve(k, a, at)
	}
	if v.Status == events.StatusPass && integrityKinds[v.Target.Kind] {
		for mk, a := range s.alerts {
			if mk.Host == k.Host && mk.Target == k.Target && mk.Package != "" && !a.Resolved() {
				s.resolve(mk, a, at)
			}
		}
	}
	if fires {
		s.fire(&Alert{Key: k, Name: va.name, Kind: v.Target.Kind, Severity: va.severity,
			Summary: fmt.Sprintf("%s on %s: %s", v.Target, v.Host, v.Status), Description: verdictText(v),
			StartsAt: at, Cause: id})
	}
}

// resolve ends the firing alert a of key k at at.
func (s *Alerts) resolve(k Key, a *Alert, at time.Time) {
	a.EndsAt = at
	s.dirty[k] = true
	s.changes.Alerts = append(s.changes.Alerts, *a)
}

// verdictText says what a verdict found.
func verdictText(v events.Verdict) string {
	switch v.Status {
	case events.StatusDrift:
		n := 0
		if v.Report != nil {
			for _, c := range v.Report.Changes {
				n += max(len(c.Fields), 1)
			}
		}
		return fmt.Sprintf("%s on %s differs from baseline %s in %d field(s)", v.Target, v.Host, v.BaselineDigest, n)
	case events.StatusError, events.StatusStale:
		return v.Error
	}
	return string(v.Status)
}

// fire records a as firing, replacing the key's resolved alert, unless
// its host holds its share (counted).
func (s *Alerts) fire(a *Alert) {
	if _, ok := s.alerts[a.Key]; !ok {
		if s.byHost[a.Host] >= MaxAlertsPerHost {
			s.untracked++
			return
		}
		s.byHost[a.Host]++
	}
	s.alerts[a.Key] = a
	s.dirty[a.Key] = true
	s.changes.Alerts = append(s.changes.Alerts, *a)
}

// Pending returns the firing alerts and the resolved ones not yet sent,
// ordered by host, target and package.
func (s *Alerts) Pending() []Alert {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Alert, 0, len(s.alerts))
	for _, k := range slices.SortedFunc(maps.Keys(s.alerts), compareKeys) {
		out = append(out, *s.alerts[k])
	}
	return out
}

// Sent forgets the resolved alerts of sent, now that Alertmanager has
// them (an alert that fired again since stays).
func (s *Alerts) Sent(sent []Alert) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range sent {
		if cur, ok := s.alerts[a.Key]; ok && a.Resolved() && cur.Resolved() && cur.EndsAt.Equal(a.EndsAt) {
			delete(s.alerts, a.Key)
			s.dirty[a.Key] = true
			if s.byHost[a.Host]--; s.byHost[a.Host] == 0 {
				delete(s.byHost, a.Host)
			}
		}
	}
}

// Counts are the firing alerts and the events beyond a host's share.
func (s *Alerts) Counts() (firing int, untracked uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.alerts {
		if !a.Resolved() {
			firing++
		}
	}
	return firing, s.untracked
}

func compareKeys(a, b Key) int {
	return cmp.Or(strings.Compare(a.Host, b.Host), strings.Compare(a.Target, b.Target), strings.Compare(a.Package, b.Package))
}

// Unsaved returns what changed since it was last saved: the alerts to
// store, and the keys of the alerts forgotten.
func (s *Alerts) Unsaved() (put []Alert, gone []Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return unsaved(s.dirty, s.alerts)
}

// Saved marks what Unsaved returned as stored, unless it changed since.
func (s *Alerts) Saved(put []Alert, gone []Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	saved(s.dirty, s.alerts, func(a Alert) Key { return a.Key }, put, gone)
}

// Restore adds a stored alert (at start), within its host's share.
func (s *Alerts) Restore(a Alert) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.alerts[a.Key]; ok || s.byHost[a.Host] >= MaxAlertsPerHost {
		return
	}
	s.alerts[a.Key] = &a
	s.byHost[a.Host]++
}
