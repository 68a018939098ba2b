package auditor

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/runtimetruth/runtimetruth/services/auditor/checkpoint"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
	"github.com/runtimetruth/runtimetruth/services/auditor/link"
)

// CheckpointSink receives checkpoints.
type CheckpointSink interface {
	SendCheckpoints(ctx context.Context, cps []checkpoint.Checkpoint) error
}

// openSinks opens the configured sinks.
func (a *Auditor) openSinks(ctx context.Context, h link.Hasher) (specs []SinkSpec, cps []CheckpointSink, err error) {
	defer func() {
		if err != nil {
			for _, s := range specs {
				_ = s.Sink.Close()
			}
		}
	}()
	add := func(s Sink, required bool) {
		if a.wrapSink != nil {
			s = a.wrapSink(s)
		}
		specs = append(specs, SinkSpec{Sink: s, Required: required})
	}
	if c := a.cfg.JSONL; c.Path != "" {
		s, err := jsonl.Open(ctx, jsonl.Options{Path: c.Path, MaxBytes: c.MaxBytes, Hasher: h})
		if err != nil {
			return specs, nil, err
		}
		if s.Dropped > 0 {
			a.log.WarnContext(ctx, "dropped a torn last line of the audit log (an unacknowledged write cut short)", "path", c.Path, "bytes", s.Dropped)
		}
		add(s, c.Required)
	}
	more, mcps, err := a.openNetworkSinks(ctx)
	for _, s := range more {
		add(s.Sink, s.Required)
	}
	if err != nil {
		return specs, nil, err
	}
	cps = append(cps, mcps...)
	if a.cfg.Checkpoint.File != "" {
		cps = append(cps, &checkpointFile{path: a.cfg.Checkpoint.File})
	}
	return specs, cps, nil
}

// checkpointer makes a signed checkpoint of every chain that grew, every
// interval and at shutdown.
type checkpointer struct {
	w        *Writer
	key      ed25519.PrivateKey
	sinks    []CheckpointSink
	interval time.Duration
	auditor  string
	stats    *Stats
	log      interface {
		WarnContext(ctx context.Context, msg string, args ...any)
	}

	mu   sync.Mutex
	last map[string]uint64
}

func (a *Auditor) newCheckpointer(w *Writer, sinks []CheckpointSink) (*checkpointer, error) {
	if len(sinks) == 0 || a.cfg.Checkpoint.Interval == 0 {
		return nil, nil
	}
	var key ed25519.PrivateKey
	if a.cfg.Checkpoint.KeyFile != "" {
		var err error
		if key, err = checkpoint.LoadPrivateKey(a.cfg.Checkpoint.KeyFile); err != nil {
			return nil, err
		}
	}
	c := &checkpointer{w: w, key: key, sinks: sinks, interval: a.cfg.Checkpoint.Interval, auditor: a.source,
		stats: &a.stats, log: a.log, last: map[string]uint64{}}
	for name, h := range w.Heads() {
		c.last[name] = h.Seq
	}
	return c, nil
}

func (c *checkpointer) run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.emit(ctx); err != nil && ctx.Err() == nil {
				c.log.WarnContext(ctx, "send checkpoints", "err", err)
			}
		}
	}
}

// emit sends a checkpoint of each chain whose committed head moved.
func (c *checkpointer) emit(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UTC()
	var cps []checkpoint.Checkpoint
	for name, h := range c.w.Heads() {
		if h.Seq == 0 || c.last[name] == h.Seq {
			continue
		}
		cps = append(cps, checkpoint.Sign(checkpoint.Checkpoint{Chain: name, Seq: h.Seq, Head: h.Hash, Time: now, Auditor: c.auditor}, c.key))
	}
	if len(cps) == 0 {
		return nil
	}
	var errs []error
	for _, s := range c.sinks {
		if err := s.SendCheckpoints(ctx, cps); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, cp := range cps {
		c.last[cp.Chain] = cp.Seq
	}
	c.stats.Checkpoints.Add(uint64(len(cps)))
	return nil
}

// checkpointFile appends checkpoints to a file as JSON lines.
type checkpointFile struct{ path string }

func (f *checkpointFile) SendCheckpoints(_ context.Context, cps []checkpoint.Checkpoint) error {
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return fmt.Errorf("checkpoint file: %w", err)
	}
	file, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("checkpoint file: %w", err)
	}
	var buf []byte
	for _, c := range cps {
		buf = append(append(buf, c.JSON()...), '\n')
	}
	_, err = file.Write(buf)
	if err == nil {
		err = file.Sync()
	}
	return errors.Join(err, file.Close())
}
