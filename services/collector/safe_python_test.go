package collector_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
	"github.com/runtimetruth/runtimetruth/services/collector"
)

// TestPythonTargetNeverRunsTheInterpreter checks the collector's python
// targets over a real venv whose interpreters (bin/python, python3,
// python3.X) are replaced by scripts that leave a marker file: the
// collector, running as root over an environment others can write,
// checks it without running any of them, with and without a runnable.
func TestPythonTargetNeverRunsTheInterpreter(t *testing.T) {
	venv := newVenv(t)
	marker := filepath.Join(t.TempDir(), "interpreter-ran")
	pythons, err := filepath.Glob(filepath.Join(venv, "bin", "python*"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(pythons), 2, "python and python3 at least")
	for _, p := range pythons {
		require.NoError(t, os.Remove(p))
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho \"$@\" >> '"+marker+"'\nexit 1\n"), 0o755)) //nolint:gosec // an executable trap
	}

	b := runBus(t, t.TempDir(), 0)
	runnable := collector.TargetConfig{Name: "pip", Kind: collector.KindPython, Env: venv,
		Options: collector.TargetOptions{Runnable: "pip"}, Interval: time.Hour}
	everything := collector.TargetConfig{Name: "everything", Kind: collector.KindPython, Env: venv, Interval: time.Hour}
	c, _ := newCollector(t, testConfig(t, b.url, runnable, everything), collector.Settings{})
	require.NoError(t, c.Start(t.Context()))
	evs, mods := integrityEvents(t, b.waitStored(t, 2))
	require.Len(t, evs, 2)
	assert.Empty(t, mods)
	for _, ev := range evs {
		s, err := ev.ParseSnapshot()
		require.NoError(t, err)
		require.Len(t, s.Evidence, 1)
		assert.Equal(t, snapshot.String("ok"), s.Evidence[0].Data["dist:pip:status"], "pip is checked")
	}
	require.NoError(t, c.CollectNow(t.Context(), "pip"))
	require.NoError(t, c.CollectNow(t.Context(), "everything"))
	b.waitStored(t, 4)
	_, err = os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "the collector ran the environment's interpreter")
}
