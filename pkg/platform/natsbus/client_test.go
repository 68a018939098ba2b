package natsbus_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natstest"
	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

func TestClientClosesOnlyWhatItOpened(t *testing.T) {
	_, url := natstest.RunJetStream(t)
	cfg := natsbus.NewDefaultConfig()
	cfg.URL = url
	log := slog.New(slog.DiscardHandler)

	for _, tc := range []struct {
		name      string
		lent      bool
		wantOwned bool
	}{
		{name: "opened", lent: false, wantOwned: true},
		{name: "lent", lent: true, wantOwned: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lent *nats.Conn
			if tc.lent {
				lent, _ = natstest.Connect(t, url)
			}
			c, err := natsbus.OpenClient(cfg, "client-test", lent, log, telemetry.Providers{})
			require.NoError(t, err)
			assert.Equal(t, tc.wantOwned, c.Owned())
			if tc.lent {
				assert.Same(t, lent, c.Conn, "the lent connection is the client's")
			} else {
				assert.Equal(t, "client-test", c.Conn.Opts.Name)
			}
			require.NotNil(t, c.Pub)
			assert.Same(t, c.JS, c.Pub.JetStream(), "one JetStream context for the client and its publisher")

			require.NoError(t, c.Ensure(context.Background(), topology.New(1)))
			_, err = c.JS.Stream(context.Background(), topology.StreamEvidence)
			require.NoError(t, err, "Ensure created the topology")

			c.Close()
			assert.Equal(t, !tc.wantOwned, !c.Conn.IsClosed(), "Close closes an opened connection and leaves a lent one open")
		})
	}
	var nilClient *natsbus.Client
	nilClient.Close() // safe
}
