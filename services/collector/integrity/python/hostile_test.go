package python_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/proctest"
)

// The hostile-file checks run in a child process, the test binary run
// again with these variables set: the environment to check and the file
// to write what it found to.
const (
	hostileVenvEnv = "RUNTIMETRUTH_TEST_HOSTILE_VENV"
	hostileOutEnv  = "RUNTIMETRUTH_TEST_HOSTILE_OUT"
)

// hostileOutcome is what the child found.
type hostileOutcome struct {
	OpenErr string              `json:"open_err,omitempty"`
	Report  *integrity.Report   `json:"report,omitempty"`
	Scripts map[string][]string `json:"scripts,omitempty"`
	VMPeak  int64               `json:"vm_peak_kib"`
}

// addressSpaceHeadroom is how much address space the child may map
// beyond what it has when it starts checking: reading any of the hostile
// files whole (2 GiB, or /dev/zero without end) needs more, and fails.
const addressSpaceHeadroom = 1 << 30

// TestHostileFiles checks an environment whose metadata files are what
// someone with write access may leave there: a METADATA that is a link to
// /dev/zero, a FIFO (nobody writes to it: opening it to read blocks) or a
// 2 GiB sparse file; a RECORD that is a link to a file outside the
// environment, or a FIFO; a .dist-info that is a link leading out of
// site-packages; a direct_url.json or entry_points.txt that is a FIFO; a
// pyvenv.cfg that is a link to /dev/zero or a FIFO. Each is an error for
// its distribution, naming the file (for pyvenv.cfg, for the whole
// check), found without reading it: the other distribution checks as
// usual. The check runs in a child process whose address space is capped
// (RLIMIT_AS), so that reading a huge file fails the test rather than
// exhausting the machine, and under a deadline, so that blocking on a
// FIFO fails it rather than hanging.
func TestHostileFiles(t *testing.T) {
	if venv := os.Getenv(hostileVenvEnv); venv != "" {
		hostileChild(t, venv, os.Getenv(hostileOutEnv))
		return
	}
	fifo := func(t *testing.T, p string) {
		t.Helper()
		require.NoError(t, os.Remove(p))
		require.NoError(t, syscall.Mkfifo(p, 0o644))
	}
	link := func(t *testing.T, target, p string) {
		t.Helper()
		require.NoError(t, os.RemoveAll(p))
		require.NoError(t, os.Symlink(target, p))
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, venv, info, secret string)
		file  string // the file named in evil's error
		why   string // and what it says of it
		open  bool   // the error is Open's: nothing is checked
	}{
		{name: "METADATA links to /dev/zero", file: "METADATA", why: "too many levels of symbolic links",
			setup: func(t *testing.T, _, info, _ string) { link(t, "/dev/zero", filepath.Join(info, "METADATA")) }},
		{name: "METADATA is a FIFO", file: "METADATA", why: "not a regular file",
			setup: func(t *testing.T, _, info, _ string) { fifo(t, filepath.Join(info, "METADATA")) }},
		{name: "METADATA is a 2 GiB sparse file", file: "METADATA", why: "larger than the size cap",
			setup: func(t *testing.T, _, info, _ string) {
				require.NoError(t, os.Truncate(filepath.Join(info, "METADATA"), 2<<30))
			}},
		{name: "RECORD links to a file outside the environment", file: "RECORD", why: "too many levels of symbolic links",
			setup: func(t *testing.T, _, info, secret string) { link(t, secret, filepath.Join(info, "RECORD")) }},
		{name: "RECORD is a FIFO", file: "RECORD", why: "not a regular file",
			setup: func(t *testing.T, _, info, _ string) { fifo(t, filepath.Join(info, "RECORD")) }},
		{name: ".dist-info links out of site-packages", file: "METADATA", why: "outside its root",
			setup: func(t *testing.T, venv, info, _ string) {
				out := filepath.Join(filepath.Dir(venv), "elsewhere.dist-info")
				require.NoError(t, os.Rename(info, out))
				link(t, "../../../../elsewhere.dist-info", info)
			}},
		{name: "direct_url.json is a FIFO", file: "direct_url.json", why: "not a regular file",
			setup: func(t *testing.T, _, info, _ string) {
				require.NoError(t, syscall.Mkfifo(filepath.Join(info, "direct_url.json"), 0o644))
			}},
		{name: "entry_points.txt is a FIFO",
			setup: func(t *testing.T, _, info, _ string) { fifo(t, filepath.Join(info, "entry_points.txt")) }},
		{name: "pyvenv.cfg links to /dev/zero", file: "pyvenv.cfg", why: "too many levels of symbolic links", open: true,
			setup: func(t *testing.T, venv, _, _ string) { link(t, "/dev/zero", filepath.Join(venv, "pyvenv.cfg")) }},
		{name: "pyvenv.cfg is a FIFO", file: "pyvenv.cfg", why: "not a regular file", open: true,
			setup: func(t *testing.T, venv, _, _ string) { fifo(t, filepath.Join(venv, "pyvenv.cfg")) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			venv, site := handVenv(t, dir, "3.11", "home = /usr/bin\nversion = 3.11.4\n")
			writeDist(t, site, "good", "1.0", nil, map[string]string{"good/__init__.py": "GOOD = 1\n"})
			info := writeDist(t, site, "evil", "1.0", nil, map[string]string{"evil/__init__.py": "EVIL = 1\n"})
			require.NoError(t, os.WriteFile(filepath.Join(info, "entry_points.txt"), []byte("[console_scripts]\nevil = evil:main\n"), 0o644))
			// A file outside the environment that reads as a RECORD: were
			// it read, evil would check "its" file and not be an error.
			secret := filepath.Join(dir, "secret")
			require.NoError(t, os.WriteFile(secret, []byte("evil/__init__.py,,\n"), 0o600))
			long := time.Now().Add(-72 * time.Hour)
			require.NoError(t, os.Chtimes(secret, long, long))
			tc.setup(t, venv, info, secret)

			got := runHostileChild(t, venv)
			st, err := os.Stat(secret)
			require.NoError(t, err)
			assert.True(t, st.Sys().(*syscall.Stat_t).Atim.Sec < time.Now().Add(-time.Hour).Unix(),
				"the file outside the environment was not read (its access time is unchanged)")
			if tc.open {
				assert.Contains(t, got.OpenErr, filepath.Join(venv, tc.file))
				assert.Contains(t, got.OpenErr, tc.why)
				return
			}
			require.Empty(t, got.OpenErr)
			res := results(got.Report)
			require.Len(t, res, 2)
			assert.Equal(t, integrity.StatusOK, res["good"].Status, "%s", res["good"].Reason)
			assert.Equal(t, 2, res["good"].Files)
			if tc.file == "" {
				assert.Equal(t, integrity.StatusOK, res["evil"].Status, "%s", res["evil"].Reason)
				assert.Empty(t, got.Scripts["evil"], "an unreadable entry_points.txt declares nothing")
				return
			}
			evil := res["evil"]
			assert.Equal(t, integrity.StatusError, evil.Status)
			assert.Contains(t, evil.Reason, "read "+tc.file+": ")
			assert.Contains(t, evil.Reason, tc.why)
			assert.Zero(t, evil.Files)
			assert.Empty(t, evil.Changes)
		})
	}
}

