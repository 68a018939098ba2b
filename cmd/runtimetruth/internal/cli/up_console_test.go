package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/cli"
	"github.com/runtimetruth/runtimetruth/cmd/runtimetruth/internal/console"
	"github.com/runtimetruth/runtimetruth/pkg/platform/logtest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

// up serves the console on loopback and prints its URL with a one-time
// token; the page shows up's own target, PASS once approved.
func TestUpServesTheConsole(t *testing.T) {
	repo := upWorkdir(t)
	ctx, cancel := context.WithCancel(t.Context())
	var out, errb logtest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Run(ctx, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errb}, "test",
			[]string{"up", "--data-dir", t.TempDir(), "--interval", "1s", "--no-codex", "--approve"})
	}()
	defer func() {
		cancel()
		assert.Equal(t, 0, <-done, out.String()+errb.String())
	}()

	line := regexp.MustCompile(`(?m)^console: (http://127\.0\.0\.1:\d+/\?token=\S+)$`)
	var launch string
	natstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		m := line.FindStringSubmatch(out.String())
		if m == nil {
			return fmt.Errorf("no console line yet:\n%s%s", out.String(), errb.String())
		}
		launch = m[1]
		return nil
	})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(launch)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == console.SessionCookie {
			session = c
		}
	}
	require.NotNil(t, session)

	natstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, strings.Split(launch, "?")[0], nil)
		require.NoError(t, err)
		req.AddCookie(session)
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		if !strings.Contains(string(body), repo) || !strings.Contains(string(body), `<span class="badge PASS">PASS</span>`) {
			return fmt.Errorf("the console does not show %s passing yet", repo)
		}
		return nil
	})
	resp, err = client.Get(launch)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the token a second time")
}
