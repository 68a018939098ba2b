package inspect_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector/inspect"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/gittest"
	"github.com/runtimetruth/runtimetruth/services/collector/internal/proctest"
	"github.com/runtimetruth/runtimetruth/services/collector/source/git"
	"github.com/runtimetruth/runtimetruth/services/collector/source/process"
	"github.com/runtimetruth/runtimetruth/services/collector/source/systemd"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func kinds(s *snapshot.Snapshot) []string {
	out := make([]string, len(s.Evidence))
	for i, r := range s.Evidence {
		out[i] = r.Kind
	}
	return out
}

// checkSnapshot asserts what every inspection result must satisfy: it
// marshals, and with SeedOnly it holds no extension kind.
func checkSnapshot(t *testing.T, s *snapshot.Snapshot, seedOnly bool) {
	t.Helper()
	_, err := s.Marshal(false)
	require.NoError(t, err)
	for _, r := range s.Evidence {
		k, ok := snapshot.LookupKind(r.Kind)
		require.True(t, ok, "known kind %s", r.Kind)
		if seedOnly {
			assert.False(t, k.Extension, "SeedOnly emits no %s", r.Kind)
		}
	}
}

// startSleep starts `sleep 30` in dir and kills it at cleanup.
func startSleep(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	return proctest.Start(t, dir, "sleep", "30")
}

func repoWithRemote(t *testing.T) string {
	t.Helper()
	dir := gittest.New(t)
	gittest.Git(t, dir, "remote", "add", "origin", "https://deploy:SECRET@example.com/agent.git")
	return dir
}

func TestGit(t *testing.T) {
	dir := repoWithRemote(t)
	gittest.WriteFile(t, dir, "sub/file.txt", "x\n")
	tests := []struct {
		name      string
		opts      inspect.Options
		wantKinds []string
	}{
		{name: "all evidence", wantKinds: []string{"git.repository", "git.remotes"}},
		{name: "seed only", opts: inspect.Options{SeedOnly: true}, wantKinds: []string{"git.repository"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := inspect.Git(context.Background(), filepath.Join(dir, "sub"), tc.opts)
			require.NoError(t, err)
			assert.Equal(t, snapshot.Target{Kind: "git.repository", Identifier: dir}, s.Target)
			assert.Equal(t, tc.wantKinds, kinds(s))
			assert.Equal(t, snapshot.Bool(true), s.Evidence[0].Data["dirty"])
			checkSnapshot(t, s, tc.opts.SeedOnly)
		})
	}
}

func TestGitNotRepository(t *testing.T) {
	_, err := inspect.Git(context.Background(), t.TempDir(), inspect.Options{})
	require.ErrorIs(t, err, git.ErrNotRepository)
}

func TestProcess(t *testing.T) {
	repo := repoWithRemote(t)
	gittest.WriteFile(t, repo, "srv/app.txt", "app\n")
	head := gittest.Commit(t, repo, "app")
	plain, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)

	tests := []struct {
		name      string
		cwd       string
		opts      inspect.Options
		wantKinds []string
	}{
		{
			name:      "cwd in a repository",
			cwd:       filepath.Join(repo, "srv"),
			wantKinds: []string{"linux.process", "linux.process_identity", "git.repository", "git.remotes"},
		},
		{
			name:      "cwd in a repository, seed only",
			cwd:       filepath.Join(repo, "srv"),
			opts:      inspect.Options{SeedOnly: true},
			wantKinds: []string{"linux.process", "git.repository"},
		},
		{
			name:      "cwd outside any repository",
			cwd:       plain,
			wantKinds: []string{"linux.process", "linux.process_identity"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := startSleep(t, tc.cwd)
			s, err := inspect.Process(context.Background(), cmd.Process.Pid, tc.opts)
			require.NoError(t, err)
			assert.Equal(t, snapshot.Target{Kind: "linux.process", Identifier: proctest.SleepPath(t)}, s.Target)
			assert.Equal(t, tc.wantKinds, kinds(s))
			assert.Equal(t, snapshot.Int(int64(cmd.Process.Pid)), s.Evidence[0].Data["pid"])
			if r, ok := s.Record("git.repository"); ok {
				assert.Equal(t, snapshot.String(repo), r.Data["repository_root"])
				assert.Equal(t, snapshot.String(head), r.Data["head_commit"])
			}
			checkSnapshot(t, s, tc.opts.SeedOnly)
		})
	}
}

func TestProcessWithDeletedCwdAndExecutable(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	work := filepath.Join(dir, "work")
	require.NoError(t, os.Mkdir(work, 0o755))
	bin := filepath.Join(dir, "agent")
	image, err := os.ReadFile(proctest.SleepPath(t))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, image, 0o755))
	cmd := proctest.Start(t, work, bin, "30")
	require.NoError(t, os.Remove(bin))
	require.NoError(t, os.Remove(work))

	s, err := inspect.Process(context.Background(), cmd.Process.Pid, inspect.Options{})
	require.NoError(t, err)
	assert.Equal(t, snapshot.Target{Kind: "linux.process", Identifier: bin}, s.Target)
	assert.Equal(t, []string{"linux.process", "linux.process_identity"}, kinds(s))
	assert.Equal(t, snapshot.String(work+" (deleted)"), s.Evidence[0].Data["cwd"])
}

