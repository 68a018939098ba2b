package python_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity"
	"github.com/runtimetruth/runtimetruth/services/collector/integrity/python"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/sysfile"
)

// TestVerifySymlinkEscape checks that a RECORD path leading out of the
// environment through a symbolic link on the way (site-packages/evil ->
// /etc with a row evil/hostname and the right hash) is an error for its
// distribution and is never followed, while links that stay inside the
// environment are followed and a link in the last component is still a
// modification. It runs with openat2 and with the component-wise walk.
func TestVerifySymlinkEscape(t *testing.T) {
	for _, mode := range []string{"openat2", "walk"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "walk" {
				defer sysfile.ForceWalk()()
			}
			testSymlinkEscape(t)
		})
	}
}

func testSymlinkEscape(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	venv, site := handVenv(t, dir, "3.12", "home = /usr/bin\nversion = 3.12.0\n")
	secret := "not part of the environment\n"
	write := func(p, content string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	write(filepath.Join(dir, "outside", "etc", "hostname"), secret)
	write(filepath.Join(dir, "outside", "bin", "tool"), secret)
	write(filepath.Join(venv, "share", "inside", "data.txt"), secret)
	write(filepath.Join(site, "plain", "mod.py"), secret)

	link := func(target, name string) { require.NoError(t, os.Symlink(target, filepath.Join(site, name))) }
	link(filepath.Join(dir, "outside", "etc"), "evil")                           // absolute, out
	link("../../../../outside/etc", "evil2")                                     // relative, out
	link("../../../share/inside", "inlink")                                      // relative, stays in
	link(filepath.Join(venv, "share", "inside"), "abslink")                      // absolute: never followed beneath
	link("plain/mod.py", "final.py")                                             // last component
	require.NoError(t, os.Symlink("../outside/bin", filepath.Join(venv, "bin"))) // ../../../bin/... leads out

	rec := recordHash([]byte(secret))
	dist := func(name string, rows ...string) {
		info := filepath.Join(site, name+"-1.0.dist-info")
		write(filepath.Join(info, "METADATA"), "Metadata-Version: 2.1\nName: "+name+"\nVersion: 1.0\n")
		var b strings.Builder
		for _, r := range rows {
			b.WriteString(r + "," + rec + "," + strconv.Itoa(len(secret)) + "\n")
		}
		b.WriteString(name + "-1.0.dist-info/RECORD,,\n")
		write(filepath.Join(info, "RECORD"), b.String())
	}
	dist("plain", "plain/mod.py")
	dist("absout", "plain/mod.py", "evil/hostname")
	dist("relout", "evil2/hostname")
	dist("binout", "../../../bin/tool")
	dist("inside", "inlink/data.txt")
	dist("abslink", "abslink/data.txt")
	dist("final", "final.py")

	env, err := python.Open(ctx, venv, python.OpenOptions{})
	require.NoError(t, err)
	store, err := integrity.OpenStore(filepath.Join(dir, "state"))
	require.NoError(t, err)
	for _, opts := range []python.Options{{}, {Store: store}, {Store: store}} {
		opts.All = true
		rep, err := python.Verify(ctx, env, opts)
		require.NoError(t, err)
		res := results(rep)
		require.Len(t, res, 7)
		for name, path := range map[string]string{
			"absout": "evil/hostname", "relout": "evil2/hostname", "binout": "../../../bin/tool", "abslink": "abslink/data.txt",
		} {
			r := res[name]
			assert.Equal(t, integrity.StatusError, r.Status, name)
			assert.Equal(t, `RECORD path escapes the environment: "`+path+`"`, r.Reason, name)
			assert.Empty(t, r.Changes, name)
		}
		assert.Equal(t, integrity.StatusOK, res["plain"].Status)
		assert.Equal(t, integrity.StatusOK, res["inside"].Status, "a link that stays in the environment is followed")
		assert.Equal(t, integrity.StatusModified, res["final"].Status, "a link in the last component is a change")
		require.Len(t, res["final"].Changes, 1)
		assert.Equal(t, "symlink", res["final"].Changes[0].Observed)
	}
}
