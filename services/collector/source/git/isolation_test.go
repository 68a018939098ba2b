package git_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/gittest"
	"github.com/runtimetruth/runtimetruth/services/collector/source/git"
)

// hookNames are every hook git knows (githooks(5)).
var hookNames = []string{
	"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit",
	"pre-merge-commit", "prepare-commit-msg", "commit-msg", "post-commit",
	"pre-rebase", "post-checkout", "post-merge", "pre-push", "pre-receive",
	"update", "proc-receive", "post-receive", "post-update",
	"reference-transaction", "push-to-checkout", "pre-auto-gc",
	"post-rewrite", "sendemail-validate", "fsmonitor-watchman",
	"p4-changelist", "p4-prepare-changelist", "p4-post-changelist",
	"p4-pre-submit", "post-index-change",
}

// trap is a script that appends how it was called to a marker file and
// then copies stdin to stdout (so that, as a filter, it would leave
// content unchanged).
type trap struct {
	dir, script, marker string
}

func newTrap(t *testing.T) trap {
	t.Helper()
	dir := t.TempDir()
	tr := trap{dir: dir, script: filepath.Join(dir, "evil.sh"), marker: filepath.Join(dir, "ran")}
	body := "#!/bin/sh\necho \"$(basename \"$0\") $*\" >> '" + tr.marker + "'\nexec cat\n"
	require.NoError(t, os.WriteFile(tr.script, []byte(body), 0o755))
	return tr
}

// as is the script under name (a link), so the marker tells which
// setting ran it.
func (tr trap) as(t *testing.T, name string) string {
	t.Helper()
	link := filepath.Join(tr.dir, name)
	if _, err := os.Lstat(link); err == nil {
		return link
	}
	require.NoError(t, os.Symlink(tr.script, link))
	return link
}

