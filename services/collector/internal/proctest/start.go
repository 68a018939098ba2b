package proctest

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// Start starts the program name (looked up in PATH unless it holds a
// slash) with args in dir, as a child process for the test to observe,
// and kills and reaps it when the test ends.
func Start(tb testing.TB, dir, name string, args ...string) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// SleepPath returns the path of sleep(1) with symbolic links resolved:
// the executable the kernel reports for a process started from it.
func SleepPath(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath("sleep")
	if err != nil {
		tb.Fatal(err)
	}
	p, err = filepath.EvalSymlinks(p)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
