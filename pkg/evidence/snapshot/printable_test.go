package snapshot_test

import (
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"agent.service":            "agent.service",
		`C:\Users\a b 'q' "d"`:     `C:\Users\a b 'q' "d"`,
		"café ☕ \U0001F600 \u00a0": "café ☕ \U0001F600 \u00a0",
		"red\x1b[31mtext\x1b[0m":   `red\x1b[31mtext\x1b[0m`,
		"tab\tnl\ncr\r":            `tab\tnl\ncr\r`,
		"nul\x00bell\x07del\x7f":   `nul\x00bell\adel\x7f`,
		"c1\u0085csi\u009b":        `c1\u0085csi\u009b`,
		"ls\u2028ps\u2029":         `ls\u2028ps\u2029`,
		"rlo\u202egnp.exe":         `rlo\u202egnp.exe`,
		"zw\u200bj\u200dbom\ufeff": `zw\u200bj\u200dbom\ufeff`,
		"private\U000F0000":        `private\U000f0000`,
		"bad\xffbyte\xc3":          `bad\xffbyte\xc3`,
	} {
		got := snapshot.Printable(in)
		assert.Equal(t, want, got, "%q", in)
		for _, r := range got {
			assert.True(t, unicode.IsGraphic(r), "%q left %U", in, r)
		}
		assert.True(t, utf8.ValidString(got), "%q", in)
	}
}

func TestPrintableKeepsGraphicStrings(t *testing.T) {
	s := "model: gpt-5 -> o3 /srv/agent/AGENTS.md ü"
	assert.Equal(t, s, snapshot.Printable(s))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = snapshot.Printable(s) }), "nothing to escape allocates nothing")
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"systemd.unit:agent.service":        "systemd.unit:agent.service",
		"web-01.example.com":                "web-01.example.com",
		"a_b/c=d@e,f+g%h":                   "a_b/c=d@e,f+g%h",
		"":                                  "''",
		"systemd.unit:agent worker.service": "'systemd.unit:agent worker.service'",
		"it's":                              `'it'\''s'`,
		"$(rm -rf /)":                       "'$(rm -rf /)'",
		"a\nb":                              "'a\nb'",
		"é":                                 "'é'",
	} {
		if got := snapshot.ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
