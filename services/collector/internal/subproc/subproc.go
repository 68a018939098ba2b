package subproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults and bounds applied by Command.Run.
const (
	// DefaultTimeout is RuntimeTruth's per-subprocess timeout.
	DefaultTimeout = 5 * time.Second
	// DefaultMaxStdout bounds captured stdout when Command.MaxStdout is 0.
	DefaultMaxStdout = 16 << 20
	// MaxStderr is how much of the end of stderr is kept.
	MaxStderr = 64 << 10
	// maxLine bounds the stderr line quoted in an ExitError.
	maxLine = 512
)

// waitDelay bounds how long Run waits for the output pipes to reach their
// end after the program exits or is killed before it looks whether a
// process the program started holds them (see pipes.wait); exec waits as
// long for a killed program to exit. Tests shorten it.
var waitDelay = time.Second

// Command is one program invocation. The zero values of the optional fields
// select the defaults.
type Command struct {
	// Path is the program: a name looked up in PATH, or a path.
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env is the complete environment; nil inherits the collector's.
	Env []string
	// Label names the command in errors; empty means Path's base name and
	// Args.
	Label string
	// Timeout bounds the run; 0 means DefaultTimeout.
	Timeout time.Duration
	// MaxStdout bounds captured stdout; 0 means DefaultMaxStdout.
	MaxStdout int
	// Stdout, when set, receives stdout instead of it being captured, and
	// Run returns no output.
	Stdout io.Writer
}

// ExitError reports a program that ran but did not exit with status 0.
type ExitError struct {
	// Command is the command's label.
	Command string
	// Status is the exit status, or -1 when a signal ended the program.
	Status int
	// State is the kernel's account: "exit status 4" or "signal: killed".
	State string
	// Stderr is the last non-empty line the program wrote to stderr,
	// trimmed, with control characters replaced; it may be empty.
	Stderr string
	// StderrTail is the last MaxStderr bytes of stderr, unmodified, for
	// callers that classify failures by message.
	StderrTail []byte
}

// Error renders "<command>: exit status N[: <last stderr line>]".
func (e *ExitError) Error() string {
	msg := e.Command + ": " + e.State
	if e.Stderr != "" {
		msg += ": " + e.Stderr
	}
	return msg
}

// Run runs the command without a shell, with stdin from /dev/null, and
// returns its stdout. It fails with ErrNotFound, ErrTimeout,
// ErrOutputTooLarge or ErrOutputHeld (wrapped), an *ExitError, or the
// context's error when ctx ends first.
func (c Command) Run(ctx context.Context) ([]byte, error) {
	label := c.label()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	limit := c.MaxStdout
	if limit <= 0 {
		limit = DefaultMaxStdout
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	stdout := &boundedBuffer{max: limit}
	var out io.Writer = stdout
	if c.Stdout != nil {
		out = c.Stdout
	}
	stderr := &tailBuffer{max: MaxStderr}

	cmd := exec.CommandContext(runCtx, c.Path, c.Args...)
	cmd.Env = c.Env
	cmd.WaitDelay = waitDelay
	pipes, err := startPiped(cmd, out, stderr)
	if err == nil {
		err = cmd.Wait()
		// The exit status comes first: output cut short by a kill or a
		// failure is not what the caller needs to hear about.
		if pipeErr := pipes.wait(); err == nil {
			err = pipeErr
		}
	}
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) || (cmd.Process == nil && errors.Is(err, fs.ErrNotExist)) {
			return nil, fmt.Errorf("%s: %w: %w", label, ErrNotFound, err)
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("%s: %w", label, ctxErr)
		}
		if runCtx.Err() != nil {
			return nil, fmt.Errorf("%s: %w after %s", label, ErrTimeout, timeout)
		}
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return nil, &ExitError{
				Command:    label,
				Status:     exitErr.ExitCode(),
				State:      exitErr.String(),
				Stderr:     lastLine(stderr.Bytes()),
				StderrTail: stderr.Bytes(),
			}
		}
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	if stdout.over {
		return nil, fmt.Errorf("%s: %w: stdout exceeds %d bytes", label, ErrOutputTooLarge, limit)
	}
	if c.Stdout != nil {
		return nil, nil
	}
	return stdout.buf.Bytes(), nil
}

func (c Command) label() string {
	if c.Label != "" {
		return c.Label
	}
	return strings.Join(append([]string{filepath.Base(c.Path)}, c.Args...), " ")
}

// boundedBuffer keeps the first max bytes and notes whether more came. It
// never fails a write, so the program is not killed by a broken pipe.
type boundedBuffer struct {
	buf  bytes.Buffer
	max  int
	over bool
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	b.buf.Write(p)
	return len(p), nil
}

// tailBuffer keeps the last max bytes written.
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= t.max {
		t.buf = append(t.buf[:0], p[len(p)-t.max:]...)
		return n, nil
	}
	if drop := len(t.buf) + len(p) - t.max; drop > 0 {
		t.buf = append(t.buf[:0], t.buf[drop:]...)
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *tailBuffer) Bytes() []byte { return t.buf }

// lastLine returns the last non-empty line of b, trimmed, made valid UTF-8
// with control characters replaced by '?', and cut to maxLine bytes.
func lastLine(b []byte) string {
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		line := strings.TrimSpace(lines[i])
		if line == "" {
			continue
		}
		line = strings.Map(func(r rune) rune {
			if unicode.IsControl(r) && r != '\t' {
				return '?'
			}
			return r
		}, strings.ToValidUTF8(line, "?"))
		if len(line) > maxLine {
			cut := maxLine
			for cut > 0 && !utf8.RuneStart(line[cut]) {
				cut--
			}
			line = line[:cut] + "…"
		}
		return line
	}
	return ""
}
