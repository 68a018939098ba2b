package collector_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/events/binding"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry/telemetrytest"
	"github.com/runtimetruth/runtimetruth/services/collector"
)

// integrityEvents splits the stored messages into evidence snapshots and
// runnable.modified payloads, decoding each strictly.
func integrityEvents(t *testing.T, msgs []streamMsg) (evs []events.EvidenceCollected, mods []events.RunnableModified) {
	t.Helper()
	for _, m := range msgs {
		switch m.Subject() {
		case events.IntegritySubject(testHost):
			_, p, err := binding.Read[events.RunnableModified](m)
			require.NoError(t, err)
			mods = append(mods, p)
		default:
			evs = append(evs, evidence(t, m))
		}
	}
	return evs, mods
}

// newVenv makes a real virtual environment with python3 -m venv in a
// new temporary directory and returns its path with symbolic links
// resolved; a missing python3 (or venv module) fails the test.
func newVenv(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	require.NoError(t, err, "python3 (with venv) is required")
	venv := filepath.Join(t.TempDir(), "venv")
	out, err := exec.Command(py, "-m", "venv", venv).CombinedOutput()
	require.NoError(t, err, string(out))
	venv, err = filepath.EvalSymlinks(venv)
	require.NoError(t, err)
	return venv
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestPythonTargetReportsEachChangeOnce checks a real venv: a modified
// file of pip yields one runnable.modified, not repeated by the next
// collections, and a further edit yields another.
func TestPythonTargetReportsEachChangeOnce(t *testing.T) {
	venv := newVenv(t)
	pipInit, err := filepath.Glob(filepath.Join(venv, "lib", "python*", "site-packages", "pip", "__init__.py"))
	require.NoError(t, err)
	require.Len(t, pipInit, 1)

	b := runBus(t, t.TempDir(), 0)
	target := collector.TargetConfig{Name: "venv", Kind: collector.KindPython, Env: venv,
		Options: collector.TargetOptions{Runnable: "pip"}, Interval: time.Hour}
	// Without a runnable, every distribution is checked.
	everything := collector.TargetConfig{Name: "everything", Kind: collector.KindPython, Env: venv, Interval: time.Hour}
	tel := telemetrytest.New(t)
	c, _ := newCollector(t, testConfig(t, b.url, target, everything), collector.Settings{Telemetry: tel.Providers})
	modified := collector.AttrType.String(events.TypeRunnableModified)
	require.NoError(t, c.Start(t.Context()))
	evs, mods := integrityEvents(t, b.waitStored(t, 2))
	require.Len(t, evs, 2)
	assert.Empty(t, mods, "an untouched venv")
	assert.Equal(t, events.Target{Kind: collector.TargetPythonEnvironment, Identifier: venv}, evs[0].Target)
	s, err := evs[0].ParseSnapshot()
	require.NoError(t, err)
	require.Len(t, s.Evidence, 1)
	assert.Equal(t, "python.distributions", s.Evidence[0].Kind)

	appendFile(t, pipInit[0], "# tampered\n")
	tampered, err := os.ReadFile(pipInit[0])
	require.NoError(t, err)
	require.NoError(t, c.CollectNow(t.Context(), "venv"))
	require.NoError(t, c.CollectNow(t.Context(), "venv")) // the same change: not reported again
	appendFile(t, pipInit[0], "# tampered again\n")
	require.NoError(t, c.CollectNow(t.Context(), "venv"))
	// Another target on the same venv keeps its own record of what it
	// reported, but its event has the same id: JetStream keeps one.
	require.NoError(t, c.CollectNow(t.Context(), "everything"))
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if dups, pending := tel.Sum(t, collector.MetricEventsDuplicates), spoolDepth(t, tel); dups != 1 || pending != 0 {
			return fmt.Errorf("%d duplicates, %d pending", dups, pending)
		}
		return nil
	})
	msgs := b.waitStored(t, 8)
	evs, mods = integrityEvents(t, msgs)
	assert.Len(t, evs, 6)
	require.Len(t, mods, 2)
	for i, m := range mods {
		assert.Equal(t, events.Python, m.Ecosystem)
		assert.Equal(t, "pip", m.Package)
		assert.Equal(t, venv, m.Environment)
		assert.Equal(t, "RECORD", m.Baseline)
		require.Len(t, m.ChangedFiles, 1)
		assert.Equal(t, events.FileModified, m.ChangedFiles[0].Change)
		assert.Contains(t, m.ChangedFiles[0].Path, "pip/__init__.py")
		assert.Equal(t, "pip", m.Runnable, "message %d", i)
	}
	assert.NotEqual(t, mods[0].ChangeDigest, mods[1].ChangeDigest)
	// Each runnable.modified follows its snapshot, in one batch.
	for _, i := range []int{3, 6} {
		assert.Equal(t, events.IntegritySubject(testHost), msgs[i].Subject(), "message %d", i)
	}
	assert.Equal(t, int64(3), tel.Sum(t, collector.MetricEventsSpooled, modified))

	// Back to the first change (A, B, A), within JetStream's duplicate
	// window: written again, so a new event, not a copy of the first.
	require.NoError(t, os.WriteFile(pipInit[0], tampered, 0o644))
	require.NoError(t, c.CollectNow(t.Context(), "venv"))
	_, mods = integrityEvents(t, b.waitStored(t, 10))
	require.Len(t, mods, 3)
	assert.Equal(t, mods[0].ChangeDigest, mods[2].ChangeDigest)
	assert.Equal(t, int64(1), tel.Sum(t, collector.MetricEventsDuplicates))
	assert.Equal(t, int64(4), tel.Sum(t, collector.MetricEventsSpooled, modified))
}

