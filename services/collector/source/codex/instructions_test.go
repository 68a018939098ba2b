package codex_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/source/codex"
)

// probeDeadline bounds a probe over hostile instruction files: a FIFO
// opened for reading would block it until a writer came, /dev/zero read
// to its end would never finish.
const probeDeadline = 20 * time.Second

// collectWithin runs the fake's collection and fails the test if it does
// not finish within probeDeadline; then every FIFO in fifos is opened for
// writing and closed, so that a probe blocked on one ends.
func collectWithin(t *testing.T, r *fakeRun, fifos ...string) []snapshot.Record {
	t.Helper()
	type out struct {
		recs []snapshot.Record
		err  error
	}
	done := make(chan out, 1)
	go func() {
		_, recs, err := r.collect(t)
		done <- out{recs, err}
	}()
	select {
	case o := <-done:
		require.NoError(t, o.err)
		return o.recs
	case <-time.After(probeDeadline):
		for _, f := range fifos {
			if w, err := os.OpenFile(f, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
		}
		t.Fatalf("the probe did not finish within %s", probeDeadline)
		return nil
	}
}

// withSources makes the fake report these instructionSources.
func withSources(t *testing.T, r *fakeRun, sources ...string) {
	t.Helper()
	b, err := json.Marshal(sources)
	require.NoError(t, err)
	r.opts.Env = append(r.opts.Env, fakeSourcesEnv+"="+string(b))
	r.opts.ResolveMCP, r.opts.ResolveThread = false, true
}

func sparse(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
}

// Instruction files are fingerprinted only when they are regular files
// of at most codex.MaxInstructionSize bytes; a FIFO (named or behind a
// symbolic link), /dev/zero (named or as AGENTS.md) and a larger file
// are "unavailable", as a missing one is, and never hang the probe. A
// symbolic link to a regular file is followed, as Codex follows it.
// RuntimeTruth streams whatever the path names: a FIFO hangs it, /dev/zero
// never ends, any size is hashed.
func TestDifferenceInstructionFilesRegularAndBounded(t *testing.T) {
	r := newFakeRun(t, "ok")
	ws := r.dir
	require.NoError(t, os.Remove(filepath.Join(ws, "AGENTS.md")))
	require.NoError(t, os.Symlink("/dev/zero", filepath.Join(ws, "AGENTS.md")))
	writeFile(t, filepath.Join(ws, "real.md"), "# Rules\n")
	require.NoError(t, os.Symlink("real.md", filepath.Join(ws, "link.md")))
	require.NoError(t, os.Symlink("fifo", filepath.Join(ws, "fifo-link.md")))
	sparse(t, filepath.Join(ws, "cap.md"), codex.MaxInstructionSize)
	sparse(t, filepath.Join(ws, "over.md"), codex.MaxInstructionSize+1)
	withSources(t, r, "AGENTS.md", "/dev/zero", "fifo", "fifo-link.md", "link.md", "cap.md", "over.md", "adir")

	recs := collectWithin(t, r, filepath.Join(ws, "fifo"))
	zeros := sha256.Sum256(make([]byte, codex.MaxInstructionSize))
	assert.Equal(t, snapshot.Data{
		"source_count":        snapshot.Int(8),
		"source:AGENTS.md":    snapshot.String("unavailable"),
		"source:/dev/zero":    snapshot.String("unavailable"),
		"source:fifo":         snapshot.String("unavailable"),
		"source:fifo-link.md": snapshot.String("unavailable"),
		"source:link.md":      snapshot.String(sha256Hex(t, filepath.Join(ws, "real.md"))),
		"source:cap.md":       snapshot.String("sha256:" + hex.EncodeToString(zeros[:])),
		"source:over.md":      snapshot.String("unavailable"),
		"source:adir":         snapshot.String("unavailable"),
	}, recordsByKind(t, recs)["codex.instructions"].Data)
}

// A FIFO is never even opened for reading: its type is checked on an
// O_PATH descriptor first (which, since Linux 5.19, raises no inotify
// event), so a device whose open routine acts (a watchdog, a tape) is
// never opened either.
func TestInstructionFIFOIsNeverOpened(t *testing.T) {
	if !kernelAtLeast(t, 5, 19) {
		t.Skip("O_PATH opens raise inotify IN_OPEN before Linux 5.19; the check needs a newer kernel")
	}
	r := newFakeRun(t, "ok")
	fifo := filepath.Join(r.dir, "fifo")
	withSources(t, r, "fifo")
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	require.NoError(t, err)
	defer func() { _ = unix.Close(in) }()
	_, err = unix.InotifyAddWatch(in, fifo, unix.IN_OPEN|unix.IN_ACCESS)
	require.NoError(t, err)

	recs := collectWithin(t, r, fifo)
	assert.Equal(t, snapshot.String("unavailable"), recordsByKind(t, recs)["codex.instructions"].Data["source:fifo"])
	buf := make([]byte, 4096)
	n, err := unix.Read(in, buf)
	if err != unix.EAGAIN {
		require.NoError(t, err)
		t.Fatalf("the FIFO was opened (%d bytes of inotify events)", n)
	}
}

func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	require.NoError(t, unix.Uname(&u))
	rel := unix.ByteSliceToString(u.Release[:])
	parts := strings.SplitN(rel, ".", 3)
	require.GreaterOrEqual(t, len(parts), 2, rel)
	maj, err := strconv.Atoi(parts[0])
	require.NoError(t, err, rel)
	mnr, err := strconv.Atoi(strings.TrimFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	require.NoError(t, err, rel)
	return maj > major || maj == major && mnr >= minor
}

// TestInstructionsReadAsTheAccount: a collector running as root probes
// Codex as the workspace's owner, and fingerprints the instruction
// sources Codex reports as that account reads them. An AGENTS.md linked
// to a file only root may read is "unavailable", never the digest of
// /etc/shadow; "~" is the account's home, not the collector's.
func TestInstructionsReadAsTheAccount(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("taking another account's permissions needs root")
	}
	nobody := &codex.Account{UID: 65534, GID: 65534, Name: "nobody"}
	// t.TempDir's parent is 0700: nobody could not reach anything in it.
	base, err := os.MkdirTemp("", "rt-instructions-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	require.NoError(t, os.Chmod(base, 0o755))
	ws := filepath.Join(base, "ws")
	home := filepath.Join(base, "home")
	for _, d := range []string{ws, home} {
		require.NoError(t, os.Mkdir(d, 0o755))
	}
	nobody.Home = home
	secretFile := filepath.Join(base, "shadow")
	writeFile(t, secretFile, "root:$6$secret\n")
	require.NoError(t, os.Chmod(secretFile, 0o600))
	require.NoError(t, os.Symlink(secretFile, filepath.Join(ws, "AGENTS.md")))
	writeFile(t, filepath.Join(ws, "OPEN.md"), "open\n")
	require.NoError(t, os.Chmod(filepath.Join(ws, "OPEN.md"), 0o644))
	writeFile(t, filepath.Join(home, "AGENTS.md"), "home\n")
	require.NoError(t, os.Chmod(filepath.Join(home, "AGENTS.md"), 0o644))
	sum := func(s string) snapshot.Value {
		h := sha256.Sum256([]byte(s))
		return snapshot.String("sha256:" + hex.EncodeToString(h[:]))
	}

	sources := []string{"AGENTS.md", "OPEN.md", "~/AGENTS.md"}
	rec, err := codex.InstructionsRecord(t.Context(), ws, sources, nobody)
	require.NoError(t, err)
	assert.Equal(t, snapshot.String("unavailable"), rec.Data["source:AGENTS.md"], "the digest of a file the account may not read")
	assert.Equal(t, sum("open\n"), rec.Data["source:OPEN.md"])
	assert.Equal(t, sum("home\n"), rec.Data["source:~/AGENTS.md"], "~ is the account's home")

	// As this process (root), the same link is read: the account is what
	// makes the difference.
	rec, err = codex.InstructionsRecord(t.Context(), ws, sources[:1], nil)
	require.NoError(t, err)
	assert.Equal(t, sum("root:$6$secret\n"), rec.Data["source:AGENTS.md"])

	// The collector itself keeps its own identity afterwards.
	f, err := os.Open(secretFile)
	require.NoError(t, err, "a thread of this process kept the account's identity")
	require.NoError(t, f.Close())
}
