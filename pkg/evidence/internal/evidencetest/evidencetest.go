// Package evidencetest holds test helpers shared by the evidence packages:
// fixture loading and golden-file comparison with an -update flag.
package evidencetest

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite golden files with the current output")

// Dir returns the module's shared testdata directory.
func Dir(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	require.True(tb, ok)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// Read returns the contents of a file under the shared testdata directory.
func Read(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(tb), name))
	require.NoError(tb, err)
	return b
}

// Golden compares got with the golden file name (under the shared testdata
// directory), rewriting it when the test runs with -update.
func Golden(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join(Dir(tb), name)
	if *update {
		require.NoError(tb, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(tb, err, "golden file missing; run the test with -update to create it")
	require.Equal(tb, string(want), string(got), "output differs from %s; run with -update if the change is intended", name)
}