// assertNotRun fails when the script ran, showing how.
func (tr trap) assertNotRun(t *testing.T) {
	t.Helper()
	ran, err := os.ReadFile(tr.marker)
	if err == nil {
		t.Errorf("the repository's configuration ran a program:\n%s", ran)
		return
	}
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// collect collects dir and returns its records, failing the test when
// the script ran (checked first, so that a collection that ran it and
// then failed still says so) or the collection failed.
func (tr trap) collect(t *testing.T, dir string) []snapshot.Record {
	t.Helper()
	records, err := git.Collect(context.Background(), dir)
	tr.assertNotRun(t)
	require.NoError(t, err)
	return records
}

// keys are configuration entries naming the trap: every setting through
// which git runs a program.
func (tr trap) keys(t *testing.T, hooks string) [][2]string {
	t.Helper()
	s := func(key string) string { return tr.as(t, key) }
	return [][2]string{
		{"core.fsmonitor", s("core.fsmonitor")},
		{"core.fsmonitorHookVersion", "2"},
		{"filter.evil.clean", s("filter.evil.clean")},
		{"filter.evil.smudge", s("filter.evil.smudge")},
		{"filter.evil.required", "true"},
		{"filter.evilproc.process", s("filter.evilproc.process")},
		{"core.hooksPath", hooks},
		{"diff.external", s("diff.external")},
		{"diff.evil.command", s("diff.evil.command")},
		{"diff.evil.textconv", s("diff.evil.textconv")},
		{"core.pager", s("core.pager")},
		{"pager.status", s("pager.status")},
		{"pager.config", s("pager.config")},
		{"pager.symbolic-ref", s("pager.symbolic-ref")},
		{"status.submoduleSummary", "true"},
		{"core.sshCommand", s("core.sshCommand")},
		{"core.gitProxy", s("core.gitProxy")},
		{"core.askPass", s("core.askPass")},
		{"credential.helper", s("credential.helper")},
		{"core.alternateRefsCommand", s("core.alternateRefsCommand")},
		{"uploadpack.packObjectsHook", s("uploadpack.packObjectsHook")},
		{"protocol.ext.allow", "always"},
		{"remote.origin.url", "ext::" + s("remote.origin.url") + " %S"},
		{"remote.origin.uploadpack", s("remote.origin.uploadpack")},
		{"core.editor", s("core.editor")},
		{"sequence.editor", s("sequence.editor")},
		{"gpg.program", s("gpg.program")},
		{"alias.status", "!" + s("alias.status")},
		{"safe.directory", "*"},
	}
}

// config sets each key in dir's repository configuration to the trap,
// under the key's name.
func (tr trap) config(t *testing.T, dir string, keys ...string) {
	t.Helper()
	for _, key := range keys {
		gittest.Git(t, dir, "config", key, tr.as(t, key))
	}
}

// addKeys adds every entry of keys, core.hooksPath a new directory of
// trap hooks, to dir's repository configuration, or to the configuration
// that the git config options in where select (--file F).
func (tr trap) addKeys(t *testing.T, dir string, where ...string) {
	t.Helper()
	hooks := filepath.Join(t.TempDir(), "hooks")
	tr.hooksDir(t, hooks)
	config := append([]string{"config"}, where...)
	for _, kv := range tr.keys(t, hooks) {
		gittest.Git(t, dir, append(config, "--add", kv[0], kv[1])...)
	}
}

// hooksDir fills dir with every hook, each the trap.
func (tr trap) hooksDir(t *testing.T, dir string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, name := range hookNames {
		require.NoError(t, os.Symlink(tr.script, filepath.Join(dir, name)))
	}
}

// assertHeadAndDirty checks the head commit and the dirty flag of the
// git.repository record r.
func assertHeadAndDirty(t *testing.T, r snapshot.Record, head string, dirty bool) {
	t.Helper()
	assert.Equal(t, snapshot.String(head), r.Data["head_commit"])
	assert.Equal(t, snapshot.Bool(dirty), r.Data["dirty"])
}

// makeStatDirty gives the tracked files new modification times, so git
// cannot trust the index's stat data and reads their content (through the
// clean filter, if one applies).
func makeStatDirty(t *testing.T, dir string, names ...string) {
	t.Helper()
	later := time.Now().Add(time.Hour)
	for _, name := range names {
		require.NoError(t, os.Chtimes(filepath.Join(dir, name), later, later))
	}
}

// TestCollectRunsNothingTheRepositoryNames arms a repository with a
// program in every configuration key git runs programs from, in its
// .git/config, in a file it includes and through attributes, and checks
// that collecting it, clean, dirty and detached, runs none of them and
// still reports its state.
func TestCollectRunsNothingTheRepositoryNames(t *testing.T) {
	attacks := []struct {
		name string
		arm  func(t *testing.T, dir string, tr trap)
	}{
		{"core.fsmonitor", func(t *testing.T, dir string, tr trap) {
			tr.config(t, dir, "core.fsmonitor")
		}},
		{"clean and smudge filter", func(t *testing.T, dir string, tr trap) {
			tr.config(t, dir, "filter.evil.clean", "filter.evil.smudge")
			gittest.Git(t, dir, "config", "filter.evil.required", "true")
		}},
		{"process filter", func(t *testing.T, dir string, tr trap) {
			tr.config(t, dir, "filter.evilproc.process")
		}},
		{"filter named in info/attributes", func(t *testing.T, dir string, tr trap) {
			gittest.WriteFile(t, dir, ".git/info/attributes", "* filter=hidden\n")
			tr.config(t, dir, "filter.hidden.clean")
		}},
		{"core.hooksPath and .git/hooks", func(t *testing.T, dir string, tr trap) {
			hooks := filepath.Join(t.TempDir(), "hooks")
			tr.hooksDir(t, hooks)
			require.NoError(t, os.RemoveAll(filepath.Join(dir, ".git", "hooks")))
			tr.hooksDir(t, filepath.Join(dir, ".git", "hooks"))
			gittest.Git(t, dir, "config", "core.hooksPath", hooks)
		}},
		{"external diff and textconv", func(t *testing.T, dir string, tr trap) {
			tr.config(t, dir, "diff.external", "diff.evil.command", "diff.evil.textconv")
		}},
		{"pager", func(t *testing.T, dir string, tr trap) {
			tr.config(t, dir, "core.pager", "pager.status", "pager.config", "pager.symbolic-ref")
		}},
		{"every key in .git/config", func(t *testing.T, dir string, tr trap) {
			tr.addKeys(t, dir)
		}},
		{"every key through include.path", func(t *testing.T, dir string, tr trap) {
			inc := filepath.Join(t.TempDir(), "included.gitconfig")
			tr.addKeys(t, dir, "--file", inc)
			gittest.Git(t, dir, "config", "include.path", inc)
		}},
		{"every key through includeIf", func(t *testing.T, dir string, tr trap) {
			inc := filepath.Join(t.TempDir(), "conditional.gitconfig")
			tr.addKeys(t, dir, "--file", inc)
			gittest.Git(t, dir, "config", "includeIf.gitdir:"+filepath.Join(dir, ".git")+".path", inc)
		}},
	}
	states := []struct {
		name     string
		set      func(t *testing.T, dir string)
		branch   snapshot.Value
		detached bool
		dirty    bool
	}{
		{"clean", func(*testing.T, string) {}, snapshot.String("main"), false, false},
		{"dirty", func(t *testing.T, dir string) {
			gittest.WriteFile(t, dir, "untracked.txt", "new\n")
			gittest.WriteFile(t, dir, "README.md", "changed\n")
		}, snapshot.String("main"), false, true},
		{"untracked only", func(t *testing.T, dir string) {
			gittest.WriteFile(t, dir, "untracked.txt", "new\n")
		}, snapshot.String("main"), false, true},
		{"modified only", func(t *testing.T, dir string) {
			gittest.WriteFile(t, dir, "README.md", "changed\n")
		}, snapshot.String("main"), false, true},
		{"detached", func(t *testing.T, dir string) {
			gittest.Git(t, dir, "checkout", "--quiet", "--detach")
		}, snapshot.Null(), true, false},
		{"detached and dirty", func(t *testing.T, dir string) {
			gittest.Git(t, dir, "checkout", "--quiet", "--detach")
			gittest.WriteFile(t, dir, "untracked.txt", "new\n")
		}, snapshot.Null(), true, true},
	}
	for _, a := range attacks {
		for _, st := range states {
			t.Run(a.name+"/"+st.name, func(t *testing.T) {
				t.Parallel()
				dir := gittest.New(t)
				gittest.WriteFile(t, dir, ".gitattributes", "* filter=evil diff=evil\n*.txt filter=evilproc\n")
				gittest.WriteFile(t, dir, "notes.txt", "notes\n")
				gittest.Commit(t, dir, "attributes")
				st.set(t, dir)
				head := gittest.Git(t, dir, "rev-parse", "HEAD")

				tr := newTrap(t)
				a.arm(t, dir, tr) // last: git run by the helpers would trip it
				makeStatDirty(t, dir, ".gitattributes", "notes.txt")
				if !st.dirty {
					makeStatDirty(t, dir, "README.md")
				}

				records := tr.collect(t, dir)
				assert.Equal(t, snapshot.Data{
					"repository_root": snapshot.String(dir),
					"head_commit":     snapshot.String(head),
					"branch":          st.branch,
					"detached":        snapshot.Bool(st.detached),
					"dirty":           snapshot.Bool(st.dirty),
				}, repoRecord(t, records).Data)
			})
		}
	}
}

// TestCollectDoesNotFetchForAPartialClone: in a partial clone, a status
// that needs a missing object fetches it from the promisor remote, which
// runs core.sshCommand for an ssh URL.
func TestCollectDoesNotFetchForAPartialClone(t *testing.T) {
	src := gittest.New(t)
	gittest.WriteFile(t, src, "a.txt", "some content, long enough to be compared for rename detection\n")
	gittest.Commit(t, src, "a")
	gittest.Git(t, src, "config", "uploadpack.allowFilter", "true")
	dir := filepath.Join(t.TempDir(), "clone")
	gittest.Git(t, src, "clone", "--quiet", "--no-checkout", "--filter=blob:none", "file://"+src, dir)
	gittest.Git(t, dir, "read-tree", "HEAD") // an index, blobs still missing
	gittest.Git(t, dir, "rm", "--quiet", "--cached", "a.txt")
	gittest.WriteFile(t, dir, "b.txt", "some content, long enough to be compared for rename detection!\n")
	gittest.Git(t, dir, "add", "b.txt")
	head := gittest.Git(t, dir, "rev-parse", "HEAD")

	tr := newTrap(t)
	gittest.Git(t, dir, "config", "remote.origin.url", "ssh://git.invalid/repo.git")
	tr.config(t, dir, "core.sshCommand")

	assertHeadAndDirty(t, repoRecord(t, tr.collect(t, dir)), head, true)
}

// TestCollectDoesNotRunSubmoduleConfiguration: to tell whether a
// submodule has changes, git status runs git inside it, under the
// submodule's own configuration.
func TestCollectDoesNotRunSubmoduleConfiguration(t *testing.T) {
	sub := gittest.New(t)
	dir := gittest.New(t)
	gittest.Git(t, dir, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", sub, "sub")
	gittest.Commit(t, dir, "submodule")
	head := gittest.Git(t, dir, "rev-parse", "HEAD")

	tr := newTrap(t)
	modules := filepath.Join(dir, ".git", "modules", "sub")
	gittest.WriteFile(t, modules, "info/attributes", "* filter=evil\n")
	tr.config(t, filepath.Join(dir, "sub"), "filter.evil.clean", "core.fsmonitor")
	makeStatDirty(t, filepath.Join(dir, "sub"), "README.md")

	assertHeadAndDirty(t, repoRecord(t, tr.collect(t, dir)), head, false)

	// A submodule checked out at another commit is a change.
	subDir := filepath.Join(dir, "sub")
	gittest.Git(t, subDir, "config", "--unset", "filter.evil.clean")
	gittest.WriteFile(t, subDir, "more.txt", "more\n")
	gittest.Commit(t, subDir, "more")
	tr = newTrap(t)
	tr.config(t, subDir, "filter.evil.clean")
	makeStatDirty(t, subDir, "README.md", "more.txt")
	assert.Equal(t, snapshot.Bool(true), repoRecord(t, tr.collect(t, dir)).Data["dirty"])
}

// TestCollectKeepsStatusSettings: the repository settings that change
// what status reports still apply, though status runs without the
// repository's configuration.
func TestCollectKeepsStatusSettings(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		dirty bool
	}{
		{
			name: "info/exclude ignores",
			setup: func(t *testing.T, dir string) {
				gittest.WriteFile(t, dir, ".git/info/exclude", "*.log\n")
				gittest.WriteFile(t, dir, "debug.log", "noise\n")
			},
		},
		{
			name: "core.excludesFile ignores",
			setup: func(t *testing.T, dir string) {
				ignore := filepath.Join(t.TempDir(), "ignore")
				require.NoError(t, os.WriteFile(ignore, []byte("*.tmp\n"), 0o644))
				gittest.Git(t, dir, "config", "core.excludesFile", ignore)
				gittest.WriteFile(t, dir, "scratch.tmp", "x\n")
			},
		},
		{
			name: "core.fileMode false ignores the executable bit",
			setup: func(t *testing.T, dir string) {
				gittest.Git(t, dir, "config", "core.fileMode", "false")
				require.NoError(t, os.Chmod(filepath.Join(dir, "README.md"), 0o755))
			},
		},
		{
			name: "core.fileMode true sees the executable bit",
			setup: func(t *testing.T, dir string) {
				require.NoError(t, os.Chmod(filepath.Join(dir, "README.md"), 0o755))
			},
			dirty: true,
		},
		{
			name: "core.autocrlf normalises CRLF",
			setup: func(t *testing.T, dir string) {
				gittest.Git(t, dir, "config", "core.autocrlf", "true")
				gittest.WriteFile(t, dir, "README.md", "hello\r\n") // the committed blob, normalised
				gittest.Git(t, dir, "add", "README.md")
				makeStatDirty(t, dir, "README.md")
			},
		},
		{
			name: "info/attributes -text keeps CRLF a change",
			setup: func(t *testing.T, dir string) {
				gittest.Git(t, dir, "config", "core.autocrlf", "true")
				gittest.WriteFile(t, dir, "README.md", "hello\r\n")
				gittest.Git(t, dir, "add", "README.md")
				gittest.WriteFile(t, dir, ".git/info/attributes", "*.md -text\n")
				makeStatDirty(t, dir, "README.md")
			},
			dirty: true,
		},
		{
			name: "staged change",
			setup: func(t *testing.T, dir string) {
				gittest.WriteFile(t, dir, "README.md", "staged\n")
				gittest.Git(t, dir, "add", "README.md")
			},
			dirty: true,
		},
		{
			name: "deleted file",
			setup: func(t *testing.T, dir string) {
				require.NoError(t, os.Remove(filepath.Join(dir, "README.md")))
			},
			dirty: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := gittest.New(t)
			tc.setup(t, dir)
			assert.Equal(t, snapshot.Bool(tc.dirty), collectRepository(t, dir).Data["dirty"])
			assert.Equal(t, tc.dirty, gittest.Git(t, dir, "status", "--porcelain") != "", "plain git status agrees")
		})
	}
}

