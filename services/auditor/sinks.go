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

	"github.com/runtimetruth/runtimetruth/pkg/evidence/chain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/health"
	"github.com/runtimetruth/runtimetruth/services/auditor/jsonl"
)

// CheckpointSink receives checkpoints.
type CheckpointSink interface {
	SendCheckpoints(ctx context.Context, cps []chain.Checkpoint) error
}

// sinkSet is the sinks of an auditor, in the writer's order: the JSONL
// log, ClickHouse, syslog. Start opens the JSONL and syslog sinks; the
// ClickHouse sink is added once it could be opened (Auditor.bringUp).
type sinkSet struct {
	jsonl, syslog *SinkSpec
	cps           []CheckpointSink

	mu sync.Mutex // ch is set by the wait for it while Shutdown may close the set
	ch *SinkSpec
}

func (s *sinkSet) setClickHouse(sp *SinkSpec) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ch = sp
}

// clickHouse is the ClickHouse sink's spec, nil until it is opened.
func (s *sinkSet) clickHouse() *SinkSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *sinkSet) hasClickHouse() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch != nil
}

// specs lists the sinks opened.
func (s *sinkSet) specs() []SinkSpec {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []SinkSpec
	for _, sp := range []*SinkSpec{s.jsonl, s.ch, s.syslog} {
		if sp != nil {
			out = append(out, *sp)
		}
	}
	return out
}

// close closes the sinks opened.
func (s *sinkSet) close() error {
	var errs []error
	for _, sp := range s.specs() {
		if err := sp.Sink.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close the %s sink: %w", sp.Sink.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// spec makes a sink's spec, wrapped by the test hook.
func (a *Auditor) spec(s Sink, required bool) *SinkSpec {
	if a.wrapSink != nil {
		s = a.wrapSink(s)
	}
	return &SinkSpec{Sink: s, Required: required}
}

// openSinks opens the configured JSONL and syslog sinks and the checkpoint
// file; ClickHouse is opened by bringUp.
func (a *Auditor) openSinks(ctx context.Context, h chain.Hasher) (*sinkSet, error) {
	set := &sinkSet{}
	if c := a.cfg.JSONL; c.Path != "" {
		s, err := jsonl.Open(ctx, jsonl.Options{Path: c.Path, MaxBytes: c.MaxBytes, Hasher: h})
		if err != nil {
			return nil, err
		}
		if s.Dropped > 0 {
			a.log.WarnContext(ctx, "dropped a torn last line of the audit log (an unacknowledged write cut short)", "path", c.Path, "bytes", s.Dropped)
		}
		set.jsonl = a.spec(s, c.Required)
	}
	s, err := a.openSyslog(ctx)
	if err != nil {
		return nil, errors.Join(err, set.close())
	}
	if s != nil {
		set.syslog = a.spec(s, a.cfg.Syslog.Required)
		set.cps = append(set.cps, s)
	}
	if a.cfg.Checkpoint.File != "" {
		set.cps = append(set.cps, &checkpointFile{path: a.cfg.Checkpoint.File})
	}
	return set, nil
}

// checkpointer makes a signed checkpoint of every chain that grew, every
// interval and at shutdown.
type checkpointer struct {
	w        *Writer
	duties   *health.Duties
	key      ed25519.PrivateKey
	sinks    []CheckpointSink
	interval time.Duration
	in       *instruments
	auditor  string
	log      interface {
		WarnContext(ctx context.Context, msg string, args ...any)
	}

	mu   sync.Mutex
	last map[string]uint64
}

// loadCheckpointKey reads the checkpoint signing key, when configured.
func (a *Auditor) loadCheckpointKey() (ed25519.PrivateKey, error) {
	if a.cfg.Checkpoint.KeyFile == "" {
		return nil, nil
	}
	return LoadCheckpointKey(a.cfg.Checkpoint.KeyFile)
}

// newCheckpointer returns the checkpointer of w's chains, or nil when no
// checkpoint is due.
func (a *Auditor) newCheckpointer(w *Writer, sinks []CheckpointSink, key ed25519.PrivateKey) *checkpointer {
	if len(sinks) == 0 || a.cfg.Checkpoint.Interval == 0 {
		return nil
	}
	c := &checkpointer{w: w, duties: a.duties, key: key, sinks: sinks, interval: a.cfg.Checkpoint.Interval, auditor: a.source,
		in: a.in, log: a.log, last: map[string]uint64{}}
	for name, h := range w.Heads() {
		c.last[name] = h.Seq
	}
	return c
}

// DutyCheckpoint is the periodic round of signed checkpoints (Ready fails
// while the last round could not be sent to every checkpoint sink;
// health.MetricDutyFailures counts the failed rounds).
const DutyCheckpoint = "checkpoint"

func (c *checkpointer) run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := c.emit(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				c.log.WarnContext(ctx, "send checkpoints", "err", err)
			}
			c.duties.Report(ctx, DutyCheckpoint, err)
		}
	}
}

// emit sends a checkpoint of each chain whose committed head moved.
func (c *checkpointer) emit(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().UTC()
	var cps []chain.Checkpoint
	for name, h := range c.w.Heads() {
		if h.Seq == 0 || c.last[name] == h.Seq {
			continue
		}
		cps = append(cps, chain.Checkpoint{Chain: name, Seq: h.Seq, Head: h.Hash, Time: now, Auditor: c.auditor}.Sign(c.key))
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
	count(c.in.checkpoints, len(cps))
	return nil
}

// checkpointFile appends checkpoints to a file as JSON lines.
type checkpointFile struct{ path string }

func (f *checkpointFile) SendCheckpoints(_ context.Context, cps []chain.Checkpoint) error {
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
