package node_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// npmEnv isolates npm from the user's configuration and the network: the
// tests only pack and install local tarballs.
func npmEnv(t testing.TB) []string {
	t.Helper()
	home := t.TempDir()
	env := []string{"HOME=" + home, "npm_config_cache=" + filepath.Join(home, "cache"),
		"npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false",
		"npm_config_offline=true", "npm_config_loglevel=error"}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}

// npm runs npm in dir; a missing npm fails the test.
func npm(t testing.TB, dir string, args ...string) string {
	t.Helper()
	path, err := exec.LookPath("npm")
	require.NoError(t, err, "npm is required (apt-get install npm)")
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = npmEnv(t)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("npm %s in %s: %v\n%s\n%s", strings.Join(args, " "), dir, err, out, stderr)
	}
	return string(out)
}

// npmPackList asks npm which files it would publish from dir.
func npmPackList(t testing.TB, dir string) []string {
	t.Helper()
	out := npm(t, dir, "pack", "--dry-run", "--json", "--ignore-scripts")
	var res []struct {
		Files []struct {
			Path string `json:"path"`
		} `json:"files"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	require.Len(t, res, 1)
	var files []string
	for _, f := range res[0].Files {
		files = append(files, f.Path)
	}
	sort.Strings(files)
	return files
}

// writeTree writes files (slash paths → content) under dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
}
