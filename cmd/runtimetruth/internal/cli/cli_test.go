package cli_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/report"
	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

var update = flag.Bool("update", false, "rewrite golden files")

type result struct {
	code   int
	stdout string
	stderr string
}

func run(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, "test", args)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// fixture returns the path of a shared snapshot fixture of pkg/evidence.
func fixture(name string) string {
	return filepath.Join("..", "..", "..", "..", "pkg", "evidence", "testdata", "snapshots", name)
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run with -update to create %s", path)
	assert.Equal(t, string(want), got, "differs from %s (run with -update if intended)", path)
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

var reportSchema = func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(report.Schema))
	if err != nil {
		panic(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("report.schema.json", doc); err != nil {
		panic(err)
	}
	return c.MustCompile("report.schema.json")
}()

func assertValidReport(t *testing.T, out string) {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	require.NoError(t, err)
	require.NoError(t, reportSchema.Validate(v))
}

func TestDigest(t *testing.T) {
	r := run(t, "digest", fixture("before.json"))
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "sha256:63dfa8b0dca4c0f81d0050c8bd068d2b66405310569435209c2693185483c7a6\n", r.stdout)
	r = run(t, "digest", fixture("before-reordered.json"))
	assert.Equal(t, "sha256:63dfa8b0dca4c0f81d0050c8bd068d2b66405310569435209c2693185483c7a6\n", r.stdout)
}

func TestDiffRendersSemanticChanges(t *testing.T) {
	r := run(t, "diff", fixture("before.json"), fixture("after.json"))
	require.Equal(t, 0, r.code, r.stderr)
	golden(t, "diff.golden", r.stdout)
	r = run(t, "diff", fixture("before.json"), fixture("before-reordered.json"))
	assert.Equal(t, "No runtime changes.\n", r.stdout)
	r = run(t, "diff", "--json", fixture("before.json"), fixture("after.json"))
	require.Equal(t, 0, r.code, r.stderr)
	assertValidReport(t, r.stdout)
}

func TestVerifyPassReturnsZero(t *testing.T) {
	r := run(t, "verify", fixture("before.json"), fixture("before-reordered.json"))
	assert.Equal(t, 0, r.code)
	assert.Equal(t, "PASS: runtime matches baseline.\n", r.stdout)
	assert.Empty(t, r.stderr)
}

func TestVerifyDriftReturnsTwoAndRendersDiff(t *testing.T) {
	r := run(t, "verify", fixture("before.json"), fixture("after.json"))
	assert.Equal(t, 2, r.code)
	golden(t, "verify-drift.golden", r.stdout)
	assert.True(t, strings.HasPrefix(r.stdout, "DRIFT: runtime differs from baseline.\n\nSERVICE\n"))
}

func TestVerifyJSONKeepsExitCode(t *testing.T) {
	r := run(t, "verify", "--json", fixture("before.json"), fixture("after.json"))
	assert.Equal(t, 2, r.code)
	assertValidReport(t, r.stdout)
	golden(t, "verify-drift.golden.json", r.stdout)
	r = run(t, "verify", "--json", fixture("before.json"), fixture("before.json"))
	assert.Equal(t, 0, r.code)
	assertValidReport(t, r.stdout)
	assert.Contains(t, r.stdout, `"status":"pass"`)
}

func TestVerifyProtect(t *testing.T) {
	r := run(t, "verify", fixture("before.json"), fixture("after.json"), "--protect", "git.repository.branch")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "PASS: runtime matches baseline.\n", r.stdout)

	r = run(t, "verify", fixture("before.json"), fixture("after.json"), "--protect", "git.repository.head_commit")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stdout, "head_commit:")
	assert.NotContains(t, r.stdout, "dirty:")
	assert.NotContains(t, r.stdout, "SERVICE")
}

