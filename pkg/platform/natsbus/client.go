package natsbus

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/runtimetruth/runtimetruth/pkg/platform/telemetry"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Client is one service's NATS connection, its JetStream context and the
// Publisher every event it sends goes through. The connection is either
// lent to it (a process that embeds the service, such as `runtimetruth
// up`, shares one; its lender closes it) or opened by OpenClient and owned:
// Close closes only an owned one.
type Client struct {
	Conn *nats.Conn
	JS   jetstream.JetStream
	Pub  *Publisher
	own  bool
}

// OpenClient returns a client on lent when it is not nil, else on a
// connection to cfg that it opens under name (Connect: a server not up yet
// is retried in the background, its connection events logged to log).
func OpenClient(cfg Config, name string, lent *nats.Conn, log *slog.Logger, tel telemetry.Providers) (*Client, error) {
	nc, own := lent, false
	if nc == nil {
		var err error
		if nc, err = Connect(cfg, name, LogEvents(log)); err != nil {
			return nil, err
		}
		own = true
	}
	js, err := jetstream.New(nc)
	if err != nil {
		if own {
			nc.Close()
		}
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return &Client{Conn: nc, JS: js, Pub: NewPublisher(js, tel), own: own}, nil
}

// Ensure creates or updates the streams, consumers and buckets of t.
func (c *Client) Ensure(ctx context.Context, t topology.Topology) error {
	return t.Ensure(ctx, c.JS)
}

// Owned reports whether the client opened its connection.
func (c *Client) Owned() bool { return c.own }

// Close closes the connection if the client opened it; a lent one is left
// to its lender. Safe on a nil client.
func (c *Client) Close() {
	if c != nil && c.own {
		c.Conn.Close()
	}
}
