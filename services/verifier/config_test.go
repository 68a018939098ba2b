package verifier_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/services/verifier"
)

const envPrefix = "RUNTIMETRUTH_VERIFIER"

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := verifier.NewDefaultConfig()
	require.NoError(t, cfg.Validate())
	assert.Equal(t, "nats://127.0.0.1:4222", cfg.NATS.URL)
	assert.Equal(t, "verifier", cfg.Consumer)
	assert.Equal(t, 1, cfg.Replicas)
}

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verifier.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
nats:
  url: nats://a:4222,nats://b:4222
  creds_file: /etc/runtimetruth/verifier.creds
  tls:
    ca_file: /etc/runtimetruth/ca.pem
replicas: 3
concurrency: 8
shutdown_timeout: 40s
`), 0o600))
	t.Setenv(envPrefix+"_INSTANCE", "verifier-0")
	t.Setenv(envPrefix+"_HANDLER_TIMEOUT", "10s")
	cfg := verifier.NewDefaultConfig()
	require.NoError(t, config.Load(path, envPrefix, &cfg, nil))
	assert.Equal(t, "nats://a:4222,nats://b:4222", cfg.NATS.URL)
	assert.Equal(t, "/etc/runtimetruth/verifier.creds", cfg.NATS.CredsFile)
	assert.Equal(t, "/etc/runtimetruth/ca.pem", cfg.NATS.TLS.CAFile)
	assert.Equal(t, 3, cfg.Replicas)
	assert.Equal(t, 8, cfg.Concurrency)
	assert.Equal(t, 40*time.Second, cfg.ShutdownTimeout)
	assert.Equal(t, "verifier-0", cfg.Instance)
	assert.Equal(t, 10*time.Second, cfg.HandlerTimeout)
	assert.Equal(t, "verifier", cfg.Consumer, "default kept")
}

func TestLoadConfigRejectsUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "verifier.yaml")
	require.NoError(t, os.WriteFile(path, []byte("nats:\n  ulr: nats://a:4222\n"), 0o600))
	cfg := verifier.NewDefaultConfig()
	require.ErrorContains(t, config.Load(path, envPrefix, &cfg, nil), "ulr")
}

func TestConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		edit func(*verifier.Config)
		want string
	}{
		"empty url":           {func(c *verifier.Config) { c.NATS.URL = " " }, "nats.url is empty"},
		"bad scheme":          {func(c *verifier.Config) { c.NATS.URL = "http://a:4222" }, "scheme"},
		"two auth methods":    {func(c *verifier.Config) { c.NATS.CredsFile, c.NATS.User = "x.creds", "u" }, "only one of"},
		"password, no user":   {func(c *verifier.Config) { c.NATS.Password = "p" }, "without nats.user"},
		"password twice":      {func(c *verifier.Config) { c.NATS.User, c.NATS.Password, c.NATS.PasswordFile = "u", "p", "/p" }, "password_file"},
		"cert without key":    {func(c *verifier.Config) { c.NATS.TLS.CertFile = "c.pem" }, "go together"},
		"replicas":            {func(c *verifier.Config) { c.Replicas = 7 }, "replicas"},
		"consumer name":       {func(c *verifier.Config) { c.Consumer = "a.b" }, "consumer"},
		"concurrency":         {func(c *verifier.Config) { c.Concurrency = 0 }, "concurrency"},
		"handler timeout":     {func(c *verifier.Config) { c.HandlerTimeout = time.Minute }, "handler_timeout"},
		"start timeout":       {func(c *verifier.Config) { c.StartTimeout = 0 }, "start_timeout"},
		"shutdown timeout":    {func(c *verifier.Config) { c.ShutdownTimeout = -time.Second }, "shutdown_timeout"},
		"instance with a tab": {func(c *verifier.Config) { c.Instance = "a\tb" }, "instance"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := verifier.NewDefaultConfig()
			tc.edit(&cfg)
			err := cfg.Validate()
			require.ErrorIs(t, err, config.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestConfigErrorsHideURLCredentials(t *testing.T) {
	cfg := verifier.NewDefaultConfig()
	cfg.NATS.URL = "nats://user:s3cret@127.0.0.1:1"
	cfg.StartTimeout = time.Second
	v, err := verifier.New(cfg, verifier.Settings{})
	require.NoError(t, err)
	err = v.Start(t.Context())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
}