func TestVerifyPolicy(t *testing.T) {
	dir := t.TempDir()
	ignore := writeFile(t, dir, "branch.toml", "version = 1\nprotect = [\"git.repository.branch\"]\n")
	selected := writeFile(t, dir, "head.toml", "version = 1\nprotect = [\"git.repository.head_commit\", \"linux.process\"]\n")

	t.Run("ignores unprotected drift", func(t *testing.T) {
		r := run(t, "verify", fixture("before.json"), fixture("after.json"), "--policy", ignore)
		assert.Equal(t, 0, r.code, r.stderr)
	})
	t.Run("reports selected drift", func(t *testing.T) {
		r := run(t, "verify", fixture("before.json"), fixture("after.json"), "--policy", selected)
		assert.Equal(t, 2, r.code, r.stderr)
		assert.Contains(t, r.stdout, "head_commit:")
		assert.NotContains(t, r.stdout, "dirty:")
	})
	t.Run("policy and cli protect are additive", func(t *testing.T) {
		r := run(t, "verify", "--json", fixture("before.json"), fixture("after.json"), "--policy", selected,
			"--protect", "systemd.unit.restart_count", "--protect", "linux.process")
		assert.Equal(t, 2, r.code, r.stderr)
		assertValidReport(t, r.stdout)
		assert.Contains(t, r.stdout, `"protected":["git.repository.head_commit","linux.process","systemd.unit.restart_count"]`)
	})
}

func TestVerifyErrorsExitOne(t *testing.T) {
	dir := t.TempDir()
	junk := writeFile(t, dir, "junk.json", "\x00\x01\x02binary junk\xff")
	truncated := writeFile(t, dir, "truncated.json", `{"schema_version": 1, "captured_at": "2026-`)
	naive := writeFile(t, dir, "naive.json", strings.Replace(mustRead(t, fixture("before.json")), "03:09:40Z", "03:09:40", 1))
	other := writeFile(t, dir, "other.json", strings.ReplaceAll(mustRead(t, fixture("before.json")), "agent-worker.service", "other.service"))
	huge := filepath.Join(dir, "huge.json")
	require.NoError(t, os.WriteFile(huge, bytes.Repeat([]byte(" "), snapshot.MaxSize+1), 0o600))
	badPolicy := writeFile(t, dir, "bad.toml", "version = 1\nprotect = []\n")

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no arguments", []string{"verify"}, "usage: runtimetruth verify BASELINE [CURRENT]"},
		{"too many arguments", []string{"verify", "a", "b", "c"}, "usage:"},
		{"no current", []string{"verify", fixture("before.json")}, "verify requires a current snapshot or --codex"},
		{"current and live", []string{"verify", fixture("before.json"), fixture("after.json"), "--git", "."}, "verify accepts either a current snapshot or --git, not both"},
		{"two live sources", []string{"verify", fixture("before.json"), "--git", ".", "--codex", "."}, "verify accepts only one live source"},
		{"resolve flags without codex", []string{"verify", fixture("before.json"), fixture("after.json"), "--resolve-thread"}, "apply only with --codex"},
		{"unknown flag", []string{"verify", "--frobnicate", fixture("before.json")}, "unknown flag: --frobnicate"},
		{"missing baseline", []string{"verify", filepath.Join(dir, "nope.json"), fixture("after.json")}, "could not read baseline"},
		{"directory", []string{"verify", dir, fixture("after.json")}, "is a directory"},
		{"binary junk", []string{"verify", junk, fixture("after.json")}, "invalid snapshot"},
		{"truncated", []string{"verify", fixture("before.json"), truncated}, "unexpected end of JSON input"},
		{"naive timestamp", []string{"verify", naive, fixture("after.json")}, "must be timezone-aware"},
		{"huge", []string{"verify", huge, fixture("after.json")}, "file too large"},
		{"different targets", []string{"verify", fixture("before.json"), other}, "snapshot targets differ"},
		{"unknown selector", []string{"verify", fixture("before.json"), fixture("after.json"), "--protect", "codex"}, "unknown selector 'codex'"},
		{"unavailable kind", []string{"verify", fixture("before.json"), fixture("after.json"), "--protect", "codex.thread.model"}, "evidence kind 'codex.thread' is not in either snapshot"},
		{"field in neither", []string{"verify", fixture("before.json"), fixture("after.json"), "--protect", "git.repository.nope"}, "'git.repository.nope' does not match an evidence field"},
		{"invalid policy", []string{"verify", fixture("before.json"), fixture("after.json"), "--policy", badPolicy}, "policy protect must be a non-empty array of selectors"},
		{"missing policy", []string{"verify", fixture("before.json"), fixture("after.json"), "--policy", filepath.Join(dir, "x.toml")}, "could not read policy"},
		{"json error is not a report", []string{"verify", "--json", fixture("before.json"), other}, "snapshot targets differ"},
		{"diff usage", []string{"diff", fixture("before.json")}, "usage: runtimetruth diff BEFORE AFTER"},
		{"digest junk", []string{"digest", junk}, "invalid snapshot"},
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"bad pid", []string{"inspect", "process", "-3"}, "unknown shorthand flag"},
		{"pid word", []string{"inspect", "process", "self"}, "invalid process id 'self'"},
		{"bad unit", []string{"inspect", "systemd", "../../agent.service"}, "invalid unit name"},
		{"systemd not running", []string{"inspect", "systemd", "agent.service"}, "systemd is not running on this host"},
		{"not a repo", []string{"inspect", "git", dir}, "not a git repository"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, tc.args...)
			assert.Equal(t, 1, r.code, "stdout=%q stderr=%q", r.stdout, r.stderr)
			assert.Empty(t, r.stdout, "errors never produce a report")
			assert.True(t, strings.HasPrefix(r.stderr, "runtimetruth: error: "), r.stderr)
			assert.Contains(t, r.stderr, tc.want)
			assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
		})
	}
}

