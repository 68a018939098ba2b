package git

import "errors"

// Errors returned by Collect, wrapped with the path; check them with
// errors.Is.
var (
	// ErrNotRepository means the path is not inside a git work tree (it may
	// be inside a .git directory or a bare repository). Composition skips
	// git evidence on this error.
	ErrNotRepository = errors.New("not inside a git work tree")
	// ErrNoCommits means the repository has no commit yet, so there is no
	// HEAD commit to record.
	ErrNoCommits = errors.New("repository has no commits yet")
	// ErrDubiousOwnership means git refused the repository because another
	// user owns it (see the package documentation).
	ErrDubiousOwnership = errors.New("git refuses a repository owned by another user (dubious ownership)")
	// ErrGitNotFound means the git executable is not installed.
	ErrGitNotFound = errors.New("git executable not found")
)
