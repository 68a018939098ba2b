package subproc

import (
	"errors"
	"fmt"
	"os/exec"
)

// Errors returned by Command.Run, wrapped with the command line; check them
// with errors.Is. A non-zero exit is an *ExitError instead (errors.As).
var (
	// ErrNotFound means the program is not installed (not in PATH, or the
	// configured path does not exist).
	ErrNotFound = errors.New("executable not found")
	// ErrTimeout means the program ran longer than Command.Timeout and was
	// killed.
	ErrTimeout = errors.New("timed out")
	// ErrOutputTooLarge means stdout exceeded Command.MaxStdout.
	ErrOutputTooLarge = errors.New("output too large")
	// ErrOutputHeld means the program exited but its stdout or stderr was
	// still open a while later: a process it started holds it. Run stops
	// reading and does not wait for that process. It wraps
	// exec.ErrWaitDelay.
	ErrOutputHeld = fmt.Errorf("output still open after exit (%w)", exec.ErrWaitDelay)
)