func TestGroupCommandsPrintHelp(t *testing.T) {
	for _, args := range [][]string{nil, {"inspect"}} {
		r := run(t, args...)
		assert.Equal(t, 0, r.code)
		assert.Contains(t, r.stdout, "Usage:")
	}
	r := run(t, "--version")
	assert.Equal(t, "runtimetruth test\n", r.stdout)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// gitRepo makes a real repository with one commit in a temp dir.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "one"},
		{"remote", "add", "origin", "https://deploy:ghp_SECRETTOKEN@example.com/org/repo.git"},
	} {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return dir
}

func TestGitWalkthrough(t *testing.T) {
	repo := gitRepo(t)
	baseline := filepath.Join(t.TempDir(), "baseline.json")

	r := run(t, "inspect", "git", repo, "--pretty")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "SECRETTOKEN")
	assert.NotContains(t, r.stdout, "deploy:")
	require.NoError(t, os.WriteFile(baseline, []byte(r.stdout), 0o600))
	s := parseSnapshot(t, []byte(r.stdout))
	assert.Equal(t, "git.repository", s.Target.Kind)

	r = run(t, "verify", baseline, "--git", repo)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "PASS: runtime matches baseline.\n", r.stdout)

	require.NoError(t, os.WriteFile(filepath.Join(repo, "notes.txt"), []byte("x"), 0o600))
	r = run(t, "verify", baseline, "--git", repo)
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Equal(t, "DRIFT: runtime differs from baseline.\n\nCODE\n  dirty: false -> true\n", r.stdout)

	cmd := exec.Command("git", "-C", repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "two")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	r = run(t, "verify", baseline, "--git", repo, "--protect", "git.repository.head_commit")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stdout, "head_commit: ")
	assert.NotContains(t, r.stdout, "dirty")

	r = run(t, "inspect", "git", repo, "--seed-only")
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "git.remotes")
}

func TestInspectProcessOfChild(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.Dir = gitRepo(t)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid

	r := run(t, "inspect", "process", strconv.Itoa(pid))
	require.Equal(t, 0, r.code, r.stderr)
	s := parseSnapshot(t, []byte(r.stdout))
	kinds := []string{}
	for _, rec := range s.Evidence {
		kinds = append(kinds, rec.Kind)
	}
	assert.Equal(t, []string{"linux.process", "linux.process_identity", "git.repository", "git.remotes"}, kinds)
	baseline := writeFile(t, t.TempDir(), "p.json", r.stdout)
	r = run(t, "verify", baseline, "--process", strconv.Itoa(pid))
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
}