func TestProcessDisappeared(t *testing.T) {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	_, err := inspect.Process(context.Background(), cmd.Process.Pid, inspect.Options{})
	require.ErrorIs(t, err, process.ErrDisappeared)
	assert.Contains(t, err.Error(), "disappeared")
}

// fakeSystemd returns a systemd collector whose systemctl prints show and
// whose "systemd is running" directory exists.
func fakeSystemd(t *testing.T, show string) systemd.Collector {
	t.Helper()
	dir := t.TempDir()
	out := filepath.Join(dir, "show")
	require.NoError(t, os.WriteFile(out, []byte(show), 0o644))
	bin := filepath.Join(dir, "systemctl")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexec cat '"+out+"'\n"), 0o755))
	run := filepath.Join(dir, "run")
	require.NoError(t, os.Mkdir(run, 0o755))
	return systemd.Collector{Systemctl: bin, RunDir: run}
}

func unitShow(mainPID int, workdir string) string {
	pid := strconv.Itoa(mainPID)
	return "MainPID=" + pid + "\nExecMainStartTimestampMonotonic=18023411\nExecMainPID=" + pid +
		"\nExecMainCode=0\nExecMainStatus=0\nNRestarts=0\nControlGroup=/system.slice/agent-worker.service\n" +
		"Environment=OPENAI_API_KEY=sk-DO-NOT-CAPTURE\nExecStart={ path=/usr/bin/sleep ; argv[]=/usr/bin/sleep 30 }\n" +
		"WorkingDirectory=" + workdir + "\nUser=agent\nGroup=agent\nDynamicUser=no\nId=agent-worker.service\n" +
		"LoadState=loaded\nActiveState=active\nSubState=running\nFragmentPath=/etc/systemd/system/agent-worker.service\n" +
		"DropInPaths=\nUnitFileState=enabled\n"
}

func TestSystemd(t *testing.T) {
	repo := repoWithRemote(t)
	plain, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)

	tests := []struct {
		name      string
		cwd       string // empty: MainPID=0
		seedOnly  bool
		wantKinds []string
	}{
		{
			name:      "composes process and git evidence",
			cwd:       repo,
			wantKinds: []string{"systemd.unit", "linux.process", "linux.process_identity", "git.repository", "git.remotes"},
		},
		{
			name:      "seed only is RuntimeTruth's composition",
			cwd:       repo,
			seedOnly:  true,
			wantKinds: []string{"systemd.unit", "linux.process", "git.repository"},
		},
		{
			name:      "non-git process stays valid",
			cwd:       plain,
			wantKinds: []string{"systemd.unit", "linux.process", "linux.process_identity"},
		},
		{
			name:      "non-git process, seed only",
			cwd:       plain,
			seedOnly:  true,
			wantKinds: []string{"systemd.unit", "linux.process"},
		},
		{
			name:      "unit without main process",
			wantKinds: []string{"systemd.unit"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pid := 0
			if tc.cwd != "" {
				pid = startSleep(t, tc.cwd).Process.Pid
			}
			opts := inspect.Options{SeedOnly: tc.seedOnly, Systemd: fakeSystemd(t, unitShow(pid, tc.cwd))}

			s, err := inspect.Systemd(context.Background(), "agent-worker", opts)
			require.NoError(t, err)
			assert.Equal(t, snapshot.Target{Kind: "systemd.unit", Identifier: "agent-worker.service"}, s.Target, "identifier is the resolved Id")
			assert.Equal(t, tc.wantKinds, kinds(s))
			assert.Equal(t, snapshot.Int(int64(pid)), s.Evidence[0].Data["main_pid"])
			if pid != 0 {
				assert.Equal(t, snapshot.Int(int64(pid)), s.Evidence[1].Data["pid"])
				assert.Equal(t, snapshot.String(tc.cwd), s.Evidence[1].Data["cwd"])
			}
			for _, r := range s.Evidence {
				for k, v := range r.Data {
					assert.NotContains(t, v.String(), "DO-NOT-CAPTURE", k)
					assert.NotContains(t, v.String(), "SECRET", k)
				}
			}
			checkSnapshot(t, s, tc.seedOnly)
		})
	}
}

func TestSystemdMainProcessDisappeared(t *testing.T) {
	cmd := exec.Command("true")
	require.NoError(t, cmd.Run())
	opts := inspect.Options{Systemd: fakeSystemd(t, unitShow(cmd.Process.Pid, "/"))}
	_, err := inspect.Systemd(context.Background(), "agent-worker.service", opts)
	require.ErrorIs(t, err, process.ErrDisappeared)
	assert.Contains(t, err.Error(), "inspect systemd unit agent-worker.service: main process: collect process")
}

func TestSystemdNotRunning(t *testing.T) {
	opts := inspect.Options{Systemd: systemd.Collector{RunDir: filepath.Join(t.TempDir(), "missing")}}
	_, err := inspect.Systemd(context.Background(), "agent.service", opts)
	require.ErrorIs(t, err, systemd.ErrSystemdUnavailable)
	assert.Contains(t, err.Error(), "cannot inspect unit agent.service")
}

func TestProcessInRepositoryOwnedByAnotherUserFails(t *testing.T) {
	repo := gittest.New(t)
	gittest.GiveToAnotherUser(t, repo)
	cmd := startSleep(t, repo)

	_, err := inspect.Process(context.Background(), cmd.Process.Pid, inspect.Options{})
	require.ErrorIs(t, err, git.ErrDubiousOwnership, "not skipped as if it were no repository")
}
