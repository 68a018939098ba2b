package deployed_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// bins are the binaries TestMain builds.
var bins struct {
	natsServer, cli, collector, verifier, auditor, notifier string
}

// TestMain builds the binaries, runs the tests, and fails the package when
// a test leaves a goroutine behind (every process is waited for, every
// connection closed).
func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "runtimetruth-deployed-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "deployed: %v\n", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	if err := build(dir); err != nil {
		fmt.Fprintf(os.Stderr, "deployed: %v\n", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "deployed: goleak: %v\n", err)
			return 1
		}
	}
	return code
}

// build builds every binary into dir with one go build (the packages in
// parallel, from the build cache when nothing changed).
func build(dir string) error {
	const module = "github.com/runtimetruth/runtimetruth"
	targets := []struct {
		path *string
		name string
		pkg  string
	}{
		// The binary of a module path ending in a major version is
		// named after the element before it.
		{&bins.natsServer, "nats-server", "github.com/nats-io/nats-server/v2"},
		{&bins.cli, "runtimetruth", module + "/cmd/runtimetruth"},
		{&bins.collector, "runtimetruth-collector", module + "/services/collector/cmd/runtimetruth-collector"},
		{&bins.verifier, "runtimetruth-verifier", module + "/services/verifier/cmd/runtimetruth-verifier"},
		{&bins.auditor, "runtimetruth-auditor", module + "/services/auditor/cmd/runtimetruth-auditor"},
		{&bins.notifier, "runtimetruth-notifier", module + "/services/notifier/cmd/runtimetruth-notifier"},
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, b := range targets {
		args = append(args, b.pkg)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, out)
	}
	for _, b := range targets {
		*b.path = filepath.Join(dir, b.name)
		if _, err := os.Stat(*b.path); err != nil {
			return fmt.Errorf("go build made no %s: %w", b.name, err)
		}
	}
	return nil
}
