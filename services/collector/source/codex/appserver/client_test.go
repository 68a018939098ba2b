package appserver

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/evidence/jsontree"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestCallAgainstCat uses cat as a server that echoes everything: the
// request comes back as a server request (it has id and method), the
// client refuses it, and the refusal comes back as the response.
func TestCallAgainstCat(t *testing.T) {
	c, err := Start(Config{Path: "cat"})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.Call(ctx, "ping", map[string]int{"n": 1})
	var rpc *RPCError
	require.ErrorAs(t, err, &rpc)
	assert.Equal(t, &RPCError{Code: -32601, Message: "runtimetruth answers no server requests"}, rpc)
	require.NoError(t, c.Shutdown(ctx))
	require.NoError(t, c.Shutdown(ctx), "Shutdown is idempotent")
	assert.Positive(t, c.Waited())
	assert.False(t, running(c.PID()))
}

func TestNotificationsAreDispatched(t *testing.T) {
	var got []string
	c, err := Start(Config{
		Path:           "sh",
		Args:           []string{"-c", `echo '{"method":"a"}'; echo '{"method":"b","params":{"x":1}}'; cat >/dev/null`},
		OnNotification: func(method string, _ jsontree.Value) { got = append(got, method) },
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.Wait(ctx, func() bool { return len(got) == 2 }))
	assert.Equal(t, []string{"a", "b"}, got)
	require.NoError(t, c.Shutdown(ctx))
}

func TestShutdownKillsGroupAndDescendants(t *testing.T) {
	// The leader ignores stdin EOF; its child moves to a process group of
	// its own, as Codex's MCP servers do.
	c, err := Start(Config{Path: "sh", Args: []string{"-c", `setsid sleep 60 & exec sleep 60`}})
	require.NoError(t, err)
	var kids []int
	require.Eventually(t, func() bool {
		kids = children(c.PID())
		return len(kids) == 1
	}, 5*time.Second, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.NoError(t, c.Shutdown(ctx))
	assert.Less(t, time.Since(start), CloseGrace, "an expired context cuts the grace period")
	assert.False(t, running(c.PID()), "leader")
	assert.False(t, running(kids[0]), "child %d", kids[0])
}

func TestExitErrorCarriesStderr(t *testing.T) {
	c, err := Start(Config{Path: "sh", Args: []string{"-c", `echo 'noise' >&2; echo 'Error: bad config' >&2; exit 1`}})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = c.Call(ctx, "initialize", nil)
	require.ErrorIs(t, err, ErrExited)
	assert.EqualError(t, err, "codex app-server exited: Error: bad config")
	require.NoError(t, c.Shutdown(ctx))
	assert.Contains(t, string(c.Stderr()), "noise")
}

func TestStartFailure(t *testing.T) {
	_, err := Start(Config{Path: "/nonexistent/" + strconv.Itoa(os.Getpid())})
	require.Error(t, err)
}
