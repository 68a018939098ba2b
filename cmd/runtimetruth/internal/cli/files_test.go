package cli_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
)

// fileDeadline bounds a command given a FIFO: refused at once, it takes
// milliseconds; a command that opened the FIFO for reading would block
// until a writer came.
const fileDeadline = 10 * time.Second

// runWithin runs the command line and fails the test if it does not
// finish within fileDeadline. A FIFO a command blocks on is then opened
// for writing and closed, so that the blocked command ends.
func runWithin(t *testing.T, fifo string, args ...string) result {
	t.Helper()
	done := make(chan result, 1)
	go func() {
		var out, errb bytes.Buffer
		code := cli.Run(context.Background(), cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, "test", args)
		done <- result{code: code, stdout: out.String(), stderr: errb.String()}
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(fileDeadline):
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		t.Fatalf("%q did not finish within %s: it blocked on a FIFO", args, fileDeadline)
		return result{}
	}
}

// Every file a command line names (snapshots, policies, statements,
// bundles, keys, trusted roots, identity tokens) must be a regular file: a
// FIFO is refused without waiting for a writer, a device (/dev/zero) is
// refused unread, a directory is a clear error; each exits 1 with one
// error line.
func TestFileArgumentsMustBeRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	dirArg := filepath.Join(dir, "a-directory")
	require.NoError(t, os.Mkdir(dirArg, 0o700))
	regular := writeFile(t, dir, "any.json", "{}")
	before, after := fixture("before.json"), fixture("after.json")
	project := t.TempDir() // for integrity --node: the policy is read first
	outputs := func(args ...string) []string {
		return append(args, "--statement", filepath.Join(t.TempDir(), "s.json"), "--bundle", filepath.Join(t.TempDir(), "b.json"))
	}
	keyless := []string{"--certificate-identity", "me@example.com", "--certificate-oidc-issuer", "https://issuer.example.com"}

	cases := []struct {
		name string
		args func(bad string) []string
		want string // what the error says before the file's name
		// noDir: a directory is not this argument's error (an audit log
		// path is the base name of its rotated files).
		noDir bool
	}{
		{"digest", func(bad string) []string { return []string{"digest", bad} }, "could not read snapshot", false},
		{"diff before", func(bad string) []string { return []string{"diff", bad, after} }, "could not read snapshot", false},
		{"diff after", func(bad string) []string { return []string{"diff", before, bad} }, "could not read snapshot", false},
		{"verify baseline", func(bad string) []string { return []string{"verify", bad, after} }, "could not read baseline", false},
		{"verify current", func(bad string) []string { return []string{"verify", before, bad} }, "could not read current", false},
		{"verify policy", func(bad string) []string { return []string{"verify", before, after, "--policy", bad} }, "could not read policy", false},
		{"baseline put", func(bad string) []string { return []string{"baseline", "put", bad, "--nats", "nats://127.0.0.1:1"} }, "could not read baseline", false},
		{"attest baseline", func(bad string) []string { return outputs("attest", bad, "--key", regular) }, "could not read baseline", false},
		{"attest key", func(bad string) []string { return outputs("attest", before, "--key", bad) }, "could not read key", false},
		{"attest trusted root", func(bad string) []string {
			return outputs("attest", before, "--trusted-root", bad, "--identity-token-file", regular)
		}, "could not read trusted root", false},
		{"attest identity token", func(bad string) []string {
			return outputs("attest", before, "--identity-token-file", bad, "--fulcio-url", "http://127.0.0.1:1", "--rekor-url", "http://127.0.0.1:1")
		}, "could not read identity token", false},
		{"verify-attestation baseline", func(bad string) []string {
			return outputs("verify-attestation", bad, after, "--key", regular)
		}, "could not read baseline", false},
		{"verify-attestation statement", func(bad string) []string {
			return []string{"verify-attestation", before, after, "--statement", bad, "--bundle", regular, "--key", regular}
		}, "could not read statement", false},
		{"verify-attestation bundle", func(bad string) []string {
			return []string{"verify-attestation", before, after, "--statement", regular, "--bundle", bad, "--key", regular}
		}, "could not read bundle", false},
		{"verify-attestation key", func(bad string) []string {
			return []string{"verify-attestation", before, after, "--statement", regular, "--bundle", regular, "--key", bad}
		}, "could not read public key", false},
		{"verify-attestation trusted root", func(bad string) []string {
			return append([]string{"verify-attestation", before, after, "--statement", regular, "--bundle", regular, "--trusted-root", bad}, keyless...)
		}, "could not read trusted root", false},
		{"integrity verify policy", func(bad string) []string {
			return []string{"integrity", "verify", "--node", project, "--policy", bad, "--state-dir", t.TempDir()}
		}, "could not read policy", false},
		{"inspect node integrity policy", func(bad string) []string {
			return []string{"inspect", "node", project, "--integrity-policy", bad, "--state-dir", t.TempDir()}
		}, "could not read policy", false},
		{name: "audit verify log", args: func(bad string) []string { return []string{"audit", "verify", "--jsonl", bad} }, want: "open audit log: open", noDir: true},
		{name: "audit verify checkpoints", args: func(bad string) []string {
			return []string{"audit", "verify", "--jsonl", regular, "--checkpoints", bad}
		}, want: "checkpoints: open"},
		{name: "audit verify checkpoint key", args: func(bad string) []string {
			return []string{"audit", "verify", "--jsonl", regular, "--checkpoints", regular, "--checkpoint-key", bad}
		}, want: "checkpoint public key: open"},
		{name: "audit verify hmac key", args: func(bad string) []string { return []string{"audit", "verify", "--jsonl", regular, "--key", bad} }, want: "hmac key: open"},
		{name: "audit tail log", args: func(bad string) []string { return []string{"audit", "tail", "--jsonl", bad, "--follow=false"} }, want: "error: open", noDir: true},
	}
	kinds := []struct{ name, path, reason string }{
		{"fifo", fifo, "not a regular file (a FIFO)"},
		{"dev-zero", "/dev/zero", "not a regular file (a character device)"},
		{"directory", dirArg, "is a directory"},
	}
	for _, tc := range cases {
		for _, k := range kinds {
			if tc.noDir && k.path == dirArg {
				continue
			}
			t.Run(tc.name+"/"+k.name, func(t *testing.T) {
				r := runWithin(t, fifo, tc.args(k.path)...)
				assert.Equal(t, 1, r.code, "stdout=%q stderr=%q", r.stdout, r.stderr)
				assert.True(t, strings.HasPrefix(r.stderr, "runtimetruth: error: "), r.stderr)
				assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
				assert.Contains(t, r.stderr, tc.want+" ")
				assert.Contains(t, r.stderr, k.reason)
			})
		}
	}
}

