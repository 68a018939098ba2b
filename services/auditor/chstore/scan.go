package chstore

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
)

// MaxPartStreams is the default of Options.PartStreams: the most data
// parts Source reads side by side; a table with more is read with ORDER BY
// instead.
const MaxPartStreams = 48

// verifyColumns are the columns verification needs: the link's parts.
const verifyColumns = "chain, seq, prev, hash, event"

// errRaced means a data part listed was merged away before its read
// started; the read is set up again.
var errRaced = errors.New("a data part was merged during the read")

// Source returns every link ordered by chain and seq, for chain.Run;
// chains, when not empty, limits it to those chains.
//
// ClickHouse 18.16 sorts a whole table for ORDER BY (it has no read in
// order), which costs more than the read itself. Each data part, though,
// is stored sorted by the table's key (chain, seq), so Source reads every
// part on its own (a large part as several ranges of whole chains, so that
// the reads run side by side), one thread each, in storage order and
// without ORDER BY, and merges the streams by (chain, seq) as it goes (a
// k-way merge; memory is a block per stream). It checks what it relies
// on: each stream must come in key order and hold the rows it was listed
// with (SELECT _part, chain, count() … GROUP BY _part, chain); a part
// merged away between the listing and its read makes it list again before
// any link is handed out. A table of more than Options.PartStreams parts
// is read with ORDER BY.
func (s *Store) Source(ctx context.Context, chains ...string) chain.Source {
	where := ""
	if len(chains) > 0 {
		q := make([]string, len(chains))
		for i, c := range chains {
			q[i] = Quote(c)
		}
		where = "chain IN (" + strings.Join(q, ", ") + ")"
	}
	var m *merger
	var ordered driver.Rows
	row := 0
	done := false
	fail := func(err error) (bool, error) {
		done = true
		if m != nil {
			m.close()
		}
		if ordered != nil {
			_ = ordered.Close()
		}
		return false, err
	}
	return func(_ context.Context, b *chain.Batch) (bool, error) {
		if done {
			return false, nil
		}
		if m == nil && ordered == nil {
			var err error
			m, err = s.openMerger(ctx, where)
			if errors.Is(err, errTooManyParts) {
				q := "SELECT " + verifyColumns + " FROM " + s.table
				if where != "" {
					q += " WHERE " + where
				}
				ordered, err = s.conn.Query(ctx, q+" ORDER BY chain, seq")
			}
			if err != nil {
				return fail(fmt.Errorf("clickhouse scan: %w", err))
			}
		}
		for len(b.Cands) < max(cap(b.Cands), 512) {
			var c chain.Candidate
			var ok bool
			var err error
			if m != nil {
				ok, err = m.next(&c)
			} else {
				ok, err = scanOrdered(ordered, &c)
			}
			if err != nil {
				return fail(fmt.Errorf("clickhouse scan: %w", err))
			}
			if !ok {
				_, _ = fail(nil)
				return false, nil
			}
			row++
			c.Pos = chain.Position{Row: row}
			b.Cands = append(b.Cands, c)
		}
		return true, nil
	}
}

func scanOrdered(rows driver.Rows, c *chain.Candidate) (bool, error) {
	if !rows.Next() {
		return false, rows.Err()
	}
	return true, rows.Scan(&c.Chain, &c.Seq, &c.Prev, &c.Hash, &c.Event)
}

var errTooManyParts = errors.New("too many data parts to merge")

// openMerger lists the parts holding the rows and starts reading each;
// it tries again when a part was merged away meanwhile.
func (s *Store) openMerger(ctx context.Context, where string) (*merger, error) {
	for attempt := 0; ; attempt++ {
		m, err := s.tryMerger(ctx, where)
		if !errors.Is(err, errRaced) || attempt == 4 {
			return m, err
		}
	}
}

