package python

import "errors"

// Errors returned by this package, wrapped with context; check them with
// errors.Is.
var (
	// ErrBadRecord means a RECORD file does not parse (a malformed row or
	// hash, a weak or unsupported algorithm, a NUL in a path).
	ErrBadRecord = errors.New("invalid RECORD")
	// ErrEscape means a RECORD path leads outside the environment; it is
	// never opened.
	ErrEscape = errors.New("RECORD path escapes the environment")
	// ErrBadMetadata means a METADATA file does not parse.
	ErrBadMetadata = errors.New("invalid METADATA")
	// ErrBadRequirement means a Requires-Dist value is not a PEP 508
	// requirement.
	ErrBadRequirement = errors.New("invalid requirement")
	// ErrBadMarker means an environment marker does not parse.
	ErrBadMarker = errors.New("invalid environment marker")
	// ErrUndefinedComparison means a marker compares values in a way PEP
	// 508 leaves undefined.
	ErrUndefinedComparison = errors.New("undefined marker comparison")
	// ErrUnknownVariable means a marker's value depends on a variable the
	// environment does not give (see Env.Unknown); it is not guessed.
	ErrUnknownVariable = errors.New("marker needs an unknown variable")
	// ErrBadPyvenvCfg means a pyvenv.cfg is not text Python would read.
	ErrBadPyvenvCfg = errors.New("invalid pyvenv.cfg")
	// ErrNotEnvironment means a path is neither a virtual environment nor
	// a site-packages directory.
	ErrNotEnvironment = errors.New("not a Python environment or site-packages directory")
	// ErrNotInstalled means a requested distribution is not installed.
	ErrNotInstalled = errors.New("distribution not installed")
	// ErrNoScope means Verify was given neither distributions nor All.
	ErrNoScope = errors.New("no distributions to verify: name some or ask for all")
)
