package policy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/policy"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.toml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestLoadPolicyReadsSchemaV1Selectors(t *testing.T) {
	p, err := policy.Load(write(t, `version = 1
protect = ["codex.thread.model", "codex.instructions", "codex.thread.model"]
`))
	require.NoError(t, err)
	assert.Equal(t, []string{"codex.thread.model", "codex.instructions"}, p.Protect)
}

func TestLoadPolicyTrimsSelectorWhitespace(t *testing.T) {
	p, err := policy.Load(write(t, "version = 1\nprotect = [\"  codex.thread.model\\t\", \"codex.thread.model\"]\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"codex.thread.model"}, p.Protect)
}

func TestLoadPolicyRejectsInvalidSchema(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"version 2", "version = 2\nprotect = [\"a\"]", "policy version must be integer 1"},
		{"version bool", "version = true\nprotect = [\"a\"]", "policy version must be integer 1"},
		{"version float", "version = 1.0\nprotect = [\"a\"]", "policy version must be integer 1"},
		{"version string", "version = \"1\"\nprotect = [\"a\"]", "policy version must be integer 1"},
		{"version missing", "protect = [\"a\"]", "policy version must be integer 1"},
		{"unknown key", "version = 1\nprotect = [\"a\"]\nmode = \"x\"", "unsupported policy key(s): 'mode'"},
		{"unknown keys sorted", "zeta = 1\nversion = 1\nprotect = [\"a\"]\nalpha = 2", "unsupported policy key(s): 'alpha', 'zeta'"},
		{"empty array", "version = 1\nprotect = []", "policy protect must be a non-empty array of selectors"},
		{"not an array", "version = 1\nprotect = \"a\"", "policy protect must be a non-empty array of selectors"},
		{"missing protect", "version = 1", "policy protect must be a non-empty array of selectors"},
		{"non-string element", "version = 1\nprotect = [\"a\", 3]", "policy protect[1] must be a string selector"},
		{"blank string", "version = 1\nprotect = [\"a\", \"   \"]", "policy protect[1] must not be empty"},
		{"table", "version = 1\n[protect]\na = 1", "policy protect must be a non-empty array of selectors"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := write(t, tc.body)
			_, err := policy.Load(path)
			require.ErrorIs(t, err, policy.ErrPolicy)
			assert.Equal(t, "invalid policy '"+path+"': "+tc.want, err.Error())
		})
	}
}

func TestLoadPolicyRejectsInvalidTOML(t *testing.T) {
	for _, body := range []string{"version = ", "version = 1\nversion = 1\nprotect=[\"a\"]", "\x00\xff", "protect = [\"a\""} {
		path := write(t, body)
		_, err := policy.Load(path)
		require.ErrorIs(t, err, policy.ErrPolicy, body)
		assert.True(t, strings.HasPrefix(err.Error(), "invalid policy '"+path+"': "), err.Error())
	}
}

func TestLoadPolicyRejectsMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.toml")
	_, err := policy.Load(path)
	require.ErrorIs(t, err, policy.ErrPolicy)
	assert.Equal(t, "could not read policy '"+path+"': no such file or directory", err.Error())
}

func TestLoadPolicyRejectsHugeFile(t *testing.T) {
	path := write(t, "version = 1\nprotect = [\"a\"]\n#"+strings.Repeat("x", policy.MaxSize))
	_, err := policy.Load(path)
	require.ErrorIs(t, err, policy.ErrPolicy)
	assert.Contains(t, err.Error(), "larger than")
}

func TestMergeKeepsPolicyFirstThenCLI(t *testing.T) {
	assert.Equal(t, []string{"a", "b", "c"}, policy.Merge([]string{"a", "b"}, []string{"b", "c", "a"}))
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"version = 1\nprotect = [\"codex.thread.model\"]",
		"version = 1\nprotect = []", "mode = 1", "version = 9223372036854775807", "[[protect]]\n", "protect = [[\"a\"]]",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := policy.Parse(data)
		if err != nil {
			return
		}
		if len(p.Protect) == 0 {
			t.Fatal("accepted a policy without selectors")
		}
		for _, s := range p.Protect {
			if strings.TrimSpace(s) != s || s == "" {
				t.Fatalf("selector %q not trimmed", s)
			}
		}
	})
}

func TestExpectedChanges(t *testing.T) {
	p, err := policy.Parse([]byte(`version = 1
[[expected]]
package = "certifi"
path = "certifi/cacert.pem"
reason = " corporate CA bundle "
[[expected]]
path = "**/*.pth"
reason = "site hooks"
`))
	require.NoError(t, err)
	assert.Empty(t, p.Protect)
	assert.Equal(t, []policy.Expected{
		{Package: "certifi", Path: "certifi/cacert.pem", Reason: "corporate CA bundle"},
		{Path: "**/*.pth", Reason: "site hooks"},
	}, p.Expected)

	for body, want := range map[string]string{
		"version = 1\n[[expected]]\npath = \"a\"":                               "policy expected[0] must have a non-empty reason",
		"version = 1\n[[expected]]\nreason = \"r\"":                             "policy expected[0] must have a non-empty path",
		"version = 1\n[[expected]]\npath = \"a\"\nreason = \"r\"\nx = 1":        "policy expected[0] has unsupported key 'x'",
		"version = 1\nexpected = []":                                            "policy expected must be a non-empty array of tables",
		"version = 1\nexpected = [\"a\"]":                                       "policy expected[0] must be a table with path and reason",
		"version = 1\nprotect = []\n[[expected]]\npath = \"a\"\nreason = \"r\"": "policy protect must be a non-empty array of selectors",
	} {
		_, err := policy.Parse([]byte(body))
		require.ErrorIs(t, err, policy.ErrPolicy, body)
		assert.EqualError(t, err, want, body)
	}
}
