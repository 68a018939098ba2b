package subproc

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"
)

// pipes are a program's stdout and stderr: pipes it gets as files, each
// read to its end by a goroutine of Run's, so that whether its output is
// complete is a fact about the pipes and not about when those goroutines
// were scheduled.
//
// exec.Cmd's own copying goroutines (Stdout and Stderr not *os.File) are
// given WaitDelay from the program's exit to finish, and when it expires
// Wait reports exec.ErrWaitDelay even if every writer of the pipes had
// closed them and only the goroutine had not run yet: on a loaded machine
// (tests under -race on two cores) a successful git run failed that way.
type pipes struct {
	readers []*os.File
	// done receives each copying goroutine's error once it stops.
	done chan error
}

// startPiped starts cmd with its stdout copied to stdout and its stderr to
// stderr.
func startPiped(cmd *exec.Cmd, stdout, stderr io.Writer) (*pipes, error) {
	dsts := []io.Writer{stdout, stderr}
	p := &pipes{}
	var writers []*os.File
	closeAll := func(files []*os.File) {
		for _, f := range files {
			_ = f.Close()
		}
	}
	for range dsts {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(p.readers)
			closeAll(writers)
			return nil, err
		}
		p.readers = append(p.readers, r)
		writers = append(writers, w)
	}
	cmd.Stdout, cmd.Stderr = writers[0], writers[1]
	err := cmd.Start()
	// The program has its own copies of the write ends; ours would keep the
	// pipes from ever reaching their end.
	closeAll(writers)
	if err != nil {
		closeAll(p.readers)
		return nil, err
	}
	p.done = make(chan error, len(p.readers))
	for i, r := range p.readers {
		go func() {
			_, err := io.Copy(dsts[i], r)
			p.done <- err
		}()
	}
	return p, nil
}

// wait waits, once the program has exited, for the output to be copied and
// returns the first copying error. When the pipes have not reached their
// end waitDelay later, it looks at them: if every write end is closed,
// what is left is already in the pipes and the copying finishes however
// late its goroutines run; if one is still open (a process the program
// started holds it), wait closes the read ends, so nothing can keep Run
// waiting, and returns ErrOutputHeld.
func (p *pipes) wait() error {
	defer func() {
		for _, r := range p.readers {
			_ = r.Close()
		}
	}()
	pending := len(p.readers)
	var first error
	collect := func(err error) {
		pending--
		if first == nil {
			first = err
		}
	}
	timer := time.NewTimer(waitDelay)
	defer timer.Stop()
	for pending > 0 {
		select {
		case err := <-p.done:
			collect(err)
			continue
		case <-timer.C:
		}
		held := !p.writersClosed()
		if held {
			for _, r := range p.readers {
				_ = r.Close()
			}
		}
		for pending > 0 {
			collect(<-p.done)
		}
		if held {
			return ErrOutputHeld // not the errors of the closed read ends
		}
	}
	return first
}

// writersClosed reports whether every write end of the pipes is closed:
// the kernel reports the read end hung up (POLLHUP), even with data still
// to read.
func (p *pipes) writersClosed() bool {
	for _, r := range p.readers {
		if !hungUp(r) {
			return false
		}
	}
	return true
}

func hungUp(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	hup := false
	// Control, unlike Read, does not wait for the copying goroutine's Read.
	_ = rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, 0)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			hup = err == nil && n == 1 && fds[0].Revents&unix.POLLHUP != 0
			return
		}
	})
	return hup
}
