package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func run(args ...string) (string, error) {
	var out bytes.Buffer
	err := servicemain.Run(context.Background(), service, args, &out, io.Discard)
	return out.String(), err
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "verifier.yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

func TestVersion(t *testing.T) {
	out, err := run("--version")
	require.NoError(t, err)
	assert.Equal(t, version+"\n", out)
}

func TestCheckConfig(t *testing.T) {
	out, err := run("--check-config")
	require.NoError(t, err, "the defaults are valid")
	assert.Contains(t, out, "configuration ok")

	platform := writeConfig(t, "http: {listen: \"127.0.0.1:0\", shutdown_delay: 1s}\n"+
		"telemetry: {otlp: {endpoint: \"http://otel-collector:4318\"}}\nlog: {level: debug, format: text}\n")
	_, err = run("--config", platform, "--check-config")
	require.NoError(t, err)

	for name, text := range map[string]string{
		"unknown key":          "shutdown_timeoutt: 5s\n",
		"unknown platform key": "http: {listen: \":9090\", lissten: \":1\"}\n",
		"bad listen":           "http: {listen: \"nonsense\"}\n",
		"bad endpoint":         "telemetry: {otlp: {endpoint: \"otel:4318\"}}\n",
		"service validate":     "shutdown_timeout: -1s\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := run("--config", writeConfig(t, text), "--check-config")
			require.Error(t, err)
		})
	}
	_, err = run("--config", writeConfig(t, "shutdown_timeoutt: 5s\n"), "--check-config")
	assert.ErrorContains(t, err, "shutdown_timeoutt", "the error names the unknown key")

	t.Setenv("RUNTIMETRUTH_VERIFIER_HTTP_LISTEN", "nonsense")
	_, err = run("--check-config")
	assert.ErrorContains(t, err, "http.listen")

	_, err = run("--no-such-flag")
	require.Error(t, err)
}