// runHostileChild checks venv in a child process and returns what it
// found. The child has a deadline: one that blocks fails the test.
func runHostileChild(t *testing.T, venv string) hostileOutcome {
	t.Helper()
	out := filepath.Join(t.TempDir(), "outcome.json")
	output := proctest.RunChild(t, "TestHostileFiles", []string{hostileVenvEnv + "=" + venv, hostileOutEnv + "=" + out}, 2*time.Minute)
	data, err := os.ReadFile(out)
	require.NoError(t, err, "%s", output)
	var got hostileOutcome
	require.NoError(t, json.Unmarshal(data, &got))
	t.Logf("child's peak address space: %d MiB", got.VMPeak>>10)
	return got
}

// hostileChild is the child of TestHostileFiles: it caps its address
// space, then opens and checks venv as the collector would, and lists
// each distribution's scripts (read from entry_points.txt).
func hostileChild(t *testing.T, venv, out string) {
	proctest.LimitAddressSpace(t, addressSpaceHeadroom)
	var got hostileOutcome
	ctx := context.Background()
	env, err := python.Open(ctx, venv, python.OpenOptions{})
	if err == nil {
		got.Report, err = python.Verify(ctx, env, python.Options{All: true})
		require.NoError(t, err)
		dists, err := env.Distributions()
		require.NoError(t, err)
		got.Scripts = map[string][]string{}
		for _, d := range dists {
			got.Scripts[d.Key] = d.Scripts()
		}
		_, _, err = env.ScriptOwner(dists, "evil")
		require.NoError(t, err)
	} else {
		got.OpenErr = err.Error()
	}
	got.VMPeak = proctest.Status(t, "VmPeak:")
	data, err := json.Marshal(got)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(out, data, 0o600))
}
