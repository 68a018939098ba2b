//go:build !unix

package python

func unameRelease() string { return "" }
func unameVersion() string { return "" }
