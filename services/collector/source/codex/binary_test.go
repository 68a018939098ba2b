package codex

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNPMNative lays out the three places the @openai/codex shim looks for
// its native binary and checks that each is found, in the shim's order.
func TestNPMNative(t *testing.T) {
	target, ok := npmTargets[runtime.GOOS+"/"+runtime.GOARCH]
	if !ok {
		t.Fatalf("no npm target for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	rel := filepath.Join("vendor", target[1], "bin", "codex")
	touch := func(t *testing.T, path string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"), 0o755))
	}
	for _, tc := range []struct{ name, native string }{
		{"global install: nested platform package", filepath.Join("@openai", "codex", "node_modules", "@openai", target[0], rel)},
		{"local install: hoisted platform package", filepath.Join("@openai", target[0], rel)},
		{"vendored in the package", filepath.Join("@openai", "codex", rel)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nm := t.TempDir()
			shim := filepath.Join(nm, "@openai", "codex", "bin", "codex.js")
			touch(t, shim)
			touch(t, filepath.Join(nm, tc.native))
			native, root, ok := npmNative(shim)
			require.True(t, ok)
			assert.Equal(t, filepath.Join(nm, tc.native), native)
			assert.Equal(t, filepath.Join(nm, "@openai", "codex"), root)

			b, err := resolveBinary(shim)
			require.NoError(t, err)
			assert.Equal(t, shim, b.recorded, "the configured executable is what codex.runtime records")
			assert.Equal(t, native, b.exec)
			assert.Equal(t, []string{"CODEX_MANAGED_PACKAGE_ROOT=" + root, "CODEX_MANAGED_BY_NPM=1"}, b.env)
		})
	}
	t.Run("not a shim", func(t *testing.T) {
		_, _, ok := npmNative("/usr/bin/codex")
		assert.False(t, ok)
	})
	t.Run("shim without a native binary runs as is", func(t *testing.T) {
		shim := filepath.Join(t.TempDir(), "codex", "bin", "codex.js")
		touch(t, shim)
		b, err := resolveBinary(shim)
		require.NoError(t, err)
		assert.Equal(t, shim, b.exec)
		assert.Empty(t, b.env)
	})
}
