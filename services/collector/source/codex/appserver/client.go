package appserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

// Bounds on what the client reads from and waits for on the server.
const (
	// MaxLine is the longest line accepted from the server. A config/read
	// reply is 10–20 KB; large MCP tool catalogs can reach megabytes.
	MaxLine = 16 << 20
	// StderrTail is how much of the server's stderr is kept (the end).
	StderrTail = 64 << 10
	// CloseGrace is how long Shutdown waits for the server to exit on stdin
	// EOF, which is how Codex stops its MCP servers, before killing it.
	// Measured exits take 0.03–0.14 s.
	CloseGrace = 2 * time.Second
	// exitReport bounds the wait for exit and stderr after stdout ends.
	exitReport = 2 * time.Second
	// killWait bounds the wait for killed processes to disappear.
	killWait = 2 * time.Second
)

// Config says how to start the server.
type Config struct {
	// Path is the executable; Args follow it (for example "app-server").
	Path string
	Args []string
	// Dir is the server's working directory.
	Dir string
	// Env is the complete environment; nil means the current one.
	Env []string
	// Credential, when set, is the user, group and supplementary groups
	// the server runs as (and so whatever it starts).
	Credential *syscall.Credential
	// OnNotification, when set, receives every notification. It runs on
	// the goroutine calling Call or Wait.
	OnNotification func(method string, params jsontree.Value)
}

// Client is one running app-server. Its methods must not be called
// concurrently.
type Client struct {
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File
	stdout *os.File
	errR   *os.File
	onNote func(string, jsontree.Value)

	lines   chan []byte
	readErr error // set before lines is closed
	done    chan struct{}
	exited  chan struct{} // closed when the process has exited (not yet reaped)
	errDone chan struct{} // closed when stderr reached EOF or was closed
	readers sync.WaitGroup

	stderrMu sync.Mutex
	stderr   []byte

	nextID int64
	waited time.Duration

	shutOnce sync.Once
	shutErr  error
}

// Start starts the server in its own process group.
func Start(cfg Config) (*Client, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, err
	}
	cmd := exec.Command(cfg.Path, cfg.Args...)
	cmd.Dir = cfg.Dir
	cmd.Env = cfg.Env
	// *os.File values are handed to the child as they are: exec starts no
	// copying goroutines, so Wait only waits for the process itself.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cfg.Credential}
	if err := cmd.Start(); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, err
	}
	closeAll(inR, outW, errW)
	c := &Client{
		cmd:     cmd,
		pid:     cmd.Process.Pid,
		stdin:   inW,
		stdout:  outR,
		errR:    errR,
		onNote:  cfg.OnNotification,
		lines:   make(chan []byte),
		done:    make(chan struct{}),
		exited:  make(chan struct{}),
		errDone: make(chan struct{}),
	}
	c.readers.Add(3)
	go c.readLines()
	go c.readStderr()
	go c.awaitExit()
	return c, nil
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}

// Waited is the total time spent blocked on the server: waiting for its
// output in Call and Wait, and for it to exit gracefully in Shutdown.
func (c *Client) Waited() time.Duration { return c.waited }

// PID is the server's process id (and process group id).
func (c *Client) PID() int { return c.pid }

// Call sends a request and returns its result, which must be an object.
// Notifications and server requests that arrive meanwhile are dispatched.
func (c *Client) Call(ctx context.Context, method string, params any) (jsontree.Value, error) {
	c.nextID++
	id := c.nextID
	if err := c.send(ctx, struct {
		ID     int64  `json:"id"`
		Method string `json:"method"`
		Params any    `json:"params,omitempty"`
	}{id, method, params}); err != nil {
		return jsontree.Value{}, err
	}
	for {
		m, err := c.receive(ctx)
		if err != nil {
			return jsontree.Value{}, err
		}
		if m.Kind != Response || m.ID.IsStr || m.ID.Null || m.ID.Num != id {
			// Responses to ids we are not waiting for are stale; skip them.
			continue
		}
		if m.Err != nil {
			return jsontree.Value{}, m.Err
		}
		if m.Result.Kind != jsontree.Object {
			return jsontree.Value{}, malformed("%s result is %s, want an object", method, m.Result.Kind)
		}
		return m.Result, nil
	}
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	return c.send(ctx, struct {
		Method string `json:"method"`
		Params any    `json:"params,omitempty"`
	}{method, params})
}

// Wait dispatches incoming messages until done reports true.
func (c *Client) Wait(ctx context.Context, done func() bool) error {
	for !done() {
		if _, err := c.receive(ctx); err != nil {
			return err
		}
	}
	return nil
}

// receive reads one message, answering server requests and dispatching
// notifications before returning it.
func (c *Client) receive(ctx context.Context) (Message, error) {
	line, err := c.next(ctx)
	if err != nil {
		return Message{}, err
	}
	m, err := Decode(line)
	if err != nil {
		return Message{}, err
	}
	switch m.Kind {
	case Request:
		if err := c.refuse(ctx, m); err != nil {
			return Message{}, err
		}
	case Notification:
		if c.onNote != nil {
			c.onNote(m.Method, m.Params)
		}
	}
	return m, nil
}

