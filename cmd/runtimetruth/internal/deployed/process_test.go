package deployed_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// stopTimeout is how long a process may take to exit after SIGTERM before
// it is killed: above the services' own drain bounds.
const stopTimeout = 45 * time.Second

// testLog gathers the output of a test's processes and CLI commands, each
// line tagged with its source, and shows it when the test fails.
type testLog struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	start time.Time
}

// newTestLog returns the log of t, shown after every other cleanup (the
// processes' stops) when t failed, or always with DEPLOYED_LOG set.
func newTestLog(t *testing.T) *testLog {
	l := &testLog{start: time.Now()}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("DEPLOYED_LOG") != "" {
			t.Logf("output of the processes and commands:\n%s", l.String())
		}
	})
	return l
}

func (l *testLog) line(source string, text []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(&l.buf, "%7.3fs %-12s %s\n", time.Since(l.start).Seconds(), source, text)
}

func (l *testLog) printf(source, format string, args ...any) {
	for _, s := range strings.Split(strings.TrimRight(fmt.Sprintf(format, args...), "\n"), "\n") {
		l.line(source, []byte(s))
	}
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// output is a process's stdout and stderr: kept whole, for the test to
// search, and copied line by line to the test's log.
type output struct {
	log     *testLog
	name    string
	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.all.Write(p)
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			break
		}
		o.log.line(o.name, o.partial[:i])
		o.partial = o.partial[i+1:]
	}
	return len(p), nil
}

func (o *output) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.partial) > 0 {
		o.log.line(o.name, o.partial)
		o.partial = nil
	}
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.all.String()
}

// proc is a process the test started.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *output
	cancel context.CancelFunc
	done   chan struct{}
}

// startProc starts bin with args and env, its output going to log. It is
// stopped (SIGTERM, then SIGKILL after stopTimeout) and waited for when t
// ends, if the test has not stopped it before.
func startProc(t *testing.T, log *testLog, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = procAttr()
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = stopTimeout
	p := &proc{name: name, cmd: cmd, out: &output{log: log, name: name}, cancel: cancel, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	log.printf("harness", "start %s: %s %s", name, bin, strings.Join(args, " "))
	if err := cmd.Start(); err != nil {
		cancel()
		require.NoError(t, err, "start %s", name)
	}
	go func() {
		_ = cmd.Wait() // the exit status is in cmd.ProcessState
		p.out.flush()
		close(p.done)
	}()
	t.Cleanup(func() {
		if code := p.stop(); code != 0 {
			log.printf("harness", "%s exited with %d at cleanup", name, code)
		}
	})
	return p
}

// stop sends SIGTERM (once), waits for the process to exit and returns its
// exit code (-1 when a signal ended it).
func (p *proc) stop() int {
	p.cancel()
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
	}
	return false
}

// healthClient asks the services' readiness endpoints; without keep-alive,
// so that no connection outlives the test.
var healthClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// waitReady waits until p, a runtimetruth service started with
// http.listen on port 0, is ready.
func waitReady(t *testing.T, p *proc) {
	t.Helper()
	natstest.CheckFor(t, 90*time.Second, 50*time.Millisecond, func() error {
		if p.exited() {
			require.FailNow(t, p.name+" exited while starting", "exit code %d", p.cmd.ProcessState.ExitCode())
		}
		return ready(p)
	})
}

// ready asks p's /readyz, at the address its log names ("serving health
// and metrics"), and returns why it is not ready, if it is not.
func ready(p *proc) error {
	addr := healthAddr(p.out.String())
	if addr == "" {
		return fmt.Errorf("%s has not logged its health address", p.name)
	}
	resp, err := healthClient.Get("http://" + addr + "/readyz")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return fmt.Errorf("%s: /readyz: %s: %s", p.name, resp.Status, strings.TrimSpace(b.String()))
	}
	return nil
}

// healthAddr finds the address a service's log (JSON lines) says its
// health server listens on.
func healthAddr(log string) string {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "serving health and metrics" {
			return rec.Addr
		}
	}
	return ""
}

// result is what a command printed and how it exited.
type result struct {
	stdout, stderr string
	code           int
}

// runCommand runs bin to its end (at most two minutes), logging it and
// its output.
func runCommand(t *testing.T, log *testLog, env []string, bin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		require.NoError(t, err, "run %s %s", bin, strings.Join(args, " "))
	}
	r := result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	name := bin[strings.LastIndexByte(bin, os.PathSeparator)+1:]
	log.printf("$", "%s %s  # exit %d", name, strings.Join(args, " "), r.code)
	if r.stdout != "" {
		log.printf("  stdout", "%s", r.stdout)
	}
	if r.stderr != "" {
		log.printf("  stderr", "%s", r.stderr)
	}
	return r
}

// environ is the environment of the processes: the test's own without
// any runtimetruth or OpenTelemetry setting, with home (also the state
// directory's parent) and the extra variables.
func environ(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "RUNTIMETRUTH_") || strings.HasPrefix(k, "OTEL_") || strings.HasPrefix(k, "XDG_") ||
			k == "HOME" || k == "USER" || strings.HasPrefix(k, "GIT_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, append([]string{"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1"}, extra...)...)
}
