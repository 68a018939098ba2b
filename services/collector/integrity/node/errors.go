package node

import "errors"

// Errors returned by this package, wrapped with context; check them with
// errors.Is.
var (
	// ErrBadManifest means a manifest file does not parse or lists a path
	// outside its package.
	ErrBadManifest = errors.New("invalid file manifest")
	// ErrEscape means a path the baseline lists resolves outside its
	// package folder through a symbolic link on the way (lib -> /etc with
	// lib/shadow listed); it is never read.
	ErrEscape = errors.New("path escapes the package folder")
	// ErrNotProject means a directory has no package.json.
	ErrNotProject = errors.New("not a Node project (no package.json)")
	// ErrNotInstalled means a requested package is not in node_modules.
	ErrNotInstalled = errors.New("package not installed")
	// ErrBadName means a package name (a dependency in package.json, or
	// one asked for) is not an npm package name: it would name a folder
	// outside node_modules.
	ErrBadName = errors.New("invalid package name")
)

// errSymlink is a file read from the checked tree (package.json, a
// lockfile, a manifest) that is a symbolic link: it is not followed.
var errSymlink = errors.New("is a symbolic link (not followed)")