func TestCollectSHA256Repository(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	gittest.Git(t, dir, "init", "--quiet", "--initial-branch=main", "--object-format=sha256")
	gittest.WriteFile(t, dir, "README.md", "hello\n")
	head := gittest.Commit(t, dir, "initial")
	require.Len(t, head, 64)

	assertHeadAndDirty(t, collectRepository(t, dir), head, false)

	gittest.WriteFile(t, dir, "README.md", "changed\n")
	assert.Equal(t, snapshot.Bool(true), collectRepository(t, dir).Data["dirty"])
}

func TestCollectLinkedWorktree(t *testing.T) {
	dir := gittest.New(t)
	gittest.WriteFile(t, dir, ".git/info/exclude", "*.log\n")
	wt := filepath.Join(t.TempDir(), "wt")
	gittest.Git(t, dir, "worktree", "add", "--quiet", "-b", "side", wt)
	wt, err := filepath.EvalSymlinks(wt)
	require.NoError(t, err)
	gittest.WriteFile(t, wt, "debug.log", "ignored through the common info/exclude\n")
	head := gittest.Git(t, wt, "rev-parse", "HEAD")

	assert.Equal(t, snapshot.Data{
		"repository_root": snapshot.String(wt),
		"head_commit":     snapshot.String(head),
		"branch":          snapshot.String("side"),
		"detached":        snapshot.Bool(false),
		"dirty":           snapshot.Bool(false),
	}, collectRepository(t, wt).Data)

	gittest.WriteFile(t, wt, "README.md", "changed in the worktree\n")
	assert.Equal(t, snapshot.Bool(true), collectRepository(t, wt).Data["dirty"])
}

