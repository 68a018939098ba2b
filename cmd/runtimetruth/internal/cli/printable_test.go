package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/attestation/attestationtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// assertPrintable checks that human output carries no character that is
// not graphic, but for the newlines and tabs it lays itself out with.
func assertPrintable(t *testing.T, out string) {
	t.Helper()
	for _, r := range out {
		if r != '\n' && r != '\t' && !unicode.IsGraphic(r) {
			t.Errorf("output holds %U: %q", r, out)
			return
		}
	}
}

// Targets, hosts and approvers may hold format characters (U+202E turns
// the rest of a line around; the bus refuses only C0 and C1 controls):
// status, baseline put, list, show and approve's preview escape them;
// --json keeps them.
func TestBusTablesEscapeTargetsAndHosts(t *testing.T) {
	bus := startApproveBus(t)
	const (
		id       = "agent\u202eecivres.tnega"
		idShown  = `agent\u202eecivres.tnega`
		host     = "web\u200b01"
		hostShow = `web\u200b01`
		by       = "rev\u202eiewer"
	)
	s := fixtureSnapshot(t, "before.json")
	s.Target.Identifier = id
	f := filepath.Join(t.TempDir(), "baseline.json")
	b, err := s.Marshal(false)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(f, b, 0o600))

	r := run(t, "baseline", "put", f, "--nats", bus.url, "--by", by)
	require.Equal(t, 0, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "STORED: systemd.unit:"+idShown+"\n"), r.stdout)
	assertPrintable(t, r.stdout)

	r = run(t, "baseline", "list", "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "systemd.unit:"+idShown)
	assert.Contains(t, r.stdout, `by rev\u202eiewer`)
	assertPrintable(t, r.stdout)
	r = run(t, "baseline", "list", "--nats", bus.url, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, id, "--json is unchanged")

	bus.collected(t, host, s)
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		r = run(t, "status", "--nats", bus.url)
		if !strings.Contains(r.stdout, "PASS") {
			return assert.AnError
		}
		return nil
	})
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, hostShow)
	assert.Contains(t, r.stdout, "systemd.unit:"+idShown)
	assertPrintable(t, r.stdout)

	// What approve would adopt, and each host's latest snapshot.
	r = run(t, "baseline", "approve", "systemd.unit:"+id, "--nats", bus.url)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stdout, "REVIEW: systemd.unit:"+idShown)
	assert.Contains(t, r.stdout, "  host: "+hostShow+"\n")
	assert.Contains(t, r.stdout, "by "+`rev\u202eiewer`)
	assertPrintable(t, r.stdout)
	r = run(t, "baseline", "show", "systemd.unit:"+id, "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, hostShow)
	assertPrintable(t, r.stdout)

	r = run(t, "baseline", "rm", "systemd.unit:"+id, "--nats", bus.url)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "REMOVED: systemd.unit:"+idShown+"\n", r.stdout)
}

// File names come from the installed tree: integrity verify's table and
// integrity check's warning escape them.
func TestIntegrityOutputEscapesPaths(t *testing.T) {
	project := t.TempDir()
	writeFile(t, project, "package.json", `{"name":"mytools","version":"1.0.0"}`)
	writeFile(t, project, "greet.js", "console.log('hi')\n")
	r := run(t, "manifest", project)
	require.Equal(t, 0, r.code, r.stderr)
	t.Setenv("RUNTIMETRUTH_STATE_DIR", t.TempDir())

	writeFile(t, project, "evil\x1b[2J\r\u202e.js", "require('child_process')\n")
	r = run(t, "integrity", "verify", "--node", project)
	assert.Equal(t, 2, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, `added    evil\x1b[2J\r\u202e.js`)
	assertPrintable(t, r.stdout)

	r = run(t, "integrity", "check", "--node", project, "--runnable", "mytools")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stderr, `evil\x1b[2J\r\u202e.js`)
	assertPrintable(t, r.stderr)
}

// attest prints the paths it wrote, escaped.
func TestAttestPrintsPathsEscaped(t *testing.T) {
	dir := t.TempDir()
	keyFile := attestationtest.WriteCosignKey(t, dir, "pw").KeyFile
	t.Setenv("COSIGN_PASSWORD", "pw")
	stmt, bundle := filepath.Join(dir, "s\x1b[2J.json"), filepath.Join(dir, "b\n.json")
	r := run(t, "attest", fixture("before.json"), "--key", keyFile, "--statement", stmt, "--bundle", bundle)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "STATEMENT: "+filepath.Join(dir, `s\x1b[2J.json`)+"\nBUNDLE: "+filepath.Join(dir, `b\n.json`)+"\n")
	assertPrintable(t, r.stdout)
}
