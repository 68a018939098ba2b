package appserver

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
)

// waitExited blocks until pid has exited, without reaping it (WNOWAIT):
// while the zombie exists its pid and process group id cannot be reused,
// so Shutdown can still signal the group safely.
func waitExited(pid int) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

type proc struct {
	pid int
	p   *os.Process
}

func (p proc) Signal(sig os.Signal) error { return p.p.Signal(sig) }
func (p proc) Release() error             { return p.p.Release() }

// maxDescendants bounds the process tree walk.
const maxDescendants = 4096

// descendants returns handles to every live descendant of pid, found
// through /proc/<pid>/task/<tid>/children. On Linux os.FindProcess holds a
// pidfd, so signaling a handle later cannot hit a recycled pid.
func descendants(pid int) []proc {
	var out []proc
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 && len(out) < maxDescendants {
		parent := queue[0]
		queue = queue[1:]
		for _, child := range children(parent) {
			if seen[child] {
				continue
			}
			seen[child] = true
			p, err := os.FindProcess(child)
			if err != nil {
				continue
			}
			out = append(out, proc{pid: child, p: p})
			queue = append(queue, child)
		}
	}
	return out
}

func children(pid int) []int {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// waitGone polls until every process has exited (is gone or a zombie) and
// returns the pids still running after d.
func waitGone(ps []proc, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		var left []int
		for _, p := range ps {
			if running(p.pid) {
				left = append(left, p.pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself
	// contain ") ".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}

// maxReason bounds the stderr line quoted in errors, before the "..."
// that marks a cut.
const maxReason = 512

// errorLine picks the line explaining why the server stopped: the last
// line starting with "Error:" (how Codex reports fatal startup errors),
// else the last non-empty line. ANSI escape sequences are removed.
func errorLine(stderr []byte) string {
	text := stripANSI(stderr)
	lines := strings.Split(text, "\n")
	last := ""
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" {
			continue
		}
		if strings.HasPrefix(l, "Error:") {
			return binding.Clip(l, maxReason+len("..."), "...")
		}
		if last == "" {
			last = l
		}
	}
	return binding.Clip(last, maxReason+len("..."), "...")
}

// stripANSI removes CSI escape sequences (colors) and other control
// characters except newlines and tabs, and replaces invalid UTF-8.
func stripANSI(b []byte) string {
	var sb strings.Builder
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c == 0x1b && i+1 < len(b) && b[i+1] == '[' {
			j := i + 2
			for j < len(b) && (b[j] < 0x40 || b[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			continue
		}
		sb.WriteByte(c)
	}
	return strings.ToValidUTF8(sb.String(), "\uFFFD")
}
