package verifier_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus/natsbustest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

const (
	natsUser     = "verifier"
	natsPassword = "v3rifier-pa55"
)

// clientJS connects to url with opts for the test's own publishing and
// reading.
func clientJS(t *testing.T, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

// verifyOne starts a verifier with cfg, checks it verifies one snapshot
// read and written through js, and stops it.
func verifyOne(t *testing.T, cfg verifier.Config, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	v, err := verifier.New(cfg, verifier.Settings{})
	require.NoError(t, err)
	require.NoError(t, v.Start(ctx))
	id := publishSnapshot(ctx, t, js, "web-01", snap(unit(1)))
	assert.Equal(t, events.StatusError, verdictOf(ctx, t, js, id).Status, "no baseline")
	require.NoError(t, v.Shutdown(ctx))
}

func TestVerifierWithPasswordFile(t *testing.T) {
	url := natsbustest.RunUserPassword(t, natsUser, natsPassword)
	cfg := testConfig()
	cfg.NATS = natsbus.Config{URL: url, User: natsUser, PasswordFile: natsbustest.WriteFile(t, "password", []byte(natsPassword+"\n"))}
	verifyOne(t, cfg, clientJS(t, url, nats.UserInfo(natsUser, natsPassword)))

	// A refused password fails Start at once rather than at start_timeout.
	cfg.NATS.PasswordFile = natsbustest.WriteFile(t, "wrong", []byte("wrong"))
	v, err := verifier.New(cfg, verifier.Settings{})
	require.NoError(t, err)
	err = v.Start(t.Context())
	require.ErrorIs(t, err, nats.ErrAuthorization)
	assert.NotContains(t, err.Error(), natsPassword)
	require.NoError(t, v.Shutdown(t.Context()))
}

func TestVerifierWithMutualTLS(t *testing.T) {
	p := natsbustest.NewPKI(t)
	url := natsbustest.RunMutualTLS(t, p)
	cfg := testConfig()
	cfg.NATS.URL = url
	cfg.NATS.TLS = natsbus.TLSConfig{CAFile: p.CA, CertFile: p.ClientCert, KeyFile: p.ClientKey}
	verifyOne(t, cfg, clientJS(t, url, nats.RootCAs(p.CA), nats.ClientCert(p.ClientCert, p.ClientKey)))

	// Another CA's server certificate is refused.
	cfg.NATS.TLS.CAFile = natsbustest.NewPKI(t).CA
	v, err := verifier.New(cfg, verifier.Settings{})
	require.NoError(t, err)
	require.Error(t, v.Start(t.Context()))
	require.NoError(t, v.Shutdown(t.Context()))
}

func TestVerifierWaitsForNATSAtStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	opts := natstest.Options(t.TempDir())
	opts.Port = port
	opts.Username, opts.Password = natsUser, natsPassword
	cfg := testConfig()
	cfg.NATS = natsbus.Config{URL: "nats://127.0.0.1:" + strconv.Itoa(port), User: natsUser, Password: natsPassword}
	v, err := verifier.New(cfg, verifier.Settings{})
	require.NoError(t, err)
	started := make(chan error, 1)
	go func() { started <- v.Start(t.Context()) }()
	select {
	case err := <-started:
		t.Fatalf("Start returned before the server was up: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	_, url := natstest.Run(t, opts)
	require.NoError(t, <-started, "Start waits for the server within start_timeout")
	t.Cleanup(func() { require.NoError(t, v.Shutdown(context.Background())) })

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	js := clientJS(t, url, nats.UserInfo(natsUser, natsPassword))
	id := publishSnapshot(ctx, t, js, "web-01", snap(unit(1)))
	verdictOf(ctx, t, js, id)
}

func TestLoadConfigSharedNATSKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verifier.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
nats:
  url: tls://nats:4222
  user: verifier
  password_file: /run/secrets/nats-password
  name: verifier-0
  tls: {ca_file: /ca.pem, cert_file: /c.pem, key_file: /k.pem}
`), 0o600))
	cfg := testConfig()
	require.NoError(t, config.Load(path, envPrefix, &cfg, nil))
	assert.Equal(t, natsbus.Config{URL: "tls://nats:4222", User: "verifier", PasswordFile: "/run/secrets/nats-password",
		Name: "verifier-0", TLS: natsbus.TLSConfig{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem"}}, cfg.NATS)
}
