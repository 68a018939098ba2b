package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
)

type natsConfig struct {
	URL     string        `mapstructure:"url"`
	Timeout time.Duration `mapstructure:"timeout"`
}

type testConfig struct {
	Host string     `mapstructure:"host"`
	NATS natsConfig `mapstructure:"nats"`
	Tags []string   `mapstructure:"tags"`
}

func (c *testConfig) Validate() error {
	if c.Host == "bad" {
		return errors.New("host must not be bad")
	}
	return nil
}

func defaults() *testConfig {
	return &testConfig{Host: "h", NATS: natsConfig{URL: "nats://127.0.0.1:4222", Timeout: 5 * time.Second}}
}

func TestLoadLayers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("host: from-file\nnats:\n  timeout: 7s\n"), 0o600))
	t.Setenv("RT_TEST_NATS_URL", "nats://env:4222")
	c := defaults()
	require.NoError(t, config.Load(path, "RT_TEST", c, map[string]any{"tags": []string{"x"}}))
	assert.Equal(t, "from-file", c.Host)
	assert.Equal(t, 7*time.Second, c.NATS.Timeout)
	assert.Equal(t, "nats://env:4222", c.NATS.URL)
	assert.Equal(t, []string{"x"}, c.Tags)
}

func TestLoadRejectsUnknownKeysAndInvalidValues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(path, []byte("host: x\nnats:\n  ulr: typo\n"), 0o600))
	err := config.Load(path, "RT_TEST", defaults(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ulr")

	require.NoError(t, os.WriteFile(path, []byte("host: bad\n"), 0o600))
	err = config.Load(path, "RT_TEST", defaults(), nil)
	require.ErrorContains(t, err, "host must not be bad")

	err = config.Load(filepath.Join(t.TempDir(), "none.yaml"), "RT_TEST", defaults(), nil)
	require.ErrorContains(t, err, "config file")
}

func TestInvalidf(t *testing.T) {
	err := config.Invalidf("replicas: %d (want 1 to %d)", 7, 5)
	require.ErrorIs(t, err, config.ErrInvalid)
	require.EqualError(t, err, "invalid configuration: replicas: 7 (want 1 to 5)")
}
