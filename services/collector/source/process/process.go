package process

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// Evidence kinds and provenance of the records Collect returns.
const (
	// KindProcess is RuntimeTruth's linux.process kind.
	KindProcess = "linux.process"
	// KindIdentity is the linux.process_identity extension kind.
	KindIdentity = "linux.process_identity"
	// CollectorName is the source.collector of both records.
	CollectorName = "procfs"
	// MethodProcess is linux.process's source.method, with the literal
	// placeholder <pid> as RuntimeTruth writes it.
	MethodProcess = "/proc/<pid>/{cwd,exe}"
	// MethodIdentity is linux.process_identity's source.method.
	MethodIdentity = "/proc/<pid>/{stat,status,exe}"
)

const (
	// DefaultProcRoot is where procfs is mounted.
	DefaultProcRoot = "/proc"
	// Unavailable is executable_sha256 when the running image cannot be
	// read.
	Unavailable = "unavailable"
	// DeletedSuffix is what the kernel appends to a link whose target was
	// removed or replaced.
	DeletedSuffix = " (deleted)"
	// userHZ is the kernel's user-visible clock tick rate (USER_HZ), fixed
	// at 100 on every Linux architecture.
	userHZ = 100
	// hashChunk is the read size for hashing, as RuntimeTruth uses.
	hashChunk = 64 << 10
)

// Collector reads procfs. The zero value reads /proc.
type Collector struct {
	// ProcRoot is the procfs mount point; empty means DefaultProcRoot. Tests
	// point it at a fake tree with the same layout.
	ProcRoot string
}

// Collect returns the linux.process and linux.process_identity records of
// pid, using the zero Collector.
func Collect(ctx context.Context, pid int) ([]snapshot.Record, error) {
	return Collector{}.Collect(ctx, pid)
}

// Collect returns the linux.process and linux.process_identity records, in
// that order, of the process pid. It fails with ErrInvalidPID,
// ErrDisappeared, ErrPermission or ErrNoExecutable (wrapped), or with the
// error of a procfs file that could not be parsed.
func (c Collector) Collect(ctx context.Context, pid int) ([]snapshot.Record, error) {
	fail := func(err error) ([]snapshot.Record, error) {
		return nil, fmt.Errorf("collect process %d: %w", pid, err)
	}
	if pid <= 0 {
		return fail(fmt.Errorf("%w: must be a positive integer", ErrInvalidPID))
	}
	if err := ctx.Err(); err != nil {
		return fail(err)
	}
	root := c.ProcRoot
	if root == "" {
		root = DefaultProcRoot
	}
	pfs, err := procfs.NewFS(root)
	if err != nil {
		return fail(err)
	}
	p, err := pfs.Proc(pid)
	if err != nil {
		return fail(classify(err, "stat", false))
	}
	stat, err := p.Stat()
	if err != nil {
		return fail(classify(err, "stat", false))
	}
	// alive reports whether the same incarnation still exists, to tell a
	// process that exited from one that has no cwd or exe.
	alive := func() bool {
		again, err := p.Stat()
		return err == nil && again.Starttime == stat.Starttime
	}
	dir := filepath.Join(root, strconv.Itoa(pid))

	cwd, err := os.Readlink(filepath.Join(dir, "cwd"))
	if err != nil {
		return fail(classify(err, "cwd", alive()))
	}
	exe, err := os.Readlink(filepath.Join(dir, "exe"))
	if err != nil {
		return fail(classify(err, "exe", alive()))
	}
	status, err := p.NewStatus()
	if err != nil {
		return fail(classify(err, "status", false))
	}
	sum, err := hashFile(ctx, filepath.Join(dir, "exe"))
	if err != nil {
		return fail(err)
	}
	bootID, err := readBootID(root)
	if err != nil {
		return fail(err)
	}
	kstat, err := pfs.Stat()
	if err != nil {
		return fail(fmt.Errorf("read boot time: %w", err))
	}
	if kstat.BootTime == 0 {
		return fail(fmt.Errorf("read boot time: no btime in %s", filepath.Join(root, "stat")))
	}
	// Everything above must describe one process: if the pid was reused
	// meanwhile, the records would mix two.
	if !alive() {
		return fail(fmt.Errorf("%w while it was being inspected", ErrDisappeared))
	}

	ticks := stat.Starttime
	started := time.Unix(int64(kstat.BootTime), 0).Add(time.Duration(ticks) * (time.Second / userHZ)).UTC()
	executable, deleted := strings.CutSuffix(exe, DeletedSuffix)
	pidValue := snapshot.Int(int64(pid))
	return []snapshot.Record{
		{
			Plane:  snapshot.Live,
			Kind:   KindProcess,
			Source: snapshot.Source{Collector: CollectorName, Method: MethodProcess},
			Data: snapshot.Data{
				"pid":        pidValue,
				"cwd":        snapshot.String(cwd),
				"executable": snapshot.String(exe),
			},
		},
		{
			Plane:  snapshot.Live,
			Kind:   KindIdentity,
			Source: snapshot.Source{Collector: CollectorName, Method: MethodIdentity},
			Data: snapshot.Data{
				"pid":                pidValue,
				"ppid":               snapshot.Int(int64(stat.PPID)),
				"executable":         snapshot.String(executable),
				"executable_deleted": snapshot.Bool(deleted),
				"executable_sha256":  snapshot.String(sum),
				"cwd":                snapshot.String(cwd),
				"start_time":         snapshot.String(snapshot.FormatTime(started)),
				"start_ticks":        snapshot.Int(int64(ticks)),
				"boot_id":            snapshot.String(bootID),
				"uid":                snapshot.Int(int64(status.UIDs[0])),
				"euid":               snapshot.Int(int64(status.UIDs[1])),
				"gid":                snapshot.Int(int64(status.GIDs[0])),
				"egid":               snapshot.Int(int64(status.GIDs[1])),
				"comm":               snapshot.String(stat.Comm),
				"process_key":        snapshot.String(fmt.Sprintf("%s:%d:%d", bootID, pid, ticks)),
			},
		},
	}, nil
}

// classify maps a procfs read error onto the package's sentinels. exists
// says whether the process was still there after the failure.
func classify(err error, what string, exists bool) error {
	switch {
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%w: read %s: %w", ErrPermission, what, err)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
		if exists {
			return fmt.Errorf("%w: read %s: %w", ErrNoExecutable, what, err)
		}
		return fmt.Errorf("%w: read %s: %w", ErrDisappeared, what, err)
	}
	return fmt.Errorf("read %s: %w", what, err)
}

// hashFile returns "sha256:<hex>" of the file at path, or Unavailable when
// it cannot be opened or read. Only the context ending is an error.
func hashFile(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return Unavailable, nil
	}
	defer func() { _ = f.Close() }() // opened read-only: closing cannot lose data
	h := sha256.New()
	if _, err := io.CopyBuffer(h, ctxReader{ctx: ctx, r: f}, make([]byte, hashChunk)); err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return "", ctxErr
		}
		return Unavailable, nil
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func readBootID(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "sys", "kernel", "random", "boot_id"))
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", errors.New("read boot id: empty")
	}
	return id, nil
}

// ctxReader stops a long read when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}
