package attestor_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/services/attestor"
)

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := attestor.NewDefaultConfig()
	require.NoError(t, cfg.Validate())
	assert.Equal(t, attestor.ModeKeyless, cfg.Signing.Mode)
	assert.Equal(t, "rt.ctl.attest", cfg.Subject)
}

func TestConfigValidate(t *testing.T) {
	cases := map[string]func(c *attestor.Config){
		"no nats url":          func(c *attestor.Config) { c.NATS.URL = "" },
		"replicas":             func(c *attestor.Config) { c.Replicas = 0 },
		"wildcard subject":     func(c *attestor.Config) { c.Subject = "rt.ctl.*" },
		"subject in a stream":  func(c *attestor.Config) { c.Subject = "rt.baseline.sign" },
		"queue group":          func(c *attestor.Config) { c.QueueGroup = "" },
		"concurrency":          func(c *attestor.Config) { c.Concurrency = 0 },
		"request timeout":      func(c *attestor.Config) { c.RequestTimeout = 0 },
		"signing mode":         func(c *attestor.Config) { c.Signing.Mode = "cosign" },
		"key without file":     func(c *attestor.Config) { c.Signing.Mode = attestor.ModeKey },
		"keyless without time": func(c *attestor.Config) { c.Signing.RekorURL, c.Signing.TSAURL = "", "" },
		"keyless no token":     func(c *attestor.Config) { c.Signing.IdentityTokenFile = "" },
		"fulcio with user":     func(c *attestor.Config) { c.Signing.FulcioURL = "https://u:p@fulcio.example" },
		"signing timeout":      func(c *attestor.Config) { c.Signing.Timeout = -time.Second },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := attestor.NewDefaultConfig()
			edit(&cfg)
			require.ErrorIs(t, cfg.Validate(), config.ErrInvalid)
		})
	}
}

func TestConfigLoadIsStrict(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "attestor.yaml")
	require.NoError(t, os.WriteFile(path, []byte("signing:\n  mode: key\n  key_file: /etc/runtimetruth/cosign.key\n  tsa_url: https://tsa.example/api/v1/timestamp\n"), 0o600))
	cfg := attestor.NewDefaultConfig()
	require.NoError(t, config.Load(path, "RUNTIMETRUTH_ATTESTOR", &cfg, nil))
	assert.Equal(t, attestor.ModeKey, cfg.Signing.Mode)
	assert.Equal(t, "/etc/runtimetruth/cosign.key", cfg.Signing.KeyFile)

	t.Setenv("RUNTIMETRUTH_ATTESTOR_SIGNING_KEY_FILE", "/other.key")
	cfg = attestor.NewDefaultConfig()
	require.NoError(t, config.Load(path, "RUNTIMETRUTH_ATTESTOR", &cfg, nil))
	assert.Equal(t, "/other.key", cfg.Signing.KeyFile)

	require.NoError(t, os.WriteFile(path, []byte("signing:\n  key: secret\n"), 0o600))
	cfg = attestor.NewDefaultConfig()
	require.Error(t, config.Load(path, "RUNTIMETRUTH_ATTESTOR", &cfg, nil))
}

// NewKeyConfig is what an embedding process (runtimetruth up) passes to
// New: the defaults, signing with a key file.
func TestNewKeyConfig(t *testing.T) {
	cfg := attestor.NewKeyConfig("/etc/runtimetruth/cosign.key", "/etc/runtimetruth/cosign.password")
	require.NoError(t, cfg.Validate())
	assert.Equal(t, attestor.ModeKey, cfg.Signing.Mode)
	assert.Equal(t, "/etc/runtimetruth/cosign.key", cfg.Signing.KeyFile)
	assert.Equal(t, "/etc/runtimetruth/cosign.password", cfg.Signing.KeyPasswordFile)
	assert.Equal(t, attestor.DefaultSubject, cfg.Subject)
	assert.Equal(t, "rt.ctl.attest", attestor.DefaultSubject)

	_, err := attestor.New(attestor.NewKeyConfig(filepath.Join(t.TempDir(), "missing.key"), ""), attestor.Settings{})
	require.ErrorContains(t, err, "signing key")
}
