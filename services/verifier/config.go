package verifier

import (
	"strings"
	"time"

	"github.com/runtimetruth/runtimetruth/pkg/platform/config"
	"github.com/runtimetruth/runtimetruth/pkg/platform/natsbus"
	"github.com/runtimetruth/runtimetruth/pkg/platform/topology"
)

// Config is the verifier's configuration (see README.md for every key).
// Load it with config.Load(path, "RUNTIMETRUTH_VERIFIER", &cfg, nil) over
// NewDefaultConfig().
type Config struct {
	// ServiceConfig is how to reach NATS (nats.*, the keys every service
	// shares; ignored when Settings.Conn is set; the connection is named
	// "runtimetruth-verifier" unless nats.name says otherwise), the
	// instance named in the source of the events the verifier publishes
	// (/verifier/<instance>) and the replica count of the streams,
	// consumers and buckets it ensures.
	natsbus.ServiceConfig `mapstructure:",squash"`
	// Consumer is the durable consumer on the EVIDENCE stream; every
	// verifier instance sharing it shares the work.
	Consumer string `mapstructure:"consumer"`
	// Concurrency is how many batches one instance verifies at once (each
	// up to 64 snapshots: what has arrived when a worker is free).
	Concurrency int `mapstructure:"concurrency"`
	// HandlerTimeout bounds the handling of one snapshot; with the ack it
	// stays within the consumer's ack wait (30 s), so at most 25 s.
	HandlerTimeout time.Duration `mapstructure:"handler_timeout"`
	// StartTimeout bounds Start: connecting and ensuring the topology.
	StartTimeout time.Duration `mapstructure:"start_timeout"`
	// ShutdownTimeout bounds Shutdown: finishing the snapshots in hand.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// Attestation configures the check of baselines that name a required
	// identity.
	Attestation AttestationConfig `mapstructure:"attestation"`
	// Enrollment is how evidence is authenticated against the host
	// registry: "manual" (the default: a new host's key waits for
	// `runtimetruth host approve`), "first-use" (the first key seen for a
	// host is pinned) or "off" (signatures are not checked: any credential
	// that may publish evidence speaks for any host). With either
	// of the last two, evidence that is unsigned, signed by a key that is
	// not the host's enrolled one, or badly signed, or whose time is more
	// than MaxClockSkew from this verifier's clock, changes nothing: it is
	// dead-lettered with its reason.
	Enrollment string `mapstructure:"enrollment"`
	// MaxClockSkew bounds how far an evidence event's time may be from
	// the verifier's clock, in the past or the future (default 5m).
	MaxClockSkew time.Duration `mapstructure:"max_clock_skew"`
	// StaleAfter is how long a host's target collected on an interval may
	// send no authentic evidence before it gets a stale verdict; 0 (the
	// default) means three of its collection intervals, at least
	// MinStaleAfter. A target collected once never goes stale.
	StaleAfter time.Duration `mapstructure:"stale_after"`
}

// AttestationConfig configures attestation checks.
type AttestationConfig struct {
	// TrustedRootFile is the Sigstore trusted root (trusted_root.json)
	// attestations are verified against; empty: none, and baselines that
	// name a required identity get error verdicts.
	TrustedRootFile string `mapstructure:"trusted_root_file"`
}

// NewDefaultConfig returns the defaults: a local server, one replica, the
// topology's "verifier" consumer.
func NewDefaultConfig() Config {
	return Config{
		ServiceConfig:   natsbus.NewDefaultServiceConfig(),
		Consumer:        topology.ConsumerVerifier,
		Concurrency:     4,
		HandlerTimeout:  20 * time.Second,
		StartTimeout:    30 * time.Second,
		ShutdownTimeout: 25 * time.Second,
		Enrollment:      string(EnrollManual),
		MaxClockSkew:    5 * time.Minute,
	}
}

// Validate checks every value.
func (c *Config) Validate() error {
	if err := c.ServiceConfig.Validate(); err != nil {
		return err
	}
	if c.Consumer == "" || len(c.Consumer) > 255 || strings.ContainsAny(c.Consumer, ".*>/\\ \t\r\n") {
		return config.Invalidf("consumer: %q is not a durable consumer name", c.Consumer)
	}
	if c.Concurrency < 1 || c.Concurrency > topology.MaxAckPending {
		return config.Invalidf("concurrency: %d (want 1 to %d)", c.Concurrency, topology.MaxAckPending)
	}
	if limit := topology.AckWait - natsbus.DefaultAckTimeout; c.HandlerTimeout <= 0 || c.HandlerTimeout > limit {
		return config.Invalidf("handler_timeout: %s (want above 0 and at most %s, so that the ack lands within the %s ack wait)", c.HandlerTimeout, limit, topology.AckWait)
	}
	if c.StartTimeout <= 0 {
		return config.Invalidf("start_timeout: %s (want above 0)", c.StartTimeout)
	}
	if c.ShutdownTimeout <= 0 {
		return config.Invalidf("shutdown_timeout: %s (want above 0)", c.ShutdownTimeout)
	}
	switch Enrollment(c.Enrollment) {
	case EnrollOff, EnrollManual, EnrollFirstUse:
	default:
		return config.Invalidf("enrollment: %q (want off, manual or first-use)", c.Enrollment)
	}
	if c.MaxClockSkew <= 0 {
		return config.Invalidf("max_clock_skew: %s (want above 0)", c.MaxClockSkew)
	}
	if c.StaleAfter < 0 {
		return config.Invalidf("stale_after: %s (want 0, for three collection intervals, or above)", c.StaleAfter)
	}
	return nil
}
