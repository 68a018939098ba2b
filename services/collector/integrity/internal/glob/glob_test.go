package glob_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/services/collector/integrity/internal/glob"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern string
		opts    glob.Options
		name    string
		want    bool
		partial bool
	}{
		{"*.py", glob.Options{}, "a.py", true, true},
		{"*.py", glob.Options{}, "d/a.py", false, false},
		{"*.py", glob.Options{MatchBase: true}, "d/a.py", true, true},
		{"d/**/x.pem", glob.Options{}, "d/x.pem", true, true},
		{"d/**/x.pem", glob.Options{}, "d/a/b/x.pem", true, true},
		{"d/**/x.pem", glob.Options{}, "d", false, true},
		{"d/**", glob.Options{}, "d/a/b", true, true},
		{"d/**", glob.Options{}, "d", false, true},
		{"/lib", glob.Options{}, "/lib", true, true},
		{"dist/", glob.Options{}, "dist/", true, true},
		{"dist/", glob.Options{}, "dist", false, true},
		{"README*", glob.Options{NoCase: true}, "readme.md", true, true},
		{"[!a]*", glob.Options{}, "bcd", true, true},
		{"a/b/c", glob.Options{}, "a/b", false, true},
		{"a/b/c", glob.Options{}, "a/x", false, false},
	}
	for _, tc := range cases {
		p, err := glob.Compile(tc.pattern, tc.opts)
		require.NoError(t, err, tc.pattern)
		assert.Equal(t, tc.want, p.Match(tc.name), "%s ~ %s", tc.pattern, tc.name)
		assert.Equal(t, tc.partial, p.MatchPartial(tc.name), "%s ~ %s (partial)", tc.pattern, tc.name)
	}
	_, err := glob.Compile("a/[", glob.Options{})
	assert.ErrorIs(t, err, glob.ErrBadPattern)
}

func TestExpand(t *testing.T) {
	assert.Equal(t, []string{"/readme", "/readme.*[^~$]"}, glob.Expand("/readme{,.*[^~$]}"))
	assert.Equal(t, []string{"ab", "acd", "ace"}, glob.Expand("a{b,c{d,e}}"))
	assert.Equal(t, []string{"a{b}c"}, glob.Expand("a{b}c"))
	assert.Equal(t, []string{"plain"}, glob.Expand("plain"))
	assert.Equal(t, []string{`a\{b,c}`}, glob.Expand(`a\{b,c}`))
}
