package codex

import "errors"

// Errors, each wrapped with details.
var (
	// ErrNotFound reports a missing codex executable.
	ErrNotFound = errors.New("codex executable not found")
	// ErrTimeout reports that the overall deadline passed; the message
	// names the step.
	ErrTimeout = errors.New("timed out")
	// ErrResponse reports a reply from Codex that does not have the
	// expected shape.
	ErrResponse = errors.New("unexpected codex response")
	// ErrSideEffect reports that the user's Codex config.toml changed
	// while the probe ran (the probe is designed never to write it).
	ErrSideEffect = errors.New("codex config.toml changed during the probe")
)
