package siem

import (
	"sync"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/events"
)

// Episodes keeps the open episode of each host and target: a run of
// verdicts that are not pass, which the next pass closes. An episode is
// one compliance finding: its first verdict creates it (its uid derived
// from that verdict's event id), the next ones update it, the pass closes
// it. A pass outside an episode updates the target's standing finding
// (a uid of the host and target alone).
//
// A host holds at most MaxEpisodesPerHost open episodes, so that a host
// reporting ever new targets (each an error verdict: no baseline) costs
// its own share only; a verdict beyond it is a finding of its own (Create,
// its uid its event id's) and counted in Untracked. Safe for concurrent
// use; the zero value is not: use NewEpisodes.
type Episodes struct {
	mu     sync.Mutex
	open   map[hostTarget]episode
	byHost map[string]int
	// untracked counts the verdicts beyond a host's share.
	untracked uint64
}

// MaxEpisodesPerHost bounds the open episodes a host holds.
const MaxEpisodesPerHost = 4096

type hostTarget struct{ host, target string }

type episode struct {
	uid   string
	start time.Time
}

// NewEpisodes returns an empty tracker.
func NewEpisodes() *Episodes {
	return &Episodes{open: map[hostTarget]episode{}, byHost: map[string]int{}}
}

// step is what a verdict is in its episode.
type step struct {
	uid      string
	start    time.Time
	activity Activity
}

// observe records a verdict of host and target (failing: not a pass),
// of event id, at; nil e keeps no state (every failing verdict opens an
// episode).
func (e *Episodes) observe(host, target string, failing bool, id string, at time.Time) step {
	k := hostTarget{host, target}
	opened := step{uid: events.FindingIDs.ID("episode", host, target, id), start: at, activity: ActivityCreate}
	if e == nil {
		if !failing {
			return standing(host, target)
		}
		return opened
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ep, ok := e.open[k]
	switch {
	case ok && failing:
		return step{uid: ep.uid, start: ep.start, activity: ActivityUpdate}
	case ok:
		delete(e.open, k)
		if e.byHost[host]--; e.byHost[host] == 0 {
			delete(e.byHost, host)
		}
		return step{uid: ep.uid, start: ep.start, activity: ActivityClose}
	case !failing:
		return standing(host, target)
	case e.byHost[host] >= MaxEpisodesPerHost:
		e.untracked++
		return opened
	}
	e.open[k] = episode{uid: opened.uid, start: at}
	e.byHost[host]++
	return opened
}

// standing is a pass outside an episode: an update of the target's
// standing finding.
func standing(host, target string) step {
	return step{uid: events.FindingIDs.ID("standing", host, target), activity: ActivityUpdate}
}

// Open counts the open episodes; Untracked the verdicts that opened none
// because their host held its share.
func (e *Episodes) Open() (open int, untracked uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.open), e.untracked
}