func (s *Store) tryMerger(ctx context.Context, where string) (*merger, error) {
	q := "SELECT _part, chain, count() FROM " + s.table
	if where != "" {
		q += " WHERE " + where
	}
	rows, err := s.conn.Query(ctx, q+" GROUP BY _part, chain ORDER BY _part, chain")
	if err != nil {
		return nil, err
	}
	type chainRows struct {
		part, chain string
		rows        uint64
	}
	var list []chainRows
	var total uint64
	parts := map[string]bool{}
	for rows.Next() {
		var c chainRows
		if err := rows.Scan(&c.part, &c.chain, &c.rows); err != nil {
			_ = rows.Close()
			return nil, err
		}
		list = append(list, c)
		total += c.rows
		parts[c.part] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	if len(parts) > s.streams {
		return nil, errTooManyParts
	}
	// A large part is read as several ranges of chains, side by side (a
	// part read by one thread would bound the rate): each range holds
	// about total/want rows, whole chains only.
	want := uint64(max(2*runtime.GOMAXPROCS(0), 4))
	per := max(total/want, 1)
	var ranges []*partStream
	for i := 0; i < len(list); {
		first := list[i]
		st := &partStream{part: first.part, first: first.chain}
		for ; i < len(list) && list[i].part == first.part && (st.want == 0 || st.want+list[i].rows <= per); i++ {
			st.last = list[i].chain
			st.want += list[i].rows
		}
		ranges = append(ranges, st)
	}
	if len(ranges) > s.streams {
		// Too many: one stream per part.
		ranges = ranges[:0]
		for _, c := range list {
			if n := len(ranges); n > 0 && ranges[n-1].part == c.part {
				ranges[n-1].last = c.chain
				ranges[n-1].want += c.rows
				continue
			}
			ranges = append(ranges, &partStream{part: c.part, first: c.chain, last: c.chain, want: c.rows})
		}
	}
	m := &merger{}
	// One thread per stream: a part's rows then come in storage order.
	qctx := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"max_threads": 1}))
	for _, st := range ranges {
		q := "SELECT " + verifyColumns + " FROM " + s.table + " WHERE _part = " + Quote(st.part) +
			" AND chain >= " + Quote(st.first) + " AND chain <= " + Quote(st.last)
		if where != "" {
			q += " AND " + where
		}
		r, err := s.conn.Query(qctx, q)
		if err != nil {
			m.close()
			return nil, err
		}
		st.rows, st.index = r, len(m.all)
		m.all = append(m.all, st)
	}
	// A stream's first row shows its read holds the part: a query started
	// after the part was merged away finds no row.
	for _, st := range m.all {
		ok, err := st.advance()
		if err != nil {
			m.close()
			return nil, err
		}
		if !ok {
			m.close()
			return nil, errRaced
		}
		m.h = append(m.h, st)
	}
	heap.Init(&m.h)
	return m, nil
}

// partStream reads one data part, or the chains first..last of it, in
// storage order.
type partStream struct {
	part  string
	first string
	last  string
	want  uint64
	got   uint64
	rows  driver.Rows
	index int
	cur   chain.Candidate
}

// advance reads the next row into cur; false at the end of the part.
func (p *partStream) advance() (bool, error) {
	if !p.rows.Next() {
		if err := p.rows.Err(); err != nil {
			return false, err
		}
		if p.got != p.want && p.got > 0 {
			return false, fmt.Errorf("data part %s (chains %q to %q): read %d rows of %d", p.part, p.first, p.last, p.got, p.want)
		}
		return false, nil
	}
	prevChain, prevSeq := p.cur.Chain, p.cur.Seq
	p.cur = chain.Candidate{}
	if err := p.rows.Scan(&p.cur.Chain, &p.cur.Seq, &p.cur.Prev, &p.cur.Hash, &p.cur.Event); err != nil {
		return false, err
	}
	if p.got > 0 && (p.cur.Chain < prevChain || p.cur.Chain == prevChain && p.cur.Seq < prevSeq) {
		return false, fmt.Errorf("data part %s is not read in key order (%q seq %d after %q seq %d)",
			p.part, p.cur.Chain, p.cur.Seq, prevChain, prevSeq)
	}
	p.got++
	return true, nil
}

// merger merges the parts' streams by (chain, seq); equal keys come in
// part order.
type merger struct {
	all []*partStream
	h   partHeap
}

func (m *merger) next(c *chain.Candidate) (bool, error) {
	if len(m.h) == 0 {
		return false, nil
	}
	top := m.h[0]
	*c = top.cur
	ok, err := top.advance()
	if err != nil {
		return false, err
	}
	if ok {
		heap.Fix(&m.h, 0)
	} else {
		heap.Pop(&m.h)
	}
	return true, nil
}

func (m *merger) close() {
	for _, st := range m.all {
		_ = st.rows.Close()
	}
	m.all, m.h = nil, nil
}

type partHeap []*partStream

func (h partHeap) Len() int { return len(h) }
func (h partHeap) Less(i, j int) bool {
	a, b := &h[i].cur, &h[j].cur
	if a.Chain != b.Chain {
		return a.Chain < b.Chain
	}
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	return h[i].index < h[j].index
}
func (h partHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *partHeap) Push(x any)   { *h = append(*h, x.(*partStream)) }
func (h *partHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
