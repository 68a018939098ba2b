package natstest_test

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunJetStream(t *testing.T) {
	s, url := natstest.RunJetStream(t)
	assert.True(t, s.JetStreamEnabled())
	nc, js := natstest.Connect(t, url)
	assert.True(t, nc.IsConnected())
	info, err := js.AccountInfo(t.Context())
	require.NoError(t, err)
	assert.Zero(t, info.Streams)
}

func TestRunCluster(t *testing.T) {
	servers, urls := natstest.RunCluster(t, 3)
	require.Len(t, servers, 3)
	for _, s := range servers {
		assert.Equal(t, 2, natstest.Peers(s))
	}
	_, js := natstest.Connect(t, urls)
	info, err := js.AccountInfo(t.Context())
	require.NoError(t, err)
	assert.Zero(t, info.Streams)
}

func TestCheckFor(t *testing.T) {
	n := 0
	natstest.CheckFor(t, time.Second, time.Millisecond, func() error {
		if n++; n < 3 {
			return assert.AnError
		}
		return nil
	})
	assert.Equal(t, 3, n)
}

// TestStartProxy: a client behind the proxy talks to the server as if
// directly, each direction's hook sees what crosses it, and what a hook
// holds back arrives only once the hook lets it go.
func TestStartProxy(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	var mu sync.Mutex
	var toServer, toClient []byte
	hold := make(chan struct{})
	held := make(chan struct{}, 1)
	proxied := natstest.StartProxy(t, url, natstest.ProxyHooks{
		ToServer: func(b []byte) { mu.Lock(); toServer = append(toServer, b...); mu.Unlock() },
		ToClient: func(b []byte) {
			mu.Lock()
			toClient = append(toClient, b...)
			reply := bytes.Contains(b, []byte("MSG reply "))
			mu.Unlock()
			if reply {
				held <- struct{}{}
				<-hold
			}
		},
	})
	release := sync.OnceFunc(func() { close(hold) })
	t.Cleanup(release) // before the proxy's clean-up, which waits for the hook
	direct, _ := natstest.Connect(t, url)
	_, err := direct.Subscribe("q", func(m *nats.Msg) { _ = m.Respond([]byte("pong")) })
	require.NoError(t, err)
	require.NoError(t, direct.Flush())

	nc, _ := natstest.Connect(t, proxied)
	sub, err := nc.SubscribeSync("reply")
	require.NoError(t, err)
	require.NoError(t, nc.PublishRequest("q", "reply", []byte("ping")))
	<-held // the reply reached the proxy and is held there
	_, err = sub.NextMsg(50 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "nothing arrives while the hook holds it")
	release()
	m, err := sub.NextMsg(10 * time.Second)
	require.NoError(t, err)
	assert.Equal(t, "pong", string(m.Data))
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, string(toServer), "PUB q reply 4")
	assert.Contains(t, string(toClient), "MSG reply ")
}