// TestNodeTargetSnapshotsThenReportsChanges checks a Node project: the
// first collection takes its snapshot, a later edit is reported once.
func TestNodeTargetSnapshotsThenReportsChanges(t *testing.T) {
	proj := filepath.Join(t.TempDir(), "deploy", "tool")
	require.NoError(t, os.MkdirAll(proj, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "package.json"), []byte(`{"name":"tool","version":"1.2.3","private":true}`), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(proj, "index.js"), []byte("console.log('hi')\n"), 0o644))
	proj, err := filepath.EvalSymlinks(proj)
	require.NoError(t, err)

	b := runBus(t, t.TempDir(), 0)
	target := collector.TargetConfig{Name: "tool", Kind: collector.KindNode, Dir: proj, Interval: time.Hour}
	c, _ := newCollector(t, testConfig(t, b.url, target), collector.Settings{})
	require.NoError(t, c.Start(t.Context()))
	evs, mods := integrityEvents(t, b.waitStored(t, 1))
	require.Len(t, evs, 1)
	assert.Empty(t, mods)
	assert.Equal(t, events.Target{Kind: collector.TargetNodeProject, Identifier: proj}, evs[0].Target)

	appendFile(t, filepath.Join(proj, "index.js"), "// tampered\n")
	require.NoError(t, c.CollectNow(t.Context(), "tool"))
	require.NoError(t, c.CollectNow(t.Context(), "tool"))
	evs, mods = integrityEvents(t, b.waitStored(t, 4))
	assert.Len(t, evs, 3)
	require.Len(t, mods, 1)
	m := mods[0]
	assert.Equal(t, events.Node, m.Ecosystem)
	assert.Equal(t, "tool", m.Package)
	assert.Equal(t, "1.2.3", m.Version)
	assert.Equal(t, "project", m.Source)
	assert.Equal(t, "snapshot", m.Baseline)
	assert.Equal(t, []events.FileChange{{Path: "index.js", Change: events.FileModified, Observed: m.ChangedFiles[0].Observed}}, m.ChangedFiles)
	assert.Equal(t, "pkg:npm/tool@1.2.3", m.Subject())
}
