package python_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// python3 returns the interpreter the tests build venvs with; a missing
// python3 fails the test (python3 and its venv module are test
// dependencies: Debian needs python3-venv).
func python3(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 is required (apt-get install python3 python3-venv)")
	return p
}

// run runs a command in dir, failing the test with its output on error.
func run(t testing.TB, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1",
		"PIP_CONFIG_FILE=/dev/null", "PYTHONDONTWRITEBYTECODE=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

// newVenv makes a virtual environment with python3 -m venv (which
// installs the pip and setuptools ensurepip bundles, offline).
func newVenv(t testing.TB, dir string) string {
	t.Helper()
	venv := filepath.Join(dir, "venv")
	run(t, dir, python3(t), "-m", "venv", venv)
	return venv
}

// project describes a test distribution built by testdata/rtbackend.py.
type project struct {
	Name     string            `json:"name"`
	Version  string            `json:"version"`
	Requires []string          `json:"requires,omitempty"`
	Packages []string          `json:"packages"`
	Scripts  map[string]string `json:"scripts,omitempty"`
	// Files are the package sources (slash paths → content).
	Files map[string]string `json:"-"`
}

// writeProject writes p's source tree under dir/name and returns it.
func writeProject(t testing.TB, dir string, p project) string {
	t.Helper()
	src := filepath.Join(dir, "src", p.Name)
	backend, err := os.ReadFile(filepath.Join("testdata", "rtbackend.py"))
	require.NoError(t, err)
	cfg, err := json.Marshal(p)
	require.NoError(t, err)
	files := map[string]string{
		"pyproject.toml": "[build-system]\nrequires = []\nbuild-backend = \"rtbackend\"\nbackend-path = [\".\"]\n",
		"rtbackend.py":   string(backend),
		"rtproject.json": string(cfg),
	}
	for k, v := range p.Files {
		files[k] = v
	}
	for name, content := range files {
		path := filepath.Join(src, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	return src
}

// pip runs the venv's pip offline.
func pip(t testing.TB, venv string, args ...string) string {
	t.Helper()
	return run(t, filepath.Dir(venv), filepath.Join(venv, "bin", "python"), append([]string{"-m", "pip", "--no-input"}, args...)...)
}

// sitePackages returns the venv's site-packages directory.
func sitePackages(t testing.TB, venv string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages"))
	require.NoError(t, err)
	require.Len(t, m, 1)
	return m[0]
}

// handVenv lays out a virtual environment by hand, with no python3: dir/venv
// with a pyvenv.cfg holding cfg and an empty
// lib/python<version>/site-packages. It returns the venv and its
// site-packages.
func handVenv(t testing.TB, dir, version, cfg string) (venv, site string) {
	t.Helper()
	venv = filepath.Join(dir, "venv")
	site = filepath.Join(venv, "lib", "python"+version, "site-packages")
	require.NoError(t, os.MkdirAll(site, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte(cfg), 0o644))
	return venv, site
}

// recordHash is data's hash as a RECORD row gives it: "sha256=" and the
// SHA-256 in unpadded URL-safe base64.
func recordHash(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256=" + base64.RawURLEncoding.EncodeToString(sum[:])
}
