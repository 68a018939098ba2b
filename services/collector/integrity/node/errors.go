package node

import "errors"

// Errors returned by this package, wrapped with context; check them with
// errors.Is.
var (
	// ErrBadManifest means a manifest file does not parse or lists a path
	// outside its package.
	ErrBadManifest = errors.New("invalid file manifest")
	// ErrNotProject means a directory has no package.json.
	ErrNotProject = errors.New("not a Node project (no package.json)")
	// ErrNotInstalled means a requested package is not in node_modules.
	ErrNotInstalled = errors.New("package not installed")
)
