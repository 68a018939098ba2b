package chain

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// batchSize is how many links one hashing task covers.
const batchSize = 512

// Source fills a batch with up to cap(cands) candidates and reports
// whether more may follow. For rows, it sets Chain, Seq, Prev, Hash, Event
// and Pos; for lines, Line and Pos.
type Source func(ctx context.Context, b *Batch) (more bool, err error)

// Batch is what a Source fills.
type Batch struct {
	// Cands are the candidates read; append to it.
	Cands []Candidate
	// Lines marks the candidates as JSONL lines to be parsed.
	Lines bool
}

// Run verifies the links a source yields, in order, hashing them on
// several goroutines while the source reads on. It returns the report,
// or the source's error.
func Run(ctx context.Context, h Hasher, checkpoints []Checkpoint, src Source) (Report, error) {
	return RunWith(ctx, h, src, Options{Checkpoints: checkpoints})
}

// RunVisit is Run calling visit, when not nil, with every link that
// verified, in order.
func RunVisit(ctx context.Context, h Hasher, checkpoints []Checkpoint, src Source, visit func(*Candidate)) (Report, error) {
	return RunWith(ctx, h, src, Options{Checkpoints: checkpoints, Visit: visit})
}

// Options are what RunWith checks besides the chains.
type Options struct {
	// Checkpoints are checked against the chains at the end.
	Checkpoints []Checkpoint
	// Visit, when not nil, is called with every link that verified, in
	// order.
	Visit func(*Candidate)
	// EventIDs reports an event id linked twice in a chain
	// (Report.Duplicate).
	EventIDs bool
	// Inspector, when not nil, checks something of every link's event
	// beside the chain (the auditor's evidence signatures).
	Inspector Inspector
}

// An Inspector checks the events of the links beside the hashing: Inspect
// runs on the hashing goroutines, in no order, with the event as stored
// (canonical JSON, or not when the link is not), and Tally in order with
// every link that verified and what Inspect found of it.
type Inspector interface {
	Inspect(event []byte) Finding
	Tally(c *Candidate, f Finding)
}

// Finding is what an Inspector found of a link: a kind of its own (never
// 0, which stands for "not inspected") and an error.
type Finding struct {
	Kind uint8
	Err  error
}

// RunWith verifies the links a source yields, in order, hashing them
// (and checking their ids and events, as opts says) on several
// goroutines while the source reads on. It returns the report, or the
// source's error.
func RunWith(ctx context.Context, h Hasher, src Source, opts Options) (Report, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := NewVerifier(h, opts.Checkpoints)
	if opts.EventIDs {
		v.EventIDs()
	}
	seed := v.Seed()
	workers := max(runtime.GOMAXPROCS(0), 1)
	work := make(chan *pending, workers*2)
	ordered := make(chan *pending, workers*2)
	var srcErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			d := NewDigester(h)
			for p := range work {
				for i := range p.b.Cands {
					c := &p.b.Cands[i]
					if c.Err != nil {
						continue
					}
					if p.b.Lines {
						d.Line(c.Line, c.Pos, c)
					} else {
						d.Row(c)
					}
					if c.Event == nil {
						continue // a line to parse: Check does it all
					}
					if opts.EventIDs {
						d.ID(c, seed)
					}
					if opts.Inspector != nil {
						c.finding = opts.Inspector.Inspect(c.Event)
					}
				}
				close(p.done)
			}
		})
	}
	go func() {
		defer close(ordered)
		defer close(work)
		for {
			p := &pending{b: &Batch{Cands: make([]Candidate, 0, batchSize)}, done: make(chan struct{})}
			more, err := src(ctx, p.b)
			if len(p.b.Cands) > 0 {
				select {
				case work <- p:
				case <-ctx.Done():
					return
				}
				select {
				case ordered <- p:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				if ctx.Err() == nil {
					srcErr = err
				}
				return
			}
			if !more {
				return
			}
		}
	}()
	defer wg.Wait()
	for p := range ordered {
		<-p.done
		for i := range p.b.Cands {
			c := &p.b.Cands[i]
			if b := v.Check(c); b != nil {
				cancel()
				drain(ordered)
				r := v.Finish()
				r.Broken = b
				return r, nil
			}
			if opts.Inspector != nil {
				if c.finding.Kind == 0 {
					c.finding = opts.Inspector.Inspect(c.Event) // a line Check parsed
				}
				opts.Inspector.Tally(c, c.finding)
			}
			if opts.Visit != nil {
				opts.Visit(c)
			}
		}
	}
	if srcErr != nil {
		return Report{}, srcErr
	}
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	return v.Finish(), nil
}

type pending struct {
	b    *Batch
	done chan struct{}
}

func drain(ch <-chan *pending) {
	for p := range ch {
		<-p.done
	}
}

// chunk is how much Lines reads at a time.
const chunk = 1 << 20

// Lines returns a Source reading JSONL links from r, named name in
// positions. Lines are sliced from large reads, not copied one by one.
func Lines(r io.Reader, name string) Source {
	var carry []byte
	line := 0
	eof := false
	return func(ctx context.Context, b *Batch) (bool, error) {
		b.Lines = true
		for len(b.Cands) < batchSize {
			if i := bytes.IndexByte(carry, '\n'); i >= 0 {
				line++
				if i > 0 {
					ln := carry[:i:i]
					b.Cands = append(b.Cands, Candidate{Line: ln, Pos: Position{File: name, Line: line}})
				}
				carry = carry[i+1:]
				continue
			}
			if len(carry) > MaxLinkSize {
				b.Cands = append(b.Cands, Candidate{Pos: Position{File: name, Line: line + 1},
					Err: fmt.Errorf("%w: longer than %d bytes", ErrLink, MaxLinkSize)})
				return false, nil
			}
			if eof {
				if len(carry) > 0 {
					line++
					b.Cands = append(b.Cands, Candidate{Line: carry, Pos: Position{File: name, Line: line}})
					carry = nil
				}
				return false, nil
			}
			// A fresh buffer: the lines handed out keep pointing into the
			// old one.
			buf := make([]byte, len(carry), len(carry)+chunk)
			copy(buf, carry)
			n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
			carry = buf[:len(buf)+n]
			switch {
			case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
				eof = true
			case err != nil:
				return false, fmt.Errorf("read %s: %w", name, err)
			}
		}
		return true, ctx.Err()
	}
}