// TestCollectWritesNothingIntoTheRepository compares every file of .git
// and the work tree before and after collecting a stat-dirty checkout.
func TestCollectWritesNothingIntoTheRepository(t *testing.T) {
	dir := gittest.New(t)
	gittest.WriteFile(t, dir, "untracked.txt", "new\n")
	makeStatDirty(t, dir, "README.md")
	before := tree(t, dir)

	_, err := git.Collect(context.Background(), dir)
	require.NoError(t, err)
	assert.Equal(t, before, tree(t, dir))
}

// tree lists every path under dir with its size, mode and modification
// time.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, strings.Join([]string{rel, fi.Mode().String(), fi.ModTime().String(), strconv.FormatInt(fi.Size(), 10)}, " "))
		return nil
	}))
	return out
}

// TestCollectTrustsOnlyTheOperator: for a repository owned by another
// user, the operator's safe.directory (global configuration) is honoured
// and the repository's own is not; either way nothing it names runs.
func TestCollectTrustsOnlyTheOperator(t *testing.T) {
	dir := gittest.New(t)
	gittest.WriteFile(t, dir, ".gitattributes", "* filter=evil\n")
	gittest.Commit(t, dir, "attributes")
	head := gittest.Git(t, dir, "rev-parse", "HEAD")
	tr := newTrap(t)
	tr.config(t, dir, "filter.evil.clean", "core.fsmonitor")
	gittest.Git(t, dir, "config", "safe.directory", "*")
	gittest.Git(t, dir, "remote", "add", "origin", "https://tok@example.com/x.git")
	makeStatDirty(t, dir, "README.md", ".gitattributes")
	gittest.GiveToAnotherUser(t, dir)

	global := filepath.Join(t.TempDir(), "gitconfig")
	require.NoError(t, os.WriteFile(global, nil, 0o644))
	t.Setenv("GIT_CONFIG_GLOBAL", global)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")

	_, err := git.Collect(context.Background(), dir)
	require.ErrorIs(t, err, git.ErrDubiousOwnership, "the repository's own safe.directory does not count")
	tr.assertNotRun(t)

	require.NoError(t, os.WriteFile(global, []byte("[safe]\n\tdirectory = "+dir+"\n"), 0o644))
	records := tr.collect(t, dir)
	assertHeadAndDirty(t, repoRecord(t, records), head, false)
	assert.Equal(t, snapshot.Data{
		"remote_count":  snapshot.Int(1),
		"remote:origin": snapshot.String("https://example.com/x.git"),
	}, records[1].Data)

	// A reset (empty entry) after the path withdraws the trust.
	require.NoError(t, os.WriteFile(global, []byte("[safe]\n\tdirectory = "+dir+"\n\tdirectory =\n"), 0o644))
	_, err = git.Collect(context.Background(), dir)
	require.ErrorIs(t, err, git.ErrDubiousOwnership)
	tr.assertNotRun(t)
}
