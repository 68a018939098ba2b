package integrity

import "errors"

// Errors returned by this package, wrapped with context; check them with
// errors.Is.
var (
	// ErrWeakAlgorithm means a hash names md5 or sha1, which a RECORD must
	// not use.
	ErrWeakAlgorithm = errors.New("weak hash algorithm")
	// ErrUnsupportedAlgorithm means a hash names an algorithm this package
	// does not implement.
	ErrUnsupportedAlgorithm = errors.New("unsupported hash algorithm")
	// ErrBadDigest means a hash value does not decode or has the wrong
	// length for its algorithm.
	ErrBadDigest = errors.New("malformed hash value")
	// ErrNoReason means an allowlist entry has no reason.
	ErrNoReason = errors.New("expected change without a reason")
	// ErrBadPattern means an allowlist path pattern is malformed.
	ErrBadPattern = errors.New("malformed path pattern")
	// ErrCorruptState means a state file failed its checksum or did not
	// parse; callers treat it as absent.
	ErrCorruptState = errors.New("corrupt state file")
)
