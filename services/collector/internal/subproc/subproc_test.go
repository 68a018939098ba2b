package subproc_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/services/collector/internal/subproc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func sh(script string) subproc.Command {
	return subproc.Command{Path: "sh", Args: []string{"-c", script}, Label: "sh script"}
}

func TestRunCapturesStdout(t *testing.T) {
	tests := []struct {
		name string
		cmd  subproc.Command
		want string
	}{
		{name: "stdout only", cmd: sh("echo out; echo noise >&2"), want: "out\n"},
		{name: "arguments are not shell words", cmd: subproc.Command{Path: "echo", Args: []string{"a; echo injected $(id)"}}, want: "a; echo injected $(id)\n"},
		{name: "environment is replaced", cmd: subproc.Command{Path: "sh", Args: []string{"-c", `printf '%s|%s' "$FOO" "$HOME"`}, Env: []string{"FOO=bar"}}, want: "bar|"},
		{name: "stdin is empty", cmd: sh("cat"), want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.cmd.Run(context.Background())
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(out))
		})
	}
}

func TestRunReportsExitStatusAndLastStderrLine(t *testing.T) {
	tests := []struct {
		name       string
		script     string
		wantStatus int
		wantStderr string
		wantMsg    string
	}{
		{
			name:       "last non-empty line",
			script:     "echo 'first' >&2; echo 'Unit agent.service could not be found.' >&2; echo '  ' >&2; exit 4",
			wantStatus: 4,
			wantStderr: "Unit agent.service could not be found.",
			wantMsg:    "sh script: exit status 4: Unit agent.service could not be found.",
		},
		{name: "no stderr", script: "exit 1", wantStatus: 1, wantMsg: "sh script: exit status 1"},
		{
			name:       "control characters replaced",
			script:     `printf 'bad\033[31mred\n' >&2; exit 2`,
			wantStatus: 2,
			wantStderr: "bad?[31mred",
			wantMsg:    "sh script: exit status 2: bad?[31mred",
		},
		{
			name:       "stderr beyond the bound keeps the tail",
			script:     "head -c 300000 /dev/zero | tr '\\0' x >&2; echo >&2; echo tail-line >&2; exit 3",
			wantStatus: 3,
			wantStderr: "tail-line",
			wantMsg:    "sh script: exit status 3: tail-line",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sh(tc.script).Run(context.Background())
			var exitErr *subproc.ExitError
			require.ErrorAs(t, err, &exitErr)
			assert.Equal(t, tc.wantStatus, exitErr.Status)
			assert.Equal(t, tc.wantStderr, exitErr.Stderr)
			assert.EqualError(t, err, tc.wantMsg)
		})
	}
}

func TestRunReportsSignal(t *testing.T) {
	_, err := sh("kill -9 $$").Run(context.Background())
	var exitErr *subproc.ExitError
	require.ErrorAs(t, err, &exitErr)
	assert.Equal(t, -1, exitErr.Status)
	assert.Equal(t, "signal: killed", exitErr.State)
}

func TestRunErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		cmd     subproc.Command
		wantErr error
		wantMsg string
	}{
		{name: "not in PATH", ctx: context.Background(), cmd: subproc.Command{Path: "runtimetruth-no-such-program"}, wantErr: subproc.ErrNotFound},
		{name: "no such path", ctx: context.Background(), cmd: subproc.Command{Path: "/nonexistent/bin/git", Args: []string{"status"}}, wantErr: subproc.ErrNotFound, wantMsg: "git status: executable not found"},
		{name: "timeout", ctx: context.Background(), cmd: subproc.Command{Path: "sleep", Args: []string{"30"}, Timeout: 100 * time.Millisecond}, wantErr: subproc.ErrTimeout, wantMsg: "sleep 30: timed out after 100ms"},
		{name: "cancelled", ctx: cancelled, cmd: subproc.Command{Path: "sleep", Args: []string{"30"}}, wantErr: context.Canceled},
		{name: "stdout too large", ctx: context.Background(), cmd: subproc.Command{Path: "head", Args: []string{"-c", "100", "/dev/zero"}, MaxStdout: 10}, wantErr: subproc.ErrOutputTooLarge, wantMsg: "head -c 100 /dev/zero: output too large: stdout exceeds 10 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			out, err := tc.cmd.Run(tc.ctx)
			require.ErrorIs(t, err, tc.wantErr)
			assert.Nil(t, out)
			assert.Less(t, time.Since(start), 5*time.Second)
			if tc.wantMsg != "" {
				assert.True(t, strings.HasPrefix(err.Error(), tc.wantMsg), "error %q does not start with %q", err, tc.wantMsg)
			}
			var exitErr *subproc.ExitError
			assert.False(t, errors.As(err, &exitErr), "not an exit error")
		})
	}
}

