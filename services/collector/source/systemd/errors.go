package systemd

import "errors"

// Errors returned by ValidateUnit, Parse and Collect; check them with
// errors.Is.
var (
	// ErrInvalidUnit means the unit name is empty, starts with '-', or has
	// a character outside [-A-Za-z0-9_.@:].
	ErrInvalidUnit = errors.New("invalid unit name")
	// ErrSystemdUnavailable means systemd is not running on this host.
	ErrSystemdUnavailable = errors.New("systemd is not running on this host")
	// ErrMalformedOutput means systemctl show printed something Parse does
	// not accept.
	ErrMalformedOutput = errors.New("malformed systemctl show output")
	// ErrSystemctlNotFound means the systemctl executable is not installed.
	ErrSystemctlNotFound = errors.New("systemctl executable not found")
)
