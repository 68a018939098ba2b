package auditortest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// ClickHouseServer is a private clickhouse-server for tests that stop and
// start it (an outage), with the start line of scripts/start-clickhouse.sh.
type ClickHouseServer struct {
	DSN  string
	tb   testing.TB
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartClickHouse starts a private server in a temporary directory on free
// loopback ports; it is stopped when the test ends. The binary must be
// installed (scripts/start-clickhouse.sh installs it); the test fails
// otherwise.
func StartClickHouse(tb testing.TB) *ClickHouseServer {
	tb.Helper()
	bin, err := exec.LookPath("clickhouse-server")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/clickhouse-server"); serr != nil {
			tb.Fatal("clickhouse-server is not installed: run the tests through scripts/test-services.sh (make test)")
		}
		bin = "/usr/sbin/clickhouse-server"
	}
	dir := tb.TempDir()
	ports := make([]int, 3)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
	}
	s := &ClickHouseServer{
		DSN: fmt.Sprintf("clickhouse://127.0.0.1:%d/default?dial_timeout=2s", ports[0]),
		tb:  tb, dir: dir,
		args: []string{bin, "--config-file=/etc/clickhouse-server/config.xml", "--",
			"--path=" + filepath.Join(dir, "data") + "/", "--tmp_path=" + filepath.Join(dir, "tmp") + "/",
			"--user_files_path=" + filepath.Join(dir, "user_files") + "/", "--format_schema_path=" + filepath.Join(dir, "format_schemas") + "/",
			"--listen_host=127.0.0.1", fmt.Sprintf("--tcp_port=%d", ports[0]), fmt.Sprintf("--http_port=%d", ports[1]),
			fmt.Sprintf("--interserver_http_port=%d", ports[2]),
			"--logger.log=" + filepath.Join(dir, "server.log"), "--logger.errorlog=" + filepath.Join(dir, "err.log")},
	}
	s.Start()
	tb.Cleanup(s.Stop)
	return s
}

// Start starts the server (again) and waits until it answers.
func (s *ClickHouseServer) Start() {
	s.tb.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.Stdout, cmd.Stderr = nil, nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("start clickhouse-server: %v", err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(s.done) }()
	opts, err := clickhouse.ParseDSN(s.DSN)
	if err != nil {
		s.tb.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := clickhouse.Open(opts)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err = conn.Ping(ctx)
			cancel()
			_ = conn.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "err.log"))
			s.tb.Fatalf("clickhouse-server did not start: %v\n%s", err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server and waits for it to exit.
func (s *ClickHouseServer) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}
