//go:build unix

package python

import (
	"bytes"

	"golang.org/x/sys/unix"
)

// hostUname returns this host's uname(2); ok is false when it fails.
func hostUname() (u uname, ok bool) {
	var ut unix.Utsname
	if err := unix.Uname(&ut); err != nil {
		return uname{}, false
	}
	field := func(b []byte) string {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return string(b)
	}
	return uname{sysname: field(ut.Sysname[:]), release: field(ut.Release[:]),
		version: field(ut.Version[:]), machine: field(ut.Machine[:])}, true
}
