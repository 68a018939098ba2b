package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain/servicemaintest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/gittest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func run(args []string) error {
	return servicemain.Run(context.Background(), service, args, io.Discard, io.Discard)
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "collector.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

func TestVersion(t *testing.T) {
	require.NoError(t, run([]string{"-version"}))
}

func TestMainConformance(t *testing.T) {
	servicemaintest.Conformance(t, service, "shutdown_timeout: -1s\n", false)
}

func TestCheckConfig(t *testing.T) {
	good := writeConfig(t, "host: h1\nstate_dir: /tmp/x\ntargets:\n  - {name: repo, kind: git, path: /srv/app}\n")
	require.NoError(t, run([]string{"-config", good, "-check-config"}))

	bad := writeConfig(t, "host: h1\ntargets:\n  - {name: repo, kind: git, path: /srv/app, intervall: 5s}\n")
	err := run([]string{"-config", bad, "-check-config"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "intervall")

	require.Error(t, run([]string{"-config", filepath.Join(t.TempDir(), "missing.yaml"), "-check-config"}))
	require.Error(t, run([]string{"-no-such-flag"}))
}

// TestRunUntilSIGTERM runs the service against a real server until it
// receives SIGTERM, and checks it published and stopped cleanly.
func TestRunUntilSIGTERM(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	_, js := natstest.Connect(t, url)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	require.NoError(t, topology.Ensure(ctx, js, 1))
	repo := gittest.New(t)
	path := writeConfig(t, fmt.Sprintf("host: h1\nstate_dir: %s\nshutdown_timeout: 10s\nnats: {url: %q}\ntargets:\n  - {name: repo, kind: git, path: %q}\n",
		t.TempDir(), url, repo))

	done := make(chan error, 1)
	go func() { done <- run([]string{"-config", path}) }()
	natstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		s, err := js.Stream(ctx, topology.StreamEvidence)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs < 1 {
			return fmt.Errorf("no evidence yet")
		}
		return nil
	})
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGTERM))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
}

// TestPrintIdentity: --print-identity prints the host and the key it signs
// with (generated on first use, the same every time after) and exits
// without starting the collector.
func TestPrintIdentity(t *testing.T) {
	state := t.TempDir()
	cfg := writeConfig(t, "host: web-01\nstate_dir: "+state+"\n")
	show := func() string {
		var out bytes.Buffer
		require.NoError(t, servicemain.Run(context.Background(), service, []string{"-config", cfg, "--print-identity"}, &out, io.Discard))
		return out.String()
	}
	first := show()
	assert.Contains(t, first, "host     web-01\n")
	assert.Regexp(t, `key      ed25519:[A-Za-z0-9+/]{43}=\n`, first)
	assert.Contains(t, first, "key file "+filepath.Join(state, "identity", "ed25519.key")+"\n")
	assert.Equal(t, first, show(), "the key is kept")
}
