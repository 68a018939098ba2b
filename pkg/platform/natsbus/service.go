package natsbus

import (
	"strings"
	"unicode"

	"github.com/runtimetruth/runtimetruth/pkg/events"
	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
)

// MaxReplicas bounds ServiceConfig.Replicas: JetStream replicates a stream
// over at most five servers.
const MaxReplicas = 5

// ServiceConfig holds the keys every service on the bus shares: how to
// reach NATS, the name of this instance and the replica count of what it
// ensures. A service's Config embeds it with `mapstructure:",squash"`, so
// its keys (nats.*, instance, replicas) stay at the top level.
type ServiceConfig struct {
	// NATS says how to reach NATS (key nats); ignored when the service is
	// lent a connection (its Settings.Conn). The connection is named
	// "runtimetruth-<service>" unless nats.name says otherwise.
	NATS Config `mapstructure:"nats"`
	// Instance names this instance in the source of the events it
	// publishes (/<service>/<instance>); empty means the host name
	// (lifecycle.Instance).
	Instance string `mapstructure:"instance"`
	// Replicas is the replica count of the streams, consumers and buckets
	// the service ensures (1 for one server, 3 or 5 in a cluster).
	Replicas int `mapstructure:"replicas"`
}

// NewDefaultServiceConfig returns the defaults: a local server, the host
// name as instance, one replica.
func NewDefaultServiceConfig() ServiceConfig {
	return ServiceConfig{NATS: NewDefaultConfig(), Replicas: 1}
}

// Validate checks the NATS section, that the instance name fits in an
// event source, and the replica count (1 to MaxReplicas).
func (c *ServiceConfig) Validate() error {
	if err := c.NATS.Validate(); err != nil {
		return err
	}
	if strings.IndexFunc(c.Instance, unicode.IsControl) >= 0 || len(c.Instance) > events.MaxNameLength {
		return config.Invalidf("instance: control characters or longer than %d bytes", events.MaxNameLength)
	}
	if c.Replicas < 1 || c.Replicas > MaxReplicas {
		return config.Invalidf("replicas: %d (want 1 to %d)", c.Replicas, MaxReplicas)
	}
	return nil
}
