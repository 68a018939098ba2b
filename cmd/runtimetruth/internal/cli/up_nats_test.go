package cli_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus/natsbustest"
)

// TestUpAndBusCommandsWithPassword runs up and the bus commands against an
// external server that requires a user and password: the first run's hint
// names the server and the credential flags, and the commands it names
// work.
func TestUpAndBusCommandsWithPassword(t *testing.T) {
	url := natsbustest.RunUserPassword(t, "ops", "s3cret-ops")
	password := natsbustest.WriteFile(t, "password", []byte("s3cret-ops\n"))
	repo := upWorkdir(t)
	target := "git.repository:" + repo
	bus := []string{"--nats", url, "--nats-user", "ops", "--nats-password-file", password}
	up := append([]string{"up", "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--once"}, bus...)

	r := run(t, up...)
	assert.Equal(t, 1, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "runtimetruth baseline approve '"+target+"' --nats "+url+" --nats-user ops --nats-password-file "+password+"\n")
	assert.NotContains(t, r.stdout, "s3cret", "file names only")

	// Review, then approve the digest reviewed (up's verifier runs with
	// enrollment off: its evidence is unauthenticated).
	r = run(t, append([]string{"baseline", "approve", target, "--json"}, bus...)...)
	require.Equal(t, 1, r.code, r.stderr)
	var preview struct{ Digest string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &preview))
	r = run(t, append([]string{"baseline", "approve", target, "--digest", preview.Digest, "--allow-unauthenticated"}, bus...)...)
	require.Equal(t, 0, r.code, r.stderr)
	r = run(t, up...)
	assert.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "PASS   "+target)
	r = run(t, append([]string{"status"}, bus...)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, target)

	r = run(t, "status", "--nats", url)
	assert.Equal(t, 1, r.code, "no credentials: %s", r.stdout)
	assert.Contains(t, r.stderr, "connect to NATS")
	assert.Contains(t, r.stderr, "Authorization Violation")
}

// TestUpAndBusCommandsWithMutualTLS runs up and status against a server
// that requires TLS with a client certificate.
func TestUpAndBusCommandsWithMutualTLS(t *testing.T) {
	p := natsbustest.NewPKI(t)
	url := natsbustest.RunMutualTLS(t, p)
	repo := upWorkdir(t)
	tls := []string{"--nats", url, "--nats-tls-ca", p.CA, "--nats-tls-cert", p.ClientCert, "--nats-tls-key", p.ClientKey}

	r := run(t, append([]string{"up", "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--once", "--approve"}, tls...)...)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "APPROVED  git.repository:"+repo)
	assert.Contains(t, r.stdout, "PASS   git.repository:"+repo)

	r = run(t, append([]string{"baseline", "list"}, tls...)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "git.repository:"+repo)

	r = run(t, "baseline", "list", "--nats", url, "--nats-tls-ca", p.CA)
	assert.Equal(t, 1, r.code, "no client certificate: %s", r.stdout)
	r = run(t, "baseline", "list", "--nats", url, "--nats-tls-cert", p.ClientCert)
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "cert_file and key_file go together")
}

func TestUpCredentialFlagsNeedNATS(t *testing.T) {
	r := run(t, "up", "--data-dir", t.TempDir(), "--nats-creds", "/x.creds", "--once")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "go with --nats URL")
}

func TestUpHintNamesTheDataDirectory(t *testing.T) {
	repo := upWorkdir(t)
	data := t.TempDir()
	r := run(t, "up", "--data-dir", data, "--interval", "1s", "--no-codex", "--once")
	assert.Equal(t, 1, r.code, r.stdout+r.stderr)
	assert.Contains(t, r.stdout, "runtimetruth status --data-dir "+data+"; then approve it from another terminal:\n")
	assert.Contains(t, r.stdout, "runtimetruth baseline approve 'git.repository:"+repo+"' --data-dir "+data+"\n")
}
