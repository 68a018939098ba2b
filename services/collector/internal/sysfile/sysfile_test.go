package sysfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenBeneath checks OpenBeneath and OpenDirBeneath with openat2 and
// with the component-wise walk: links that stay under the root are
// followed on the way, links leading out (absolute ones included) and
// ".." above the root are ErrEscape, and a link in the last component is
// never followed.
func TestOpenBeneath(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for _, d := range []string{"root/a/b", "root/share", "out"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
	}
	for _, f := range []string{"root/a/b/f", "root/share/f", "out/f"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644))
	}
	for name, target := range map[string]string{
		"root/a/in":      "../share",
		"root/a/chain":   "in",
		"root/a/out":     "../../out",
		"root/a/abs":     filepath.Join(dir, "out"),
		"root/a/absin":   filepath.Join(root, "share"),
		"root/a/flink":   "b/f",
		"root/a/loop":    "loop",
		"root/a/dotdot":  "..",
		"root/a/dotdot2": "../..",
	} {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	for _, mode := range []string{"openat2", "walk"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "walk" {
				defer ForceWalk()()
			}
			d, err := OpenDir(root)
			require.NoError(t, err)
			defer func() { _ = d.Close() }()
			var w Walk
			open := func(rel string) error {
				var p Path
				p.Set("", rel)
				f, err := OpenBeneath(d, &p, &w)
				if err == nil {
					var st Stat
					require.NoError(t, f.Stat(&st))
					_ = f.Close()
				}
				return err
			}
			for _, ok := range []string{"a/b/f", "a/in/f", "a/chain/f", "a/dotdot/share/f", "a/b/../b/f", "share/../a/b/f"} {
				assert.NoError(t, open(ok), ok)
			}
			for _, esc := range []string{"a/out/f", "a/abs/f", "a/absin/f", "a/dotdot2/out/f", "../out/f", "a/../../out/f"} {
				assert.ErrorIs(t, open(esc), ErrEscape, esc)
			}
			assert.True(t, IsLoop(open("a/flink")), "a link in the last component")
			assert.True(t, IsLoop(open("a/in")), "even one to a directory")
			assert.True(t, IsNotExist(open("a/nope/f")))
			assert.True(t, IsNotExist(open("a/b/f/g")), "a file on the way")
			assert.Error(t, open("a/loop/f"))

			var p Path
			p.Set("", "a/chain")
			sub, err := OpenDirBeneath(d, &p, &w)
			require.NoError(t, err, "a last-component link is followed for a directory")
			p.Set("", "f")
			f, err := OpenAt(sub, &p)
			require.NoError(t, err)
			_ = f.Close()
			_ = sub.Close()
			p.Set("", "a/out")
			_, err = OpenDirBeneath(d, &p, &w)
			assert.ErrorIs(t, err, ErrEscape)
		})
	}
}
