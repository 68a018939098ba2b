//go:build unix

package python

import (
	"bytes"

	"golang.org/x/sys/unix"
)

func unameField(pick func(*unix.Utsname) []byte) string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return string(bytes.TrimRight(pick(&u), "\x00"))
}

func unameRelease() string { return unameField(func(u *unix.Utsname) []byte { return u.Release[:] }) }
func unameVersion() string { return unameField(func(u *unix.Utsname) []byte { return u.Version[:] }) }
