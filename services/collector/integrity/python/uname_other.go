//go:build !unix

package python

// hostUname has no uname to read outside Unix: the platform variables it
// gives are unknown.
func hostUname() (uname, bool) { return uname{}, false }
