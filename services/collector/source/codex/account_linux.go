//go:build linux && (amd64 || arm64 || riscv64 || ppc64 || ppc64le || s390x || loong64 || mips64 || mips64le)

package codex

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openRegularAs is openRegular with the file-system permissions of a (nil:
// this process's). Codex follows an instruction source's symbolic links
// with its user's permissions; a collector running as root must not read,
// and publish the digest of, what that user cannot (an AGENTS.md linked to
// /etc/shadow). The open runs on an OS thread of its own that takes a's
// file-system uid and gid and supplementary groups (setfsuid, setfsgid and
// a raw, thread-local setgroups), so every directory on the way and the
// file itself are checked against a. That thread is never unlocked: it
// ends with its goroutine instead of returning to the scheduler with a's
// identity. The descriptor it opens reads the same from any thread.
func openRegularAs(path string, a *Account) (*os.File, error) {
	if a == nil {
		return openRegular(path)
	}
	type result struct {
		f   *os.File
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if err := takeFSIdentity(a); err != nil {
			done <- result{nil, err}
			return
		}
		f, err := openRegular(path)
		done <- result{f, err}
	}()
	r := <-done
	return r.f, r.err
}

// takeFSIdentity gives the calling thread a's groups and file-system uid
// and gid. setfsuid and setfsgid report no error: each is called twice and
// the second call's answer (the value in force) checked.
func takeFSIdentity(a *Account) error {
	var groups unsafe.Pointer
	if len(a.Groups) > 0 {
		groups = unsafe.Pointer(&a.Groups[0])
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(a.Groups)), uintptr(groups), 0); e != 0 {
		return fmt.Errorf("take the groups of uid %d: %w", a.UID, e)
	}
	for _, id := range []struct {
		call uintptr
		want uint32
		name string
	}{{unix.SYS_SETFSGID, a.GID, "gid"}, {unix.SYS_SETFSUID, a.UID, "uid"}} {
		_, _, _ = unix.RawSyscall(id.call, uintptr(id.want), 0, 0)
		if got, _, _ := unix.RawSyscall(id.call, uintptr(id.want), 0, 0); uint32(got) != id.want {
			return fmt.Errorf("take file-system %s %d: refused (it needs root, or CAP_SETUID and CAP_SETGID)", id.name, id.want)
		}
	}
	return nil
}
