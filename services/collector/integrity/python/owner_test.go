package python_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
)

func TestScriptOwner(t *testing.T) {
	_, venv := installFixture(t)
	env, err := python.Open(context.Background(), venv, python.OpenOptions{})
	require.NoError(t, err)
	dists, err := env.Distributions()
	require.NoError(t, err)

	for script, want := range map[string]string{
		"app-cli": "app", // console script of a distribution with another name
		"pip3":    "pip", // one of several scripts in pip's RECORD
		"pip":     "pip",
	} {
		d, ok, err := env.ScriptOwner(dists, script)
		require.NoError(t, err, script)
		require.True(t, ok, script)
		assert.Equal(t, want, d.Key, script)
	}
	for _, name := range []string{"nope", "libdep", "../bin/pip", "", ".."} {
		_, ok, err := env.ScriptOwner(dists, name)
		require.NoError(t, err, name)
		assert.False(t, ok, "%q is no script", name)
	}
	for _, d := range dists {
		if d.Key == "app" {
			assert.Equal(t, []string{"app-cli"}, d.Scripts())
		}
		if d.Key == "libdep" {
			assert.Empty(t, d.Scripts())
		}
	}
}