// A snapshot may come from standard input ("-"); the other files may not.
func TestStandardInputIsASnapshotOnly(t *testing.T) {
	stdinRun := func(stdin string, args ...string) result {
		var out, errb bytes.Buffer
		code := cli.Run(context.Background(), cli.IO{In: strings.NewReader(stdin), Out: &out, Err: &errb}, "test", args)
		return result{code: code, stdout: out.String(), stderr: errb.String()}
	}
	before := mustRead(t, fixture("before.json"))
	fromFile := run(t, "digest", fixture("before.json"))
	require.Equal(t, 0, fromFile.code, fromFile.stderr)
	r := stdinRun(before, "digest", "-")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, fromFile.stdout, r.stdout)

	r = stdinRun(before, "verify", "-", fixture("before.json"))
	assert.Equal(t, 0, r.code, r.stderr)

	r = stdinRun("", "verify", fixture("before.json"), fixture("after.json"), "--policy", "-")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "could not read policy '-': standard input is not accepted here; name a file")

	// Standard input is bounded like a file.
	r = stdinRun(strings.Repeat(" ", 32<<20+1), "digest", "-")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "file too large")
}

// A symbolic link the user names is followed: the path is their choice.
func TestFileArgumentSymlinkIsFollowed(t *testing.T) {
	dir := t.TempDir()
	abs, err := filepath.Abs(fixture("before.json"))
	require.NoError(t, err)
	link := filepath.Join(dir, "baseline.json")
	require.NoError(t, os.Symlink(abs, link))
	r := run(t, "verify", link, fixture("before.json"))
	assert.Equal(t, 0, r.code, r.stderr)

	fifoLink := filepath.Join(dir, "fifo-link")
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600))
	require.NoError(t, os.Symlink(filepath.Join(dir, "fifo"), fifoLink))
	r = runWithin(t, filepath.Join(dir, "fifo"), "digest", fifoLink)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "not a regular file (a FIFO)")
}
