package siem

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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
	// changed: an episode opened or closed since the last Encode.
	changed bool
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
		e.changed = true
		return step{uid: ep.uid, start: ep.start, activity: ActivityClose}
	case !failing:
		return standing(host, target)
	case e.byHost[host] >= MaxEpisodesPerHost:
		e.untracked++
		return opened
	}
	e.open[k] = episode{uid: opened.uid, start: at}
	e.byHost[host]++
	e.changed = true
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

// episodesFile is the saved form of Episodes: a version, then the open
// episodes, read and written whole.
type episodesFile struct {
	Version int           `json:"version"`
	Open    []openEpisode `json:"open"`
}

type openEpisode struct {
	Host   string    `json:"host"`
	Target string    `json:"target"`
	UID    string    `json:"uid"`
	Start  time.Time `json:"start"`
}

const episodesVersion = 1

// Encode is the open episodes in their saved form (Decode reads it), so
// that a finding keeps its uid across a restart; it also clears Changed.
func (e *Episodes) Encode() ([]byte, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := episodesFile{Version: episodesVersion, Open: make([]openEpisode, 0, len(e.open))}
	for k, ep := range e.open {
		f.Open = append(f.Open, openEpisode{Host: k.host, Target: k.target, UID: ep.uid, Start: ep.start})
	}
	slices.SortFunc(f.Open, func(a, b openEpisode) int {
		return cmp.Or(strings.Compare(a.Host, b.Host), strings.Compare(a.Target, b.Target))
	})
	e.changed = false
	return json.Marshal(f)
}

// DecodeEpisodes reads what Encode wrote: the open episodes, each host
// held to its share.
func DecodeEpisodes(data []byte) (*Episodes, error) {
	var f episodesFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("episodes: %w", err)
	}
	if f.Version != episodesVersion {
		return nil, fmt.Errorf("episodes: version %d, want %d", f.Version, episodesVersion)
	}
	e := NewEpisodes()
	for _, o := range f.Open {
		k := hostTarget{o.Host, o.Target}
		if _, dup := e.open[k]; dup || o.UID == "" || e.byHost[o.Host] >= MaxEpisodesPerHost {
			continue
		}
		e.open[k] = episode{uid: o.UID, start: o.Start}
		e.byHost[o.Host]++
	}
	return e, nil
}

// Changed reports whether an episode opened or closed since the last
// Encode.
func (e *Episodes) Changed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}
