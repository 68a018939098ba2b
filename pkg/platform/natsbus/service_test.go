package natsbus_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
)

func TestServiceConfigValidate(t *testing.T) {
	def := natsbus.NewDefaultServiceConfig()
	require.NoError(t, def.Validate())
	assert.Equal(t, natsbus.DefaultURL, def.NATS.URL)
	assert.Equal(t, 1, def.Replicas)
	assert.Empty(t, def.Instance, "the host name")

	for name, tc := range map[string]struct {
		edit func(*natsbus.ServiceConfig)
		want string
	}{
		"nats":             {func(c *natsbus.ServiceConfig) { c.NATS.URL = "" }, "nats.url"},
		"instance control": {func(c *natsbus.ServiceConfig) { c.Instance = "a\nb" }, "instance"},
		"instance long":    {func(c *natsbus.ServiceConfig) { c.Instance = strings.Repeat("a", 1025) }, "instance"},
		"no replicas":      {func(c *natsbus.ServiceConfig) { c.Replicas = 0 }, "replicas: 0 (want 1 to 5)"},
		"many replicas":    {func(c *natsbus.ServiceConfig) { c.Replicas = 6 }, "replicas: 6 (want 1 to 5)"},
	} {
		t.Run(name, func(t *testing.T) {
			c := natsbus.NewDefaultServiceConfig()
			tc.edit(&c)
			err := c.Validate()
			require.ErrorIs(t, err, config.ErrInvalid)
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
