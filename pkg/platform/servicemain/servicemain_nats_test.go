package servicemain_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/lifecycle"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/servicemain"
)

// busConfig is the configuration of a service on NATS.
type busConfig struct {
	NATS     natsbus.Config `mapstructure:"nats"`
	Replicas int            `mapstructure:"replicas"`
	Consumer string         `mapstructure:"consumer"`
}

func (c *busConfig) Validate() error { return c.NATS.Validate() }

var errBuilt = errors.New("built")

// loadBus runs a service on NATS with args and returns the configuration
// its New got (New stops the run there).
func loadBus(t *testing.T, args ...string) (busConfig, error) {
	t.Helper()
	var got busConfig
	s := servicemain.Service[busConfig]{
		Name:    "bus",
		Version: "v0",
		DefaultConfig: func() busConfig {
			return busConfig{NATS: natsbus.NewDefaultConfig(), Replicas: 1, Consumer: "default"}
		},
		New: func(cfg busConfig, _ servicemain.Settings) (lifecycle.Component, error) {
			got = cfg
			return nil, errBuilt
		},
	}
	err := servicemain.Run(context.Background(), s, args, io.Discard, io.Discard)
	if errors.Is(err, errBuilt) {
		return got, nil
	}
	return busConfig{}, err
}

func TestNATSFlagsSetTheNATSKeys(t *testing.T) {
	cfg, err := loadBus(t, "--nats", "tls://a:4222,tls://b:4222", "--nats-creds", "/run/secrets/bus.creds",
		"--nats-tls-ca", "/ca.pem", "--nats-tls-cert", "/c.pem", "--nats-tls-key", "/k.pem")
	require.NoError(t, err)
	assert.Equal(t, natsbus.Config{URL: "tls://a:4222,tls://b:4222", CredsFile: "/run/secrets/bus.creds",
		TLS: natsbus.TLSConfig{CAFile: "/ca.pem", CertFile: "/c.pem", KeyFile: "/k.pem"}}, cfg.NATS)

	cfg, err = loadBus(t, "--nats-user", "collector", "--nats-password-file", "/run/secrets/nats")
	require.NoError(t, err)
	assert.Equal(t, natsbus.Config{URL: natsbus.DefaultURL, User: "collector", PasswordFile: "/run/secrets/nats"}, cfg.NATS)

	_, err = loadBus(t, "--nats-tls-cert", "/c.pem")
	require.ErrorIs(t, err, config.ErrInvalid, "the flags are validated as the file is")
	require.ErrorContains(t, err, "cert_file and key_file go together")
	_, err = loadBus(t, "--nats", "ftp://a:21")
	require.ErrorContains(t, err, "nats.url")
}

func TestConfigPrecedence(t *testing.T) {
	file := writeConfig(t, "nats: {url: nats://file:4222, user: file-user}\nreplicas: 2\nconsumer: file\n")

	cfg, err := loadBus(t)
	require.NoError(t, err)
	assert.Equal(t, natsbus.DefaultURL, cfg.NATS.URL, "defaults")
	assert.Equal(t, 1, cfg.Replicas)

	cfg, err = loadBus(t, "--config", file)
	require.NoError(t, err)
	assert.Equal(t, "nats://file:4222", cfg.NATS.URL, "the file over the defaults")
	assert.Equal(t, 2, cfg.Replicas)

	t.Setenv("RUNTIMETRUTH_BUS_NATS_URL", "nats://env:4222")
	t.Setenv("RUNTIMETRUTH_BUS_REPLICAS", "3")
	cfg, err = loadBus(t, "--config", file)
	require.NoError(t, err)
	assert.Equal(t, "nats://env:4222", cfg.NATS.URL, "the environment over the file")
	assert.Equal(t, 3, cfg.Replicas)
	assert.Equal(t, "file-user", cfg.NATS.User, "keys the environment leaves keep the file's value")

	cfg, err = loadBus(t, "--config", file, "--nats", "nats://flag:4222", "--set", "replicas=4", "--set", "consumer=flag")
	require.NoError(t, err)
	assert.Equal(t, "nats://flag:4222", cfg.NATS.URL, "flags over the environment")
	assert.Equal(t, 4, cfg.Replicas, "--set over the environment, decoded to the key's type")
	assert.Equal(t, "flag", cfg.Consumer, "--set over the file")
	assert.Equal(t, "file-user", cfg.NATS.User)

	cfg, err = loadBus(t, "--set", "nats.url=nats://set:4222", "--nats", "nats://flag:4222")
	require.NoError(t, err)
	assert.Equal(t, "nats://flag:4222", cfg.NATS.URL, "--nats wins over --set nats.url")
	cfg, err = loadBus(t, "--set", "NATS.TLS.CA_FILE=/ca.pem", "--set", "nats.url=tls://set:4222")
	require.NoError(t, err)
	assert.Equal(t, "/ca.pem", cfg.NATS.TLS.CAFile, "--set takes any key path, in any case")
	assert.Equal(t, "tls://set:4222", cfg.NATS.URL)
}

func TestSetFlagRefusesUnknownKeysAndBadForms(t *testing.T) {
	_, err := loadBus(t, "--set", "nats.ulr=nats://a:4222")
	require.ErrorContains(t, err, "ulr", "an unknown key is an error naming it")
	_, err = loadBus(t, "--set", "replicas")
	require.ErrorContains(t, err, "KEY=VALUE")
	_, err = loadBus(t, "--set", "=x")
	require.ErrorContains(t, err, "KEY=VALUE")
	_, err = loadBus(t, "--set", "replicas=many")
	require.ErrorContains(t, err, "replicas")
}
