package cli_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nobody is the account the run-as tests run Codex as (Debian's nobody).
const nobody = 65534

// openDir is a new directory every user can reach and write (t.TempDir's
// own parent is 0700), removed when the test ends.
func openDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "rt-cli-runas-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	require.NoError(t, os.Chmod(d, 0o1777))
	return d
}

// chownTree gives root and everything under it to uid.
func chownTree(t *testing.T, root string, uid int) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	}))
}

// fakeCodex writes a fake codex that appends who it runs as (uid, HOME,
// CODEX_HOME and $RT_TEST_SECRET) to log, answers --version, and plays an
// app-server for initialize and config/read: what inspect codex asks
// without --resolve-thread. Codex starts the MCP servers as itself, so
// they run as whoever it runs as.
func fakeCodex(t *testing.T, dir, log string) string {
	t.Helper()
	script := `#!/bin/sh
echo "uid=$(id -u) home=$HOME codex_home=${CODEX_HOME:-} secret=${RT_TEST_SECRET:-}" >> '` + log + `'
if [ "$1" = "--version" ]; then echo "codex-cli 0.0.0-fake"; exit 0; fi
while IFS= read -r line; do
	id=$(printf '%s\n' "$line" | sed -n 's/^{"id":\([0-9][0-9]*\),.*/\1/p')
	case "$line" in
	*'"method":"initialize"'*) printf '{"id":%s,"result":{"userAgent":"fake"}}\n' "$id" ;;
	*'"method":"config/read"'*) printf '{"id":%s,"result":{"config":{"model":"fake-model"}}}\n' "$id" ;;
	esac
done
`
	p := filepath.Join(dir, "codex")
	require.NoError(t, os.WriteFile(p, []byte(script), 0o755))
	return p
}

// startedAs returns the lines the fake logged: one per start of it.
func startedAs(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// TestCodexProbeNeverRunsAsRoot: the CLI's Codex probe (inspect codex,
// verify --codex), which starts the agent and the MCP servers its
// configuration names, follows the collector's rule. Run as root, it runs
// it as --codex-run-as, else as the owner of the workspace, with that
// account's environment (CODEX_HOME aside); a root-owned workspace
// without --codex-run-as, or --codex-run-as naming root, is refused with
// exit 1 before Codex ever starts.
func TestCodexProbeNeverRunsAsRoot(t *testing.T) {
	require.Equal(t, 0, os.Geteuid(), "the run-as tests switch users: run them as root")
	t.Setenv("RT_TEST_SECRET", "the-caller's-secret")
	t.Setenv("CODEX_HOME", "/srv/codex-home")
	dir := openDir(t)
	workspace := func(name string, uid int) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.Mkdir(p, 0o755))
		require.NoError(t, os.Chown(p, uid, uid))
		return p
	}
	rootOwned, nobodyOwned := workspace("root-owned", 0), workspace("nobody-owned", nobody)
	baseline := filepath.Join(dir, "baseline.json")

	tests := []struct {
		name    string
		args    []string
		wantErr []string // refused: exit 1, Codex never started
	}{
		{name: "inspect, a root-owned workspace", args: []string{"inspect", "codex", rootOwned},
			wantErr: []string{"the Codex probe never runs as root", "is owned by root and --codex-run-as names no user"}},
		{name: "inspect --resolve-mcp, a root-owned workspace", args: []string{"inspect", "codex", rootOwned, "--resolve-mcp"},
			wantErr: []string{"the Codex probe never runs as root", "--codex-run-as"}},
		{name: "verify --codex, a root-owned workspace", args: []string{"verify", baseline, "--codex", rootOwned, "--resolve-mcp"},
			wantErr: []string{"the Codex probe never runs as root", "--codex-run-as"}},
		{name: "run as root by name", args: []string{"inspect", "codex", nobodyOwned, "--codex-run-as", "root"},
			wantErr: []string{`the Codex probe never runs as root: --codex-run-as "root" is root`}},
		{name: "run as root by uid", args: []string{"inspect", "codex", nobodyOwned, "--codex-run-as", "0"},
			wantErr: []string{`--codex-run-as "0" is root`}},
		{name: "run as an unknown user", args: []string{"inspect", "codex", rootOwned, "--codex-run-as", "no-such-user-rt"},
			wantErr: []string{`no such account: --codex-run-as "no-such-user-rt"`}},

		{name: "inspect, a root-owned workspace, run as nobody", args: []string{"inspect", "codex", rootOwned, "--codex-run-as", "nobody"}},
		{name: "inspect, run as a uid", args: []string{"inspect", "codex", rootOwned, "--codex-run-as", "65534"}},
		{name: "inspect, the owner's workspace", args: []string{"inspect", "codex", nobodyOwned}},
		{name: "verify --codex, the owner's workspace", args: []string{"verify", baseline, "--codex", nobodyOwned}},
		{name: "verify --codex, run as nobody", args: []string{"verify", baseline, "--codex", rootOwned, "--codex-run-as", "nobody"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := openDir(t)
			log := filepath.Join(tmp, "codex.log")
			bin := fakeCodex(t, tmp, log)
			if tc.args[0] == "verify" { // a baseline of the same workspace
				cwd := tc.args[slices.Index(tc.args, "--codex")+1]
				r := run(t, "inspect", "codex", cwd, "--codex-run-as", "nobody", "--codex-binary", bin)
				require.Equal(t, 0, r.code, r.stderr)
				writeFile(t, dir, "baseline.json", r.stdout)
				require.NoError(t, os.Remove(log))
			}
			r := run(t, append(tc.args, "--codex-binary", bin)...)
			if tc.wantErr != nil {
				assert.Equal(t, 1, r.code, r.stdout+r.stderr)
				assert.Empty(t, r.stdout)
				assert.True(t, strings.HasPrefix(r.stderr, "runtimetruth: error: "), r.stderr)
				for _, want := range tc.wantErr {
					assert.Contains(t, r.stderr, want)
				}
				assert.Empty(t, startedAs(t, log), "Codex started")
				return
			}
			require.Equal(t, 0, r.code, r.stdout+r.stderr)
			lines := startedAs(t, log)
			require.Len(t, lines, 2, "codex --version and the app-server")
			for _, l := range lines {
				assert.Equal(t, "uid=65534 home=/nonexistent codex_home=/srv/codex-home secret=", l,
					"Codex runs as nobody, with its environment and the caller's CODEX_HOME only")
			}
		})
	}
}
