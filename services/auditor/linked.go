package auditor

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
)

// IDReader is a sink that tells which event ids its chains hold: the
// writer links each CloudEvent id at most once per chain, and asks the
// sink about an id its filter may have seen (linkedIDs).
//
// Only links that record a message count: an auditor-made record (a
// rejection or a notice about the stream, "rejected": true) is not looked
// at, nor asked about.
type IDReader interface {
	// EventIDs calls fn with the chain and event id of every link that
	// records a message.
	EventIDs(ctx context.Context, fn func(chain, id string) error) error
	// Linked returns those of ids that a link of chain (recording a
	// message) carries.
	Linked(ctx context.Context, chain string, ids []string) (map[string]bool, error)
}

// recentIDs is how many of the last event ids sealed the writer keeps
// exactly, every chain together: more than the links of the batches sealed
// and not yet committed (at most two per stream loop, of at most
// topology.AuditorMaxAckPending messages each, four streams), so that an id
// sealed but not yet in the sinks is found here, never asked of a sink.
const recentIDs = 1 << 16

// Sizes of the filter of the ids in the sinks (idFilter): a layer holds
// filterFirst ids at first, each next layer twice the last, at
// filterBitsPerID bits an id (about 1 in 15,000 false "maybe" once full),
// up to filterMaxBytes in all; past that the last layer fills on, its false
// "maybe"s (each an exact lookup in the sink) growing.
const (
	filterFirst     = 1 << 20
	filterBitsPerID = 20
	filterHashes    = 14
	filterMaxBytes  = 256 << 20
)

// idKey names an event id in a chain.
type idKey struct{ chain, id string }

// linkedIDs is what the writer knows of the event ids in its chains: the
// last recentIDs ids sealed, exactly, and a filter of every id in the
// sink it looks ids up in (lookup), built from the sink at Recover and
// fed with every id sealed since. An id neither sealed recently nor in the
// filter is new; an id the filter may hold is asked of the sink. Without a
// sink to ask (none reads ids back) only the recent ids are known, and the
// filter is not kept.
type linkedIDs struct {
	mu     sync.Mutex
	recent map[idKey]struct{}
	ring   []idKey // the recent ids in the order sealed, a ring of recentIDs
	next   int
	filter *idFilter
	lookup IDReader
}

func newLinkedIDs() *linkedIDs {
	return &linkedIDs{recent: make(map[idKey]struct{}, 1024)}
}

// load starts over from what r holds of the chains owned accepts (nil r:
// nothing, recent ids only).
func (l *linkedIDs) load(ctx context.Context, r IDReader, owned func(string) bool) (int, error) {
	fresh := newLinkedIDs()
	n := 0
	if r != nil {
		fresh.lookup, fresh.filter = r, newIDFilter()
		err := r.EventIDs(ctx, func(chain, id string) error {
			if owned(chain) {
				fresh.filter.add(chain, id)
				n++
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("read the event ids of the audit sink: %w", err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recent, l.ring, l.next, l.filter, l.lookup = fresh.recent, nil, 0, fresh.filter, fresh.lookup
	return n, nil
}

// known reports, of keys, those linked already: sealed recently, or held
// by the sink when the filter says they may be. It fails only when the
// sink cannot be asked.
func (l *linkedIDs) known(ctx context.Context, keys []idKey) (map[idKey]bool, error) {
	out := map[idKey]bool{}
	var ask map[string][]string
	l.mu.Lock()
	lookup := l.lookup
	for _, k := range keys {
		if _, ok := l.recent[k]; ok {
			out[k] = true
			continue
		}
		if l.filter != nil && l.filter.has(k.chain, k.id) {
			if ask == nil {
				ask = map[string][]string{}
			}
			ask[k.chain] = append(ask[k.chain], k.id)
		}
	}
	l.mu.Unlock()
	for chain, ids := range ask {
		found, err := lookup.Linked(ctx, chain, ids)
		if err != nil {
			return nil, fmt.Errorf("look up event ids of chain %q in the audit sink: %w", chain, err)
		}
		for id := range found {
			out[idKey{chain, id}] = true
		}
	}
	return out, nil
}

// add records keys as sealed.
func (l *linkedIDs) add(keys []idKey) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if l.filter != nil {
			l.filter.add(k.chain, k.id)
		}
		if len(l.ring) < recentIDs {
			l.ring = append(l.ring, k)
		} else {
			delete(l.recent, l.ring[l.next])
			l.ring[l.next] = k
			l.next = (l.next + 1) % recentIDs
		}
		l.recent[k] = struct{}{}
	}
}

// idFilter is a Bloom filter of chain and id pairs that grows by layers
// (a scalable Bloom filter), within filterMaxBytes.
type idFilter struct {
	seed   maphash.Seed
	layers []*bloomLayer
	bytes  int
}

type bloomLayer struct {
	bits  []uint64
	mask  uint64 // len(bits)*64 - 1: a power of two
	n     int
	limit int // the ids the layer is sized for
}

func newIDFilter() *idFilter {
	f := &idFilter{seed: maphash.MakeSeed()}
	f.grow(filterFirst)
	return f
}

// grow adds a layer sized for ids, if the budget allows.
func (f *idFilter) grow(ids int) bool {
	words := 1 << bits.Len(uint(ids*filterBitsPerID/64-1)) // a power of two
	if len(f.layers) > 0 && f.bytes+words*8 > filterMaxBytes {
		return false
	}
	f.layers = append(f.layers, &bloomLayer{bits: make([]uint64, words), mask: uint64(words)*64 - 1, limit: ids})
	f.bytes += words * 8
	return true
}

func (f *idFilter) sum(chain, id string) uint64 {
	var h maphash.Hash
	h.SetSeed(f.seed)
	_, _ = h.WriteString(chain)
	_ = h.WriteByte(0)
	_, _ = h.WriteString(id)
	return h.Sum64()
}

func (f *idFilter) add(chain, id string) {
	last := f.layers[len(f.layers)-1]
	if last.n >= last.limit && f.grow(2*last.limit) {
		last = f.layers[len(f.layers)-1]
	}
	last.set(f.sum(chain, id))
	last.n++
}

func (f *idFilter) has(chain, id string) bool {
	s := f.sum(chain, id)
	for _, l := range f.layers {
		if l.test(s) {
			return true
		}
	}
	return false
}

// set and test probe filterHashes bits by double hashing of s.
func (l *bloomLayer) set(s uint64) {
	h1, h2 := s, s>>32|1
	for i := range uint64(filterHashes) {
		b := (h1 + i*h2) & l.mask
		l.bits[b>>6] |= 1 << (b & 63)
	}
}

func (l *bloomLayer) test(s uint64) bool {
	h1, h2 := s, s>>32|1
	for i := range uint64(filterHashes) {
		b := (h1 + i*h2) & l.mask
		if l.bits[b>>6]&(1<<(b&63)) == 0 {
			return false
		}
	}
	return true
}
