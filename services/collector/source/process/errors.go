package process

import "errors"

// Errors returned by Collect, wrapped with the pid; check them with
// errors.Is.
var (
	// ErrInvalidPID means the pid is not a positive integer.
	ErrInvalidPID = errors.New("invalid pid")
	// ErrDisappeared means the process does not exist: it exited before or
	// during collection, or its pid was reused by another process while
	// collecting.
	ErrDisappeared = errors.New("process disappeared")
	// ErrPermission means procfs denied access; reading another user's
	// cwd and exe needs the same user or CAP_SYS_PTRACE.
	ErrPermission = errors.New("permission denied")
	// ErrNoExecutable means the process exists but has no executable
	// (a kernel thread or a zombie).
	ErrNoExecutable = errors.New("process has no executable (kernel thread or zombie)")
)