func TestRunStreamsToWriter(t *testing.T) {
	var buf bytes.Buffer
	cmd := sh("head -c 1000 /dev/zero")
	cmd.MaxStdout = 10
	cmd.Stdout = &buf
	out, err := cmd.Run(context.Background())
	require.NoError(t, err)
	assert.Nil(t, out)
	assert.Equal(t, 1000, buf.Len())
}

// slowWriter holds up each Write for delay, as the goroutine copying a
// program's output is held up when a loaded machine schedules it late.
type slowWriter struct {
	delay time.Duration
	buf   bytes.Buffer
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(w.delay)
	return w.buf.Write(p)
}

func TestRunKeepsOutputCopiedAfterTheWaitDelay(t *testing.T) {
	// The program has exited and closed its output; only the copying is
	// late, longer than the wait delay. exec.Cmd's WaitDelay reported that
	// as ErrWaitDelay.
	subproc.SetWaitDelay(t, 10*time.Millisecond)
	w := &slowWriter{delay: 300 * time.Millisecond}
	cmd := sh("echo out; echo err >&2")
	cmd.Stdout = w
	out, err := cmd.Run(context.Background())
	require.NoError(t, err)
	assert.Nil(t, out)
	assert.Equal(t, "out\n", w.buf.String())
}

// heldScript runs script in sh after arranging for a background process
// (a grandchild of Run) that outlives it; the grandchild's pid goes to a
// file and it is killed when t ends.
func heldScript(t *testing.T, grandchild, script string) subproc.Command {
	t.Helper()
	pidFile := filepath.Join(t.TempDir(), "pid")
	t.Cleanup(func() {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return sh(grandchild + " & echo $! >'" + pidFile + "'; " + script)
}

func TestRunStopsAtOutputHeldByAnotherProcess(t *testing.T) {
	subproc.SetWaitDelay(t, 10*time.Millisecond)
	tests := []struct {
		name       string
		grandchild string
	}{
		{name: "stdout and stderr", grandchild: "sleep 30"},
		{name: "stdout", grandchild: "sleep 30 2>/dev/null"},
		{name: "stderr", grandchild: "sleep 30 >/dev/null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := heldScript(t, tc.grandchild, "echo out").Run(context.Background())
			require.ErrorIs(t, err, subproc.ErrOutputHeld)
			assert.ErrorIs(t, err, exec.ErrWaitDelay)
			assert.Nil(t, out)
			assert.True(t, strings.HasPrefix(err.Error(), "sh script: output still open after exit"), "error %q", err)
			var exitErr *subproc.ExitError
			assert.False(t, errors.As(err, &exitErr), "not an exit error")
		})
	}
}

func TestRunReportsExitStatusOverHeldOutput(t *testing.T) {
	subproc.SetWaitDelay(t, 10*time.Millisecond)
	_, err := heldScript(t, "sleep 30", "echo failed >&2; exit 3").Run(context.Background())
	var exitErr *subproc.ExitError
	require.ErrorAs(t, err, &exitErr)
	assert.Equal(t, 3, exitErr.Status)
	assert.Equal(t, "failed", exitErr.Stderr)
}

func TestRunIgnoresProcessesThatClosedTheOutput(t *testing.T) {
	// The grandchild outlives the program but redirects its output before
	// the program exits (the ready file says so): the output is complete.
	subproc.SetWaitDelay(t, 10*time.Millisecond)
	ready := filepath.Join(t.TempDir(), "ready")
	grandchild := "(exec >/dev/null 2>&1; touch '" + ready + "'; exec sleep 30)"
	cmd := heldScript(t, grandchild, "while [ ! -e '"+ready+"' ]; do sleep 0.01; done; echo out")
	out, err := cmd.Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "out\n", string(out))
}

func TestRunTimesOutWithOutputHeld(t *testing.T) {
	// Killing the program leaves the grandchild holding the output.
	subproc.SetWaitDelay(t, 10*time.Millisecond)
	cmd := heldScript(t, "sleep 30", "sleep 30")
	cmd.Timeout = 100 * time.Millisecond
	out, err := cmd.Run(context.Background())
	require.ErrorIs(t, err, subproc.ErrTimeout)
	assert.Nil(t, out)
}