// refuse answers a server-to-client request with "method not found": the
// client starts no turn, so nothing may legitimately ask it for approval.
func (c *Client) refuse(ctx context.Context, m Message) error {
	b := append([]byte(`{"id":`), m.ID.appendJSON(nil)...)
	b = append(b, `,"error":{"code":-32601,"message":"runtimetruth answers no server requests"}}`...)
	return c.write(ctx, append(b, '\n'))
}

func (c *Client) next(ctx context.Context) ([]byte, error) {
	start := time.Now()
	defer func() { c.waited += time.Since(start) }()
	select {
	case line, ok := <-c.lines:
		if ok {
			return line, nil
		}
		if c.readErr != nil {
			return nil, c.readErr
		}
		return nil, c.exitError(ctx)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Client) send(ctx context.Context, msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	return c.write(ctx, append(b, '\n'))
}

func (c *Client) write(ctx context.Context, b []byte) error {
	dl, _ := ctx.Deadline() // zero: no deadline
	_ = c.stdin.SetWriteDeadline(dl)
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := c.stdin.Write(b); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return context.DeadlineExceeded
		}
		if errors.Is(err, syscall.EPIPE) {
			return c.exitError(ctx)
		}
		return fmt.Errorf("write to codex app-server: %w", err)
	}
	return nil
}

// exitError waits briefly for the process to exit and for its stderr, then
// reports why it stopped.
func (c *Client) exitError(ctx context.Context) error {
	t := time.NewTimer(exitReport)
	defer t.Stop()
	select {
	case <-c.exited:
		select {
		case <-c.errDone:
		case <-time.After(250 * time.Millisecond): // a descendant may hold stderr open
		}
	case <-t.C:
	case <-ctx.Done():
	}
	c.stderrMu.Lock()
	reason := errorLine(c.stderr)
	c.stderrMu.Unlock()
	return &ExitError{Reason: reason}
}

func (c *Client) readLines() {
	defer c.readers.Done()
	r := bufio.NewReaderSize(c.stdout, 64<<10)
	for {
		line, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 {
			select {
			case c.lines <- line:
			case <-c.done:
				close(c.lines)
				return
			}
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
			c.readErr = err
		}
		close(c.lines)
		if c.readErr != nil {
			// Keep the pipe flowing so a server blocked writing the rest
			// can still see stdin EOF and exit gracefully.
			_, _ = io.Copy(io.Discard, r)
		}
		return
	}
}

// readLine reads one line of at most MaxLine bytes, without its newline.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLine+1 {
			return nil, ErrLineTooLong
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return line, err
		}
	}
}

func (c *Client) readStderr() {
	defer c.readers.Done()
	defer close(c.errDone)
	buf := make([]byte, 32<<10)
	for {
		n, err := c.errR.Read(buf)
		if n > 0 {
			c.stderrMu.Lock()
			c.stderr = append(c.stderr, buf[:n]...)
			if over := len(c.stderr) - StderrTail; over > 0 {
				c.stderr = append(c.stderr[:0], c.stderr[over:]...)
			}
			c.stderrMu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// Stderr returns the kept tail of the server's stderr.
func (c *Client) Stderr() []byte {
	c.stderrMu.Lock()
	defer c.stderrMu.Unlock()
	return bytes.Clone(c.stderr)
}

func (c *Client) awaitExit() {
	defer c.readers.Done()
	defer close(c.exited)
	waitExited(c.pid)
}

// Shutdown stops the server: stdin EOF, then up to CloseGrace (or until
// ctx ends, if sooner) for it to exit on its own, which is how Codex stops
// its MCP servers; then SIGKILL for its process group and for every
// descendant seen before shutdown (MCP servers run in process groups of
// their own). It always reaps the server and stops the client's
// goroutines, and is safe to call more than once.
func (c *Client) Shutdown(ctx context.Context) error {
	c.shutOnce.Do(func() { c.shutErr = c.shutdown(ctx) })
	return c.shutErr
}

func (c *Client) shutdown(ctx context.Context) error {
	desc := descendants(c.pid)
	_ = c.stdin.Close()
	grace, cancel := context.WithTimeout(ctx, CloseGrace)
	start := time.Now()
	exited := waitCtx(grace, c.exited)
	c.waited += time.Since(start)
	cancel()
	if !exited {
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
		exited = waitFor(c.exited, killWait)
	}
	for _, p := range desc {
		_ = p.Signal(syscall.SIGKILL)
	}
	var err error
	if exited {
		// The leader is a zombie until reaped, so its process group id
		// cannot have been reused: clear anything left in the group.
		_ = syscall.Kill(-c.pid, syscall.SIGKILL)
		_ = c.cmd.Wait() // the exit status is irrelevant once stdin is closed
	} else {
		err = fmt.Errorf("codex app-server (pid %d) survived SIGKILL", c.pid)
	}
	if left := waitGone(desc, killWait); len(left) > 0 {
		err = errors.Join(err, fmt.Errorf("codex app-server descendants %v survived SIGKILL", left))
	}
	for _, p := range desc {
		_ = p.Release()
	}
	close(c.done)
	closeAll(c.stdout, c.errR)
	if exited {
		c.readers.Wait()
	}
	return err
}

func waitCtx(ctx context.Context, ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
