package node_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity/node"
)

// TestPackListMatchesNpm compares PackList with `npm pack --dry-run` on
// layouts that exercise each rule PackList documents.
func TestPackListMatchesNpm(t *testing.T) {
	junk := map[string]string{
		".DS_Store": "x", "x.orig": "x", "npm-debug.log": "x", ".npmrc": "x", "a.js.swp": "x",
		".foo.swp": "x", "._res": "x", "package-lock.json": "{}", "yarn.lock": "", "node_modules/dep/index.js": "x",
		"build/config.gypi": "x", "build/out.node": "x", ".git/config": "x", "sub/.git/HEAD": "x", "CVS/x": "x",
	}
	cases := []struct {
		name  string
		files map[string]string
	}{
		{"no rules", map[string]string{
			"package.json": `{"name":"a","version":"1.0.0"}`, "index.js": "1", "lib/x.js": "2", ".eslintrc": "3",
			"README.md": "r", "LICENSE": "l", "docs/guide.md": "g",
		}},
		{"files list", map[string]string{
			"package.json": `{"name":"b","version":"1.0.0","main":"main.js","bin":{"b":"./cli/b.js"},"files":["lib/","dist/*.js","types.d.ts","!lib/secret.js"]}`,
			"main.js":      "m", "cli/b.js": "b", "cli/other.js": "o", "lib/a.js": "a", "lib/secret.js": "s",
			"lib/deep/c.js": "c", "dist/x.js": "x", "dist/x.map": "m", "types.d.ts": "t", "test/t.js": "t",
			"readme.markdown": "r", "Licence.txt": "l", "CHANGELOG.md": "c", "copying": "c", "README.md~": "r",
		}},
		{"npmignore", map[string]string{
			"package.json": `{"name":"c","version":"1.0.0"}`, ".npmignore": "test/\n*.log\n!keep.log\n/root-only.txt\n",
			".gitignore": "lib/\n", "lib/a.js": "a", "test/t.js": "t", "x.log": "l", "keep.log": "k",
			"root-only.txt": "r", "sub/root-only.txt": "s", "sub/.npmignore": "*.tmp\n", "sub/a.tmp": "t", "sub/b.js": "b",
		}},
		{"gitignore fallback", map[string]string{
			"package.json": `{"name":"d","version":"1.0.0"}`, ".gitignore": "dist\ncoverage/\n*.tmp\n",
			"dist/a.js": "a", "coverage/x": "x", "src/a.tmp": "t", "src/a.js": "a", "src/dist/inner.js": "i",
		}},
		{"files with nested npmignore", map[string]string{
			"package.json":   `{"name":"e","version":"1.0.0","files":["lib"]}`,
			"lib/.npmignore": "*.test.js\n", "lib/a.js": "a", "lib/a.test.js": "t", "other.js": "o",
		}},
		{"files naming a link", map[string]string{
			"package.json": `{"name":"g","version":"1.0.0","files":["link.js","lib"]}`,
			"index.js":     "i", "lib/a.js": "a", "other.js": "o",
		}},
		{"files globs", map[string]string{
			"package.json": `{"name":"f","version":"1.0.0","files":["*.js","src/**/*.ts","./bin"]}`,
			"a.js":         "a", "b.cjs": "b", "src/x/y.ts": "y", "src/x/y.js": "j", "bin/run": "r", "nested/c.js": "c",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, junk)
			writeTree(t, dir, tc.files)
			require.NoError(t, os.Symlink("index.js", filepath.Join(dir, "link.js")))
			got, err := node.PackList(dir)
			require.NoError(t, err)
			assert.Equal(t, npmPackList(t, dir), got)
		})
	}
}
