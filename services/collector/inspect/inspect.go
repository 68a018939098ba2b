package inspect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/source/git"
	"github.com/runtimetruth/runtimetruth/services/collector/source/process"
	"github.com/runtimetruth/runtimetruth/services/collector/source/systemd"
)

// Options configures an inspection. The zero value collects everything with
// the default collectors.
type Options struct {
	// SeedOnly omits the extension kinds (linux.process_identity,
	// git.remotes), so the snapshot is exactly what RuntimeTruth emits.
	SeedOnly bool
	// Git, Process and Systemd are the collectors used; their zero values
	// run git and systemctl from PATH and read /proc.
	Git     git.Collector
	Process process.Collector
	Systemd systemd.Collector
}

// Git inspects the git work tree containing path.
func Git(ctx context.Context, path string, opts Options) (*snapshot.Snapshot, error) {
	records, err := opts.git(ctx, path)
	if err != nil {
		return nil, err
	}
	root, _ := records[0].Data["repository_root"].Str()
	return build(snapshot.Target{Kind: git.KindRepository, Identifier: root}, records)
}

// Process inspects the running process pid and the git work tree it runs
// in, if any.
func Process(ctx context.Context, pid int, opts Options) (*snapshot.Snapshot, error) {
	records, exe, err := opts.process(ctx, pid)
	if err != nil {
		return nil, err
	}
	return build(snapshot.Target{Kind: process.KindProcess, Identifier: exe}, records)
}

// Systemd inspects the systemd unit, its main process when it has one, and
// the git work tree that process runs in, if any.
func Systemd(ctx context.Context, unit string, opts Options) (*snapshot.Snapshot, error) {
	rec, err := opts.Systemd.Collect(ctx, unit)
	if err != nil {
		return nil, err
	}
	id, _ := rec.Data["unit_id"].Str()
	records := []snapshot.Record{rec}
	if pid, ok := rec.Data["main_pid"].IntValue(); ok && pid != 0 {
		more, _, err := opts.process(ctx, int(pid))
		if err != nil {
			return nil, fmt.Errorf("inspect systemd unit %s: main process: %w", id, err)
		}
		records = append(records, more...)
	}
	return build(snapshot.Target{Kind: systemd.Kind, Identifier: id}, records)
}

// process returns the process records followed by the git records of its
// working directory, and the executable path without " (deleted)".
func (o Options) process(ctx context.Context, pid int) ([]snapshot.Record, string, error) {
	records, err := o.Process.Collect(ctx, pid)
	if err != nil {
		return nil, "", err
	}
	proc := records[0]
	exe, _ := proc.Data["executable"].Str()
	cwd, _ := proc.Data["cwd"].Str()
	if o.SeedOnly {
		records = records[:1]
	}
	code, err := o.gitOfCwd(ctx, cwd)
	if err != nil {
		return nil, "", err
	}
	return append(records, code...), strings.TrimSuffix(exe, process.DeletedSuffix), nil
}

// gitOfCwd returns the git records of a process's working directory, or
// none when it is not in a work tree or no longer exists.
func (o Options) gitOfCwd(ctx context.Context, cwd string) ([]snapshot.Record, error) {
	if strings.HasSuffix(cwd, process.DeletedSuffix) {
		if _, err := os.Stat(cwd); err != nil {
			return nil, nil // the directory was removed under the process
		}
	}
	records, err := o.git(ctx, cwd)
	if errors.Is(err, git.ErrNotRepository) {
		return nil, nil
	}
	return records, err
}

func (o Options) git(ctx context.Context, path string) ([]snapshot.Record, error) {
	if o.SeedOnly {
		rec, err := o.Git.Repository(ctx, path)
		if err != nil {
			return nil, err
		}
		return []snapshot.Record{rec}, nil
	}
	return o.Git.Collect(ctx, path)
}

func build(target snapshot.Target, records []snapshot.Record) (*snapshot.Snapshot, error) {
	s := snapshot.New(target, records...)
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("inspect %s: %w", target, err)
	}
	return s, nil
}
