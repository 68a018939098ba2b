package natsbus_test

import (
	"bytes"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

const (
	testUser     = "collector"
	testPassword = "s3cret-pa55word"
)

// runAuthServer starts a JetStream server that requires a user and
// password, on port (0 for any).
func runAuthServer(t *testing.T, port int) string {
	t.Helper()
	opts := natstest.Options(t.TempDir())
	opts.Username, opts.Password = testUser, testPassword
	if port != 0 {
		opts.Port = port
	}
	_, url := natstest.Run(t, opts)
	return url
}

func TestConnectWithUserPassword(t *testing.T) {
	url := runAuthServer(t, 0)
	cfg := natsbus.NewDefaultConfig()
	cfg.URL, cfg.User, cfg.Password = url, testUser, testPassword

	nc, err := natsbus.Connect(cfg, "test-client")
	require.NoError(t, err)
	defer nc.Close()
	assert.True(t, nc.IsConnected())
	assert.Equal(t, "test-client", nc.Opts.Name)
	assert.Equal(t, -1, nc.Opts.MaxReconnect, "reconnects forever")

	sub, err := nc.SubscribeSync("hello")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("hello", []byte("world")))
	m, err := sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, "world", string(m.Data))

	cfg.Name = "configured"
	nc2, err := natsbus.Connect(cfg, "test-client")
	require.NoError(t, err)
	defer nc2.Close()
	assert.Equal(t, "configured", nc2.Opts.Name)
}

func TestConnectRefusedCredentialsFailWithoutLeakingThem(t *testing.T) {
	url := runAuthServer(t, 0)
	for _, tc := range []struct{ name, user, password string }{
		{"wrong password", testUser, "wrong-" + testPassword},
		{"no credentials", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := natsbus.Config{URL: url, User: tc.user, Password: tc.password}
			start := time.Now()
			nc, err := natsbus.Connect(cfg, "test-client")
			require.Error(t, err)
			assert.Nil(t, nc)
			require.ErrorIs(t, err, nats.ErrAuthorization)
			assert.NotContains(t, err.Error(), testPassword)
			assert.Less(t, time.Since(start), natsbus.DialTimeout, "an auth failure is not retried")
		})
	}
}

func TestConnectKeepsTryingAnUnreachableServer(t *testing.T) {
	port := freePort(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	cfg := natsbus.Config{URL: "nats://127.0.0.1:" + strconv.Itoa(port), User: testUser, Password: testPassword}

	nc, err := natsbus.Connect(cfg, "test-client", natsbus.LogEvents(log))
	require.NoError(t, err, "an absent server is not an error")
	defer nc.Close()
	assert.False(t, nc.IsConnected())

	runAuthServer(t, port)
	natstest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		if !nc.IsConnected() {
			return nats.ErrConnectionReconnecting
		}
		return nil
	})
	require.NoError(t, nc.Publish("x", nil))
	assert.NotContains(t, logs.String(), testPassword)
}

func TestDialMakesOneAttempt(t *testing.T) {
	port := freePort(t)
	cfg := natsbus.Config{URL: "nats://127.0.0.1:" + strconv.Itoa(port), User: testUser, Password: testPassword}
	nc, err := natsbus.Dial(cfg, "test-cli")
	require.ErrorIs(t, err, nats.ErrNoServers, "an absent server is an error")
	assert.Nil(t, nc)
	assert.NotContains(t, err.Error(), testPassword)

	runAuthServer(t, port)
	nc, err = natsbus.Dial(cfg, "test-cli")
	require.NoError(t, err)
	defer nc.Close()
	assert.True(t, nc.IsConnected())
	assert.Equal(t, "test-cli", nc.Opts.Name)

	cfg.Password = "wrong"
	_, err = natsbus.Dial(cfg, "test-cli")
	require.ErrorIs(t, err, nats.ErrAuthorization)
}

func TestReconnectDelayBacksOff(t *testing.T) {
	assert.GreaterOrEqual(t, natsbus.ReconnectDelay(0), natsbus.ReconnectFirst)
	assert.Less(t, natsbus.ReconnectDelay(0), natsbus.ReconnectFirst+natsbus.ReconnectJitter)
	assert.GreaterOrEqual(t, natsbus.ReconnectDelay(2), 4*natsbus.ReconnectFirst)
	for _, n := range []int{5, 8, 100, 1 << 30} {
		d := natsbus.ReconnectDelay(n)
		assert.GreaterOrEqual(t, d, natsbus.ReconnectLongest)
		assert.Less(t, d, natsbus.ReconnectLongest+natsbus.ReconnectJitter)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  natsbus.Config
		err  string
	}{
		{"default", natsbus.NewDefaultConfig(), ""},
		{"list", natsbus.Config{URL: "nats://a:4222, tls://b:4222,c:4222"}, ""},
		{"user password", natsbus.Config{URL: "nats://a", User: "u", Password: "p"}, ""},
		{"tls", natsbus.Config{URL: "tls://a", TLS: natsbus.TLSConfig{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}}, ""},
		{"empty url", natsbus.Config{}, "nats.url is empty"},
		{"bad scheme", natsbus.Config{URL: "http://a:4222"}, "scheme"},
		{"two methods", natsbus.Config{URL: "nats://a", User: "u", CredsFile: "x.creds"}, "only one"},
		{"password alone", natsbus.Config{URL: "nats://a", Password: "p"}, "without nats.user"},
		{"cert without key", natsbus.Config{URL: "nats://a", TLS: natsbus.TLSConfig{CertFile: "c.pem"}}, "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, config.ErrInvalid)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestValidateHidesURLCredentials(t *testing.T) {
	err := natsbus.Config{URL: "nats://u:" + testPassword + "@"}.Validate()
	require.Error(t, err)
	assert.False(t, strings.Contains(err.Error(), testPassword), err.Error())
}

func TestConnectMissingFiles(t *testing.T) {
	_, err := natsbus.Connect(natsbus.Config{URL: "nats://127.0.0.1:1", NKeySeedFile: "/nonexistent/seed"}, "x")
	require.Error(t, err)
	_, err = natsbus.Connect(natsbus.Config{URL: "nats://127.0.0.1:1", TLS: natsbus.TLSConfig{CAFile: "/nonexistent/ca.pem"}}, "x")
	require.Error(t, err)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}
