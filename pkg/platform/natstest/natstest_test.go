package natstest_test

import (
	"testing"
	"time"

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
