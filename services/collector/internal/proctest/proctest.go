// Package proctest measures and bounds the test process itself, for the
// tests of readers of hostile files: how many bytes it has read
// (BytesRead), its /proc/self/status figures (Status), a cap on its
// address space (LimitAddressSpace), and a test run again in a child
// process under a deadline (RunChild), so that a reader that reads
// /dev/zero whole dies of the cap and one that blocks on a FIFO misses the
// deadline: either fails the test instead of taking the machine or
// hanging the run; and child processes for the tests of collectors that
// observe processes (Start, SleepPath). Linux only (procfs).
package proctest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BytesRead returns the bytes this process has read so far (rchar of
// /proc/self/io: every read system call, from any file, counts).
func BytesRead(tb testing.TB) int64 { return procFigure(tb, "/proc/self/io", "rchar:") }

// Status returns a kB figure of /proc/self/status, such as "VmSize:" or
// "VmPeak:".
func Status(tb testing.TB, key string) int64 {
	return procFigure(tb, "/proc/self/status", key)
}

// procFigure returns the number after key on its line of a procfs file
// (a " kB" unit dropped).
func procFigure(tb testing.TB, file, key string) int64 {
	tb.Helper()
	f, err := os.Open(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				tb.Fatalf("%s %s: %v", file, key, err)
			}
			return n
		}
	}
	tb.Fatalf("no %s in %s (%v)", key, file, sc.Err())
	return 0
}

// LimitAddressSpace caps the process's address space (RLIMIT_AS) at what
// it maps now plus budget bytes (the race detector's shadow memory
// included, which is why the cap is relative).
func LimitAddressSpace(tb testing.TB, budget uint64) {
	tb.Helper()
	limit := uint64(Status(tb, "VmSize:"))<<10 + budget
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		tb.Fatal(err)
	}
}

// RunChild runs the test named test again in a child process (this test
// binary, with env added to the environment, which is how the child
// knows it is one) and returns its output. It fails tb when the child
// misses the deadline (it blocked), fails or dies (a reader read a huge
// file whole under LimitAddressSpace), or passes without running test.
func RunChild(tb testing.TB, test string, env []string, deadline time.Duration) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	out, err := cmd.CombinedOutput()
	switch {
	case ctx.Err() != nil:
		tb.Fatalf("the child did not finish: killed after %v (it blocked)\n%s", time.Since(start).Round(time.Second), excerpt(string(out), 40))
	case err != nil:
		tb.Fatalf("the child failed or died (%v; out of memory: a file was read whole?):\n%s", err, excerpt(string(out), 12))
	case !strings.Contains(string(out), fmt.Sprintf("--- PASS: %s ", test)):
		tb.Fatalf("the child ran no %s:\n%s", test, out)
	}
	return string(out)
}

// excerpt returns the first and the last n lines of s (a dying Go
// program says why first, then dumps its goroutines).
func excerpt(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) <= 2*n {
		return s
	}
	return strings.Join(lines[:n], "\n") + "\n[...]\n" + strings.Join(lines[len(lines)-n:], "\n")
}
