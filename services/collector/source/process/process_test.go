package process_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/proctest"
	"github.com/runtimetruth/runtimetruth/services/collector/source/process"
)

// probeEnv makes the test binary act as an unprivileged probe that collects
// the pid in the variable and reports the outcome by exit code.
const probeEnv = "RUNTIMETRUTH_PROCESS_PROBE_PID"

func TestMain(m *testing.M) {
	if pid := os.Getenv(probeEnv); pid != "" {
		os.Exit(probe(pid))
	}
	goleak.VerifyTestMain(m)
}

func probe(arg string) int {
	pid, err := strconv.Atoi(arg)
	if err != nil {
		return 2
	}
	_, err = process.Collect(context.Background(), pid)
	_, _ = fmt.Fprintln(os.Stdout, err)
	if errors.Is(err, process.ErrPermission) {
		return 0
	}
	return 1
}

var identityKeys = []string{
	"boot_id", "comm", "cwd", "egid", "euid", "executable", "executable_deleted",
	"executable_sha256", "gid", "pid", "ppid", "process_key", "start_ticks",
	"start_time", "uid",
}

// startSleep starts `sleep 30` from its resolved path in dir and kills it
// at cleanup.
func startSleep(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	return proctest.Start(t, dir, proctest.SleepPath(t), "30")
}

func tempDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	return dir
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { require.NoError(t, f.Close()) }()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func keys(d snapshot.Data) []string {
	out := make([]string, 0, len(d))
	for k := range d {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func str(t *testing.T, d snapshot.Data, key string) string {
	t.Helper()
	s, ok := d[key].Str()
	require.True(t, ok, "%s is a string", key)
	return s
}

func integer(t *testing.T, d snapshot.Data, key string) int64 {
	t.Helper()
	n, ok := d[key].IntValue()
	require.True(t, ok, "%s is an integer", key)
	return n
}

func collect(t *testing.T, pid int) (proc, identity snapshot.Record) {
	t.Helper()
	records, err := process.Collect(context.Background(), pid)
	require.NoError(t, err)
	require.Len(t, records, 2)
	return records[0], records[1]
}

func TestCollectRealProcess(t *testing.T) {
	dir := tempDir(t)
	before := time.Now()
	cmd := startSleep(t, dir)
	pid := cmd.Process.Pid
	exe := proctest.SleepPath(t)

	proc, identity := collect(t, pid)

	assert.Equal(t, snapshot.Record{
		Plane:  snapshot.Live,
		Kind:   "linux.process",
		Source: snapshot.Source{Collector: "procfs", Method: "/proc/<pid>/{cwd,exe}"},
		Data: snapshot.Data{
			"pid":        snapshot.Int(int64(pid)),
			"cwd":        snapshot.String(dir),
			"executable": snapshot.String(exe),
		},
	}, proc)

	assert.Equal(t, snapshot.Live, identity.Plane)
	assert.Equal(t, "linux.process_identity", identity.Kind)
	assert.Equal(t, snapshot.Source{Collector: "procfs", Method: "/proc/<pid>/{stat,status,exe}"}, identity.Source)
	d := identity.Data
	assert.Equal(t, identityKeys, keys(d))
	bootID, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	require.NoError(t, err)
	ticks := integer(t, d, "start_ticks")
	assert.Positive(t, ticks)
	assert.Equal(t, snapshot.Int(int64(pid)), d["pid"])
	assert.Equal(t, snapshot.Int(int64(os.Getpid())), d["ppid"])
	assert.Equal(t, snapshot.String(exe), d["executable"])
	assert.Equal(t, snapshot.Bool(false), d["executable_deleted"])
	assert.Equal(t, snapshot.String(fileSHA256(t, exe)), d["executable_sha256"])
	assert.Equal(t, snapshot.String(dir), d["cwd"])
	assert.Equal(t, snapshot.String(strings.TrimSpace(string(bootID))), d["boot_id"])
	assert.Equal(t, snapshot.Int(int64(os.Getuid())), d["uid"])
	assert.Equal(t, snapshot.Int(int64(os.Geteuid())), d["euid"])
	assert.Equal(t, snapshot.Int(int64(os.Getgid())), d["gid"])
	assert.Equal(t, snapshot.Int(int64(os.Getegid())), d["egid"])
	assert.Equal(t, snapshot.String("sleep"), d["comm"])
	assert.Equal(t, snapshot.String(fmt.Sprintf("%s:%d:%d", strings.TrimSpace(string(bootID)), pid, ticks)), d["process_key"])

	startTime := str(t, d, "start_time")
	assert.Regexp(t, regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z$`), startTime)
	started, err := time.Parse(time.RFC3339Nano, startTime)
	require.NoError(t, err)
	// btime has whole-second resolution and follows the wall clock.
	assert.WithinDuration(t, before, started, 3*time.Second)
}

func TestCollectIdentityChangesOnRestart(t *testing.T) {
	dir := tempDir(t)
	first := startSleep(t, dir)
	_, before := collect(t, first.Process.Pid)
	require.NoError(t, first.Process.Kill())
	_ = first.Wait()

	second := startSleep(t, dir)
	_, after := collect(t, second.Process.Pid)

	assert.NotEqual(t, before.Data["process_key"], after.Data["process_key"])
	assert.Equal(t, before.Data["boot_id"], after.Data["boot_id"])
	assert.Equal(t, before.Data["executable_sha256"], after.Data["executable_sha256"])
	assert.True(t, before.Data["pid"] != after.Data["pid"] || before.Data["start_ticks"] != after.Data["start_ticks"],
		"a new incarnation has a new pid or start time")
}

func TestCollectDeletedExecutable(t *testing.T) {
	dir := tempDir(t)
	src := proctest.SleepPath(t)
	binary := filepath.Join(dir, "agent")
	copyFile(t, src, binary)
	cmd := proctest.Start(t, dir, binary, "30")

	// Replace the file on disk: the process keeps running the old image.
	require.NoError(t, os.Remove(binary))
	require.NoError(t, os.WriteFile(binary, []byte("#!/bin/sh\necho replaced\n"), 0o755))

	proc, identity := collect(t, cmd.Process.Pid)
	assert.Equal(t, snapshot.String(binary+" (deleted)"), proc.Data["executable"], "linux.process keeps the kernel's view")
	assert.Equal(t, snapshot.String(binary), identity.Data["executable"])
	assert.Equal(t, snapshot.Bool(true), identity.Data["executable_deleted"])
	assert.Equal(t, snapshot.String(fileSHA256(t, src)), identity.Data["executable_sha256"], "hash of the running image")
	assert.NotEqual(t, snapshot.String(fileSHA256(t, binary)), identity.Data["executable_sha256"])
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dst, in, 0o755))
}

func TestCollectErrors(t *testing.T) {
	exited := func(t *testing.T) int {
		cmd := exec.Command("true")
		require.NoError(t, cmd.Run())
		return cmd.Process.Pid
	}
	killed := func(t *testing.T) int {
		cmd := startSleep(t, tempDir(t))
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()
		return cmd.Process.Pid
	}
	zombie := func(t *testing.T) int {
		cmd := exec.Command("true")
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Wait() })
		waitFor(t, func() bool { return state(cmd.Process.Pid) == "Z" })
		return cmd.Process.Pid
	}
	tests := []struct {
		name    string
		pid     func(t *testing.T) int
		wantErr error
		wantMsg string
	}{
		{name: "zero", pid: func(*testing.T) int { return 0 }, wantErr: process.ErrInvalidPID, wantMsg: "collect process 0: invalid pid"},
		{name: "negative", pid: func(*testing.T) int { return -4 }, wantErr: process.ErrInvalidPID},
		{name: "exited", pid: exited, wantErr: process.ErrDisappeared, wantMsg: "disappeared"},
		{name: "killed and reaped", pid: killed, wantErr: process.ErrDisappeared, wantMsg: "disappeared"},
		{name: "zombie", pid: zombie, wantErr: process.ErrNoExecutable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pid := tc.pid(t)
			records, err := process.Collect(context.Background(), pid)
			require.ErrorIs(t, err, tc.wantErr)
			assert.Nil(t, records)
			assert.Contains(t, err.Error(), fmt.Sprintf("collect process %d: ", pid))
			if tc.wantMsg != "" {
				assert.Contains(t, err.Error(), tc.wantMsg)
			}
		})
	}
}

func TestCollectCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := process.Collect(ctx, os.Getpid())
	require.ErrorIs(t, err, context.Canceled)
}

// TestCollectPermissionDenied inspects a root-owned process as an
// unprivileged user: procfs refuses its cwd and exe.
func TestCollectPermissionDenied(t *testing.T) {
	target := startSleep(t, tempDir(t)).Process.Pid
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the probe as another user")
	}
	// Copy the test binary where the unprivileged user can execute it.
	dir, err := os.MkdirTemp("", "runtimetruth-probe-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, "process.test")
	copyFile(t, self, bin)

	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), probeEnv+"="+strconv.Itoa(target))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "probe output: %s", out)
	assert.Contains(t, string(out), fmt.Sprintf("collect process %d: permission denied", target))
}

func TestCollectFakeProcRoot(t *testing.T) {
	root := t.TempDir()
	cwd := tempDir(t)
	exe := filepath.Join(tempDir(t), "agent")
	require.NoError(t, os.WriteFile(exe, []byte("agent image"), 0o755))
	const pid = 3036
	dir := filepath.Join(root, strconv.Itoa(pid))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "sys", "kernel", "random"), 0o755))
	require.NoError(t, os.Symlink(cwd, filepath.Join(dir, "cwd")))
	require.NoError(t, os.Symlink(exe, filepath.Join(dir, "exe")))
	writeFile(t, filepath.Join(dir, "stat"),
		"3036 (my (agent)) S 1 3036 3036 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 12345 9000000 400 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 0 0 0 0 0 0\n")
	writeFile(t, filepath.Join(dir, "status"), "Name:\tmy (agent)\nUid:\t1000\t1001\t1000\t1000\nGid:\t100\t101\t100\t100\n")
	writeFile(t, filepath.Join(dir, "environ"), "OPENAI_API_KEY=sk-DO-NOT-CAPTURE\x00")
	writeFile(t, filepath.Join(dir, "cmdline"), "agent\x00--token=DO-NOT-CAPTURE\x00")
	writeFile(t, filepath.Join(root, "stat"), "cpu  1 2 3 4 5 6 7 8 9 10\nbtime 1790000000\nprocesses 10\n")
	writeFile(t, filepath.Join(root, "sys", "kernel", "random", "boot_id"), "0d4c2a1e-7a4c-4f0e-9b1e-6f1f5f1c2b3a\n")

	records, err := process.Collector{ProcRoot: root}.Collect(context.Background(), pid)
	require.NoError(t, err)
	require.Len(t, records, 2)
	assert.Equal(t, snapshot.Data{
		"pid":        snapshot.Int(pid),
		"cwd":        snapshot.String(cwd),
		"executable": snapshot.String(exe),
	}, records[0].Data)
	sum := sha256.Sum256([]byte("agent image"))
	assert.Equal(t, snapshot.Data{
		"pid":                snapshot.Int(pid),
		"ppid":               snapshot.Int(1),
		"executable":         snapshot.String(exe),
		"executable_deleted": snapshot.Bool(false),
		"executable_sha256":  snapshot.String("sha256:" + hex.EncodeToString(sum[:])),
		"cwd":                snapshot.String(cwd),
		"start_time":         snapshot.String("2026-09-21T14:15:23.450000Z"),
		"start_ticks":        snapshot.Int(12345),
		"boot_id":            snapshot.String("0d4c2a1e-7a4c-4f0e-9b1e-6f1f5f1c2b3a"),
		"uid":                snapshot.Int(1000),
		"euid":               snapshot.Int(1001),
		"gid":                snapshot.Int(100),
		"egid":               snapshot.Int(101),
		"comm":               snapshot.String("my (agent)"),
		"process_key":        snapshot.String("0d4c2a1e-7a4c-4f0e-9b1e-6f1f5f1c2b3a:3036:12345"),
	}, records[1].Data)
	for _, r := range records {
		for k, v := range r.Data {
			assert.NotContains(t, v.String(), "DO-NOT-CAPTURE", k)
		}
	}

	// An unreadable image is recorded as unavailable, not an error.
	require.NoError(t, os.Remove(exe))
	require.NoError(t, os.Symlink(filepath.Join(cwd, "missing"), exe))
	records, err = process.Collector{ProcRoot: root}.Collect(context.Background(), pid)
	require.NoError(t, err)
	assert.Equal(t, snapshot.String("unavailable"), records[1].Data["executable_sha256"])
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

// state returns the process state letter from /proc/<pid>/stat.
func state(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// waitFor polls cond until it holds or five seconds pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
