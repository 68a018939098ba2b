package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
	"github.com/runtimetruth/runtimetruth/pkg/platform/logtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// runtimetruth console serves a bus's console behind OIDC on any address
// (the client secret from a file), and refuses what it cannot serve
// safely: a non-loopback address without OIDC, OIDC without its client.
func TestConsoleCommand(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	r := run(t, "console", "--nats", url, "--listen", "0.0.0.0:0")
	assert.Equal(t, cli.ExitError, r.code)
	assert.Contains(t, r.stderr, "is not a loopback address (a console on another address needs OIDC)")
	r = run(t, "console", "--nats", url, "--oidc-issuer", "https://idp.example")
	assert.Equal(t, cli.ExitError, r.code)
	assert.Contains(t, r.stderr, "--oidc-issuer needs --oidc-client-id and a client secret")

	r = run(t, "console", "--nats", url, "--clickhouse", "clickhouse://127.0.0.1:9000/default")
	assert.Equal(t, cli.ExitError, r.code)
	assert.Contains(t, r.stderr, "the trends page needs both --clickhouse and --dashboards")

	r = run(t, "console", "token", "deploy-bot", "--scope", "approver")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	assert.True(t, strings.HasPrefix(lines[0], "rtc_"))
	assert.Regexp(t, `^deploy-bot approver sha256:[0-9a-f]{64}$`, lines[1])
	assert.NotContains(t, lines[1], lines[0])
	tokens := filepath.Join(t.TempDir(), "tokens")
	require.NoError(t, os.WriteFile(tokens, []byte(lines[1]+"\n"), 0o600))
	r = run(t, "console", "token", "x", "--scope", "root")
	assert.Equal(t, cli.ExitError, r.code)
	assert.Contains(t, r.stderr, `scope "root"`)

	m, err := mockoidc.Run()
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Shutdown() })
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte(m.Config().ClientSecret+"\n"), 0o600))
	ctx, cancel := context.WithCancel(t.Context())
	var out, errb logtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, "test", []string{"console", "--nats", url,
			"--listen", "0.0.0.0:0", "--oidc-issuer", m.Issuer(), "--oidc-client-id", m.Config().ClientID,
			"--oidc-client-secret-file", secret, "--approver-group", "rt-approvers", "--api-tokens-file", tokens})
	}()
	line := regexp.MustCompile(`(?m)^console: http://\[?[0-9a-f.:]+\]?:\d+/$`)
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if !line.MatchString(out.String()) {
			return fmt.Errorf("no console line yet:\n%s%s", out.String(), errb.String())
		}
		return nil
	})
	cancel()
	assert.Equal(t, 0, <-done, out.String()+errb.String())
}
