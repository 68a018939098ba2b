//go:build !linux

package deployed_test

import "syscall"

// procAttr is nil where there is no parent-death signal: the cleanups
// stop every process.
func procAttr() *syscall.SysProcAttr { return nil }
