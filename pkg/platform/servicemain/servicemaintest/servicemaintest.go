// Package servicemaintest checks what every service main built on
// servicemain must do: print its version, accept its defaults, the
// platform keys and the NATS flags, and refuse an unknown key, a bad
// platform value, a value the service's own validation refuses, and an
// unknown flag.
package servicemaintest

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
)

// Run runs s with args as its main would, returning its standard output.
func Run[C any](s servicemain.Service[C], args ...string) (string, error) {
	var out bytes.Buffer
	err := servicemain.Run(context.Background(), s, args, &out, io.Discard)
	return out.String(), err
}

// WriteConfig writes text as the service's config file in a temporary
// directory and returns its path.
func WriteConfig(t testing.TB, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	return path
}

// Conformance runs the checks every main must pass. invalid is a config
// text that the service's own validation refuses (for example a negative
// shutdown_timeout); defaultsValid says whether the defaults alone pass
// --check-config (a collector without targets may not).
func Conformance[C any](t *testing.T, s servicemain.Service[C], invalid string, defaultsValid bool) {
	t.Helper()
	t.Run("version", func(t *testing.T) {
		out, err := Run(s, "--version")
		require.NoError(t, err)
		assert.Equal(t, s.Version+"\n", out)
	})
	t.Run("check-config", func(t *testing.T) {
		if defaultsValid {
			out, err := Run(s, "--check-config")
			require.NoError(t, err, "the defaults are valid")
			assert.Contains(t, out, "configuration ok")
		}
		for name, text := range map[string]string{
			"unknown key":          "shutdown_timeoutt: 5s\n",
			"unknown platform key": "http: {listen: \":9090\", lissten: \":1\"}\n",
			"bad listen":           "http: {listen: \"nonsense\"}\n",
			"bad endpoint":         "telemetry: {otlp: {endpoint: \"otel:4318\"}}\n",
			"service validate":     invalid,
		} {
			t.Run(name, func(t *testing.T) {
				_, err := Run(s, "--config", WriteConfig(t, s.Name, text), "--check-config")
				require.Error(t, err)
			})
		}
		_, err := Run(s, "--config", WriteConfig(t, s.Name, "shutdown_timeoutt: 5s\n"), "--check-config")
		assert.ErrorContains(t, err, "shutdown_timeoutt", "the error names the unknown key")
		_, err = Run(s, "--no-such-flag")
		require.Error(t, err)
	})
	t.Run("environment", func(t *testing.T) {
		t.Setenv(s.EnvPrefix()+"_HTTP_LISTEN", "nonsense")
		_, err := Run(s, "--check-config")
		assert.ErrorContains(t, err, "http.listen")
	})
	if defaultsValid {
		t.Run("nats flags", func(t *testing.T) {
			_, err := Run(s, "--check-config", "--nats", "tls://a:4222,tls://b:4222", "--nats-creds", "/s.creds",
				"--nats-tls-ca", "/ca.pem", "--nats-tls-cert", "/c.pem", "--nats-tls-key", "/k.pem")
			require.NoError(t, err, "the NATS flags name the nats section's keys")
			_, err = Run(s, "--check-config", "--nats-user", "u", "--nats-password-file", "/p")
			require.NoError(t, err)
			_, err = Run(s, "--check-config", "--nats", "ftp://a:21")
			require.ErrorContains(t, err, "nats.url", "--nats is nats.url")
			_, err = Run(s, "--check-config", "--nats-tls-cert", "/c.pem")
			require.ErrorContains(t, err, "cert_file and key_file go together", "--nats-tls-cert is nats.tls.cert_file")
			_, err = Run(s, "--check-config", "--set", "shutdown_timeoutt=5s")
			require.ErrorContains(t, err, "shutdown_timeoutt", "--set refuses an unknown key")
			_, err = Run(s, "--check-config", "--set", "shutdown_timeout=-1s")
			require.Error(t, err, "--set values are validated")
		})
		t.Run("platform keys", func(t *testing.T) {
			platform := WriteConfig(t, s.Name, "http: {listen: \"127.0.0.1:0\", shutdown_delay: 1s}\n"+
				"telemetry: {otlp: {endpoint: \"http://otel-collector:4318\"}}\nlog: {level: debug, format: text}\n")
			_, err := Run(s, "--config", platform, "--check-config")
			require.NoError(t, err)
		})
	}
}
