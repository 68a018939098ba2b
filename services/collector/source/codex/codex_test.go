package codex_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/snapshot"
)

// TestMain doubles as a fake `codex` executable: when RT_FAKE_CODEX names
// a scenario, the test binary behaves as that fake app-server instead of
// running tests (see fake_test.go).
func TestMain(m *testing.M) {
	if scenario := os.Getenv(fakeEnv); scenario != "" {
		os.Exit(fakeCodex(scenario))
	}
	goleak.VerifyTestMain(m)
}

// recordsByKind indexes records and checks that no kind repeats.
func recordsByKind(t testing.TB, recs []snapshot.Record) map[string]snapshot.Record {
	t.Helper()
	out := make(map[string]snapshot.Record, len(recs))
	for _, r := range recs {
		_, dup := out[r.Kind]
		require.False(t, dup, "duplicate kind %s", r.Kind)
		out[r.Kind] = r
	}
	return out
}

func kinds(recs []snapshot.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Kind
	}
	return out
}

// marshal renders the records as a snapshot exactly as it would be written.
func marshal(t testing.TB, target snapshot.Target, recs []snapshot.Record) string {
	t.Helper()
	b, err := snapshot.New(target, recs...).Marshal(false)
	require.NoError(t, err)
	return string(b)
}

// changedKeys lists the data keys whose values differ between a and b
// (including keys present in only one).
func changedKeys(a, b snapshot.Data) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// procMatch lists running processes (not zombies) whose executable is exe
// or whose working directory is cwd (either may be empty).
func procMatch(t testing.TB, exe, cwd string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
			continue
		}
		if exe != "" {
			if p, err := os.Readlink(filepath.Join(dir, "exe")); err == nil && p == exe {
				out = append(out, fmt.Sprintf("pid %d exe %s", pid, p))
				continue
			}
		}
		if cwd != "" {
			if p, err := os.Readlink(filepath.Join(dir, "cwd")); err == nil && p == cwd {
				out = append(out, fmt.Sprintf("pid %d cwd %s", pid, p))
			}
		}
	}
	return out
}
