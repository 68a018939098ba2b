package gittest

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Env is the environment the helpers run git with.
func Env() []string {
	return append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=RuntimeTruth Test",
		"GIT_AUTHOR_EMAIL=test@example.invalid",
		"GIT_COMMITTER_NAME=RuntimeTruth Test",
		"GIT_COMMITTER_EMAIL=test@example.invalid",
		"LC_ALL=C",
	)
}

// Git runs git -C dir args... and returns its trimmed stdout, failing the
// test on error.
func Git(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-c", "commit.gpgsign=false", "-C", dir}, args...)...)
	cmd.Env = Env()
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) {
			stderr = string(exitErr.Stderr)
		}
		tb.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// Init creates an empty repository on branch main in a new temporary
// directory and returns its path with symlinks resolved (as git reports
// it).
func Init(tb testing.TB) string {
	tb.Helper()
	dir, err := filepath.EvalSymlinks(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	Git(tb, dir, "init", "--quiet", "--initial-branch=main")
	return dir
}

// New creates a repository on branch main with one commit of README.md and
// returns its path.
func New(tb testing.TB) string {
	tb.Helper()
	dir := Init(tb)
	WriteFile(tb, dir, "README.md", "hello\n")
	Commit(tb, dir, "initial")
	return dir
}

// WriteFile writes content to dir/name, creating parent directories.
func WriteFile(tb testing.TB, dir, name, content string) {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// Commit stages everything and commits it, returning the new HEAD.
func Commit(tb testing.TB, dir, message string) string {
	tb.Helper()
	Git(tb, dir, "add", "--all")
	Git(tb, dir, "commit", "--quiet", "--allow-empty", "-m", message)
	return Git(tb, dir, "rev-parse", "HEAD")
}

// GiveToAnotherUser hands every file under dir to another user (uid and
// gid 65534) until the test ends, when root gets them back, so that git
// run by the test's user sees a repository it does not own. It needs root
// and skips the test otherwise. It unsets SUDO_UID for the test, through
// which git would trust the repositories of the user who ran sudo.
func GiveToAnotherUser(tb testing.TB, dir string) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root to give the repository to another user")
	}
	tb.Setenv("SUDO_UID", "") // restored when the test ends
	if err := os.Unsetenv("SUDO_UID"); err != nil {
		tb.Fatal(err)
	}
	if err := chownAll(dir, 65534); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := chownAll(dir, 0); err != nil {
			tb.Errorf("give %s back to root: %v", dir, err)
		}
	})
}

// chownAll gives dir and everything under it to uid (and the group of
// the same number), links themselves rather than their targets.
func chownAll(dir string, uid int) error {
	return filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
}
