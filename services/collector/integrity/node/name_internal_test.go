package node

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestValidName(t *testing.T) {
	for _, n := range []string{"lodash", "@types/node", "a.b", "x-y_z", "@s/x.js", "..a", "a..", ".bin2"} {
		assert.True(t, validName(n), n)
	}
	for _, n := range []string{
		"", ".", "..", "../x", "../../etc", "a/b", "@s/..", "@s/../../x", "@/x", "@s/", "/etc", "a\\b",
		"@s/x/y", "a\x00b", "./x",
	} {
		assert.False(t, validName(n), "%q", n)
	}
}

// FuzzValidName checks that a name validName accepts names one folder
// (or a scope and one folder) strictly below node_modules.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"lodash", "@types/node", "../x", "@s/../../x", "a/b", "."} {
		f.Add(s)
	}
	nm := filepath.FromSlash("/p/node_modules")
	f.Fuzz(func(t *testing.T, n string) {
		if !validName(n) {
			return
		}
		dir := filepath.Join(nm, filepath.FromSlash(n))
		rel, err := filepath.Rel(nm, dir)
		if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			t.Fatalf("%q names %s, not a folder under node_modules", n, dir)
		}
		if depth := strings.Count(rel, string(filepath.Separator)) + 1; depth > 2 || depth == 2 && !strings.HasPrefix(n, "@") {
			t.Fatalf("%q names %s, %d levels down", n, dir, depth)
		}
	})
}
